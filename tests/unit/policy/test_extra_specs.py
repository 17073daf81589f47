"""Every key of a flavor's extra specs and of the image's properties is read, counted or the
hypervisor's business; anything else refuses the request, naming the key."""

import dataclasses

import pytest

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.conf import opts
from scheduler.exception import InvalidRequest
from scheduler.policy import extra_specs, filters

UUID = "00000000-0000-4000-8000-000000000001"


def spec(specs=None, props=None, vcpus=2):
    return RequestSpec.from_wire(
        {"instance_uuids": [UUID], "image": {"properties": props or {}},
         "instance_type": {"memory_mb": 512, "vcpus": vcpus, "root_gb": 10, "extra_specs": specs or {}}},
        {})


def unread(conf, request, enabled=None):
    opts.register_plugin_opts(conf)
    if enabled is not None:
        conf.set_override("enabled_filters", enabled, "filter_scheduler")
    return extra_specs.unread(request, filters.enabled_filters(conf), filters.all_filters())


@pytest.mark.parametrize("specs, props", [
    ({"hw:mem_page_size": "large", "hw:numa_nodes": "2", "quota:disk_read_bytes_sec": "10240",
      "hw_rng:allowed": "true", "os:secure_boot": "required", "hide_hypervisor_id": "true"}, {}),
    ({"resources:VCPU": "0", "resources:PCPU": "0", "resources:DISK_GB": "0"}, {}),
    ({}, {"hw_disk_bus": "scsi", "os_distro": "debian", "img_config_drive": "mandatory",
          "vmware_ostype": "otherGuest", "xenapi_use_agent": "false"}),
])
def test_the_hypervisors_keys_and_the_classic_resources_pass_the_defaults(conf, specs, props):
    assert unread(conf, spec(specs, props)) is None


@pytest.mark.parametrize("specs, props, enabled, why", [
    ({"colour": "blue"}, {}, None,
     "extra spec colour is read by AggregateInstanceExtraSpecsFilter or ComputeCapabilitiesFilter, which "
     "is not enabled: add it to [filter_scheduler] enabled_filters, or leave the key out"),
    ({"capabilities:hypervisor_type": "QEMU"}, {}, None,
     "extra spec capabilities:hypervisor_type is read by ComputeCapabilitiesFilter, which is not "
     "enabled: add it to [filter_scheduler] enabled_filters, or leave the key out"),
    ({"zzz:x": "1"}, {}, None,
     "extra spec zzz:x: no enabled filter reads it, it is not a resource, and it is not a key Berth "
     "leaves to the hypervisor: leave it out (user guide: Flavors and images)"),
    ({}, {"description": "a nice image"}, None,
     "image property description: no enabled filter reads it, it is not a resource, and it is not a key "
     "Berth leaves to the hypervisor: leave it out (user guide: Flavors and images)"),
    ({"pci_passthrough:alias": "a1:1"}, {}, None,
     "extra spec pci_passthrough:alias is not supported: PCI devices are not tracked: give them a custom "
     "resource class on the agents ([compute_agent] resources) and ask for resources:CUSTOM_..."),
    ({"accel:device_profile": "p1"}, {}, None, "extra spec accel:device_profile is not supported: no "
     "accelerator service: give the devices a custom resource class and ask for resources:CUSTOM_..."),
    ({"group_policy": "none"}, {}, None, "extra spec group_policy is not supported: numbered request "
     "groups are not supported: every host is a single resource provider"),
    ({}, {"hw_mem_encryption": "true"}, None, "image property hw_mem_encryption is not supported: not "
     "turned into a resource: ask for resources:MEM_ENCRYPTION_CONTEXT=1 and the CPU's trait instead"),
])
def test_what_nothing_reads_is_refused_naming_the_key(conf, specs, props, enabled, why):
    assert unread(conf, spec(specs, props), enabled) == why


def test_a_key_some_enabled_filter_reads_passes(conf):
    enabled = ["ComputeFilter", "ComputeCapabilitiesFilter"]
    assert unread(conf, spec({"capabilities:hypervisor_type": "QEMU", "colour": "blue"}), enabled) is None


def test_the_aggregate_image_filter_reads_only_its_namespace(conf):
    enabled = ["ComputeFilter", "AggregateImagePropertiesIsolation"]
    assert unread(conf, spec(props={"description": "x"}), enabled) is None
    conf.set_override("aggregate_image_properties_isolation_namespace", "berth", "filter_scheduler")
    assert unread(conf, spec(props={"berth.tier": "gold"}), enabled) is None
    assert unread(conf, spec(props={"description": "x"}), enabled).startswith("image property description:")


@pytest.mark.parametrize("specs, amounts", [
    ({}, {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 10}),
    ({"hw:cpu_policy": "dedicated"}, {"VCPU": 0, "PCPU": 2, "MEMORY_MB": 512, "DISK_GB": 10}),
    ({"hw:cpu_policy": "shared"}, {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 10}),
    ({"resources:VGPU": "1", "resources:CUSTOM_FPGA": "2", "resources:DISK_GB": "0"},
     {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 0, "VGPU": 1, "CUSTOM_FPGA": 2}),
    ({"resources:VCPU": "0", "resources:PCPU": "4"}, {"VCPU": 0, "PCPU": 4, "MEMORY_MB": 512, "DISK_GB": 10}),
    ({"resources:VGPU": "0"}, {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 10}),
])
def test_a_flavor_takes_the_amounts_its_extra_specs_say(specs, amounts):
    assert spec(specs).flavor.amounts == amounts


@pytest.mark.parametrize("specs, props, message", [
    ({"resources:VGPU": "one"}, {}, "flavor.extra_specs[resources:VGPU]: the amount must be a whole number"),
    ({"resources:VGPU": "-1"}, {}, "flavor.extra_specs[resources:VGPU]: the amount must be a whole number"),
    ({"resources:GPU": "1"}, {}, "flavor.extra_specs[resources:GPU]: 'GPU' is not a resource class"),
    ({"resources:custom_x": "1"}, {}, "'custom_x' is not a resource class"),
    ({"resources1:VGPU": "1"}, {}, "numbered request groups are not supported"),
    ({"trait1:CUSTOM_X": "required"}, {}, "numbered request groups are not supported"),
    ({"trait:CUSTOM_X": "preferred"}, {},
     "flavor.extra_specs[trait:CUSTOM_X]: must be required or forbidden"),
    ({"trait:HW_CPU_X86_AVX9": "required"}, {}, "'HW_CPU_X86_AVX9' is not a trait"),
    ({"hw:cpu_policy": "mixed"}, {}, "mixed needs guest NUMA cells"),
    ({"hw:cpu_policy": "dedicated", "resources:PCPU": "2"}, {},
     "hw:cpu_policy=dedicated and resources:PCPU both say how the vCPUs are taken"),
])
def test_a_malformed_request_is_refused_naming_the_key(specs, props, message):
    with pytest.raises(InvalidRequest, match=None) as refused:
        spec(specs, props)
    assert message in str(refused.value)


def test_the_traits_of_a_request_are_the_flavors_and_the_images():
    request = spec({"trait:CUSTOM_SSD": "required", "trait:HW_CPU_X86_AVX512F": "forbidden"},
                   {"trait:HW_CPU_X86_AVX2": "required", "hw_cpu_policy": "shared"})
    assert request.required_traits == {"CUSTOM_SSD", "HW_CPU_X86_AVX2"}
    assert request.forbidden_traits == {"HW_CPU_X86_AVX512F"}


def test_a_resized_flavor_counts_again():
    flavor = Flavor(memory_mb=512, root_gb=1, ephemeral_gb=0, vcpus=2,
                    extra_specs={"hw:cpu_policy": "dedicated"})
    assert dataclasses.replace(flavor, vcpus=4).amounts["PCPU"] == 4


@pytest.mark.parametrize("specs, props, message", [
    ({}, {"trait:CUSTOM_X": "forbidden"}, "an image can only require a trait"),
    ({}, {"trait:custom_x": "required"}, "'custom_x' is not a trait"),
    ({"trait:CUSTOM_X": "forbidden"}, {"trait:CUSTOM_X": "required"}, "the image requires a trait its "
     "flavor forbids"),
    ({}, {"hw_cpu_policy": "dedicated"}, "Berth takes the CPU policy from the flavor"),
])
def test_an_image_contradicting_its_flavor_is_refused_as_what_no_filter_honours(conf, specs, props, message):
    """Refused with the other unhonoured requests, after the request is read: the instance's row
    keeps its name and flavor."""
    assert message in unread(conf, spec(specs, props))


@pytest.mark.parametrize("specs, props, why", [
    ({"hw:cpu_polcy": "dedicated"}, {}, "extra spec hw:cpu_polcy is no key Berth or the hypervisor knows: "
     "did you mean hw:cpu_policy?"),
    ({"quota:disk_read_byte_sec": "1"}, {}, "extra spec quota:disk_read_byte_sec is no key Berth or the "
     "hypervisor knows: did you mean quota:disk_read_bytes_sec?"),
    ({"hw:frobnicate": "yes"}, {}, "extra spec hw:frobnicate is no key Berth or the hypervisor knows; leave "
     "it out (user guide: Flavors and images)"),
    ({}, {"hw_architecure": "x86_64"}, "image property hw_architecure is no key Berth or the hypervisor "
     "knows: did you mean hw_architecture?"),
    ({}, {"os_distr": "debian"}, "image property os_distr is no key Berth or the hypervisor knows: did you "
     "mean os_distro?"),
])
def test_a_misspelt_key_of_the_hypervisors_namespaces_is_refused_with_the_likely_one(conf, specs, props, why):
    assert unread(conf, spec(specs, props)) == why


def test_numbered_numa_keys_and_glances_own_properties_are_the_hypervisors(conf):
    assert unread(conf, spec({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0,1", "hw:numa_mem.1": "1024"},
                             {"hw_numa_cpus.0": "0", "os_glance_importer": "x", "os_hash_algo": "sha512",
                              "owner_specified.openstack.md5": "abc"})) is None
