"""Legacy image property names and aliases, read as Nova reads them, by ImagePropertiesFilter
and ImagePropertiesWeigher (berth_contract/image_meta.py)."""

import uuid

import numpy as np
import pytest

from berth_contract import image_meta
from berth_contract.host_report import HostReport
from compute_agent.resource_tracker import ResourceTracker
from scheduler.policy import hints
from scheduler.policy.host_state import HostTable
from tests.unit.policy.test_catalog import image_spec, passing, plugin

FLAVOR = {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}


def report(host, **facts):
    return {"host": host, "nodename": host, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100,
            "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0,
            "supported_instances": [["x86_64", "kvm", "hvm"]], **facts}


def test_standard_names_win_over_legacy_ones_and_values_are_canonical():
    assert image_meta.standard({"architecture": "AMD64", "vm_mode": "pv", "hypervisor_type": "xapi",
                                "hypervisor_version_requires": ">=6.0", "os_distro": "Ubuntu"}) == {
        "hw_architecture": "x86_64", "hw_vm_mode": "xen", "img_hv_type": "xen",
        "img_hv_requested_version": ">=6.0", "os_distro": "Ubuntu"}
    assert image_meta.standard({"architecture": "aarch64", "hw_architecture": "i386"}) == {
        "hw_architecture": "i686"}


# -- ImagePropertiesFilter: hypervisor_version_requires ----------------------------------------

@pytest.fixture
def versions():
    table = HostTable()
    for name, version in (("v2.11", 2011000), ("v6.1", 6001000)):
        table.update_from_report(table.add(name), HostReport.from_wire(
            report(name, hypervisor_version=version), name), now=0.0)
    return table


@pytest.mark.parametrize(("properties", "expected"), [
    ({"hypervisor_version_requires": ">=6.0"}, ["v6.1"]),
    ({"hypervisor_version_requires": "<6.0"}, ["v2.11"]),
    # Both given: the standard name wins.
    ({"img_hv_requested_version": "<6.0", "hypervisor_version_requires": ">=6.0"}, ["v2.11"]),
    ({"img_hv_requested_version": ">=6.0", "hypervisor_version_requires": "<6.0"}, ["v6.1"]),
])
def test_image_properties_filter_reads_the_legacy_hypervisor_version_requires(policy_conf, versions,
                                                                              properties, expected):
    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    assert passing(f, versions, image_spec(architecture="x86_64", **properties)) == expected


@pytest.mark.parametrize("vectorized", [True, False])
@pytest.mark.parametrize(("properties", "why"), [
    ({"hw_architecture": "aarch64"},
     "the image asks for hw_architecture aarch64: all 2 hosts run none such (they offer x86_64/kvm/hvm)"),
    ({"hw_architecture": "x86_64", "hypervisor_version_requires": ">=7.0"},
     "the hypervisor version of all 2 hosts fails hypervisor_version_requires >=7.0"),
])
def test_when_no_host_is_left_the_reason_says_what_the_image_asks_that_they_lack(
        policy_conf, versions, properties, why, vectorized):
    from scheduler.exception import NoValidHost
    from scheduler.policy.selection import Selector

    selector = Selector([plugin(policy_conf, "filter", "ImagePropertiesFilter")], [], vectorized=vectorized)
    with pytest.raises(NoValidHost) as refused:
        selector.select(versions, image_spec(**properties))
    assert str(refused.value).endswith(f"ImagePropertiesFilter removed 2 ({why}); none left")


def test_a_malformed_legacy_version_predicate_refuses_the_request_naming_it(policy_conf):
    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    spec = image_spec(hw_architecture="x86_64", hypervisor_version_requires="6.0")
    assert hints.unhonoured(spec, [f], {}, {}).startswith(
        "ImagePropertiesFilter: image property hypervisor_version_requires '6.0' is not a version predicate")


# -- ImagePropertiesWeigher: legacy names and aliases, on both sides ----------------------------

def agent_report(host, *images):
    """The report of an agent holding one instance per image (its image properties)."""
    tracker = ResourceTracker(host, {"memory_mb": 8192, "local_gb": 100, "vcpus": 8})
    for i, properties in enumerate(images):
        tracker.claim(str(uuid.UUID(int=i + 1)), FLAVOR, image_properties=properties)
    return tracker.report()


def weights(conf, table, **properties):
    w = plugin(conf, "weigher", "ImagePropertiesWeigher")
    spec = image_spec(**properties)
    per_host = [w.weigh(view, spec) for view in table.views()]
    assert list(w.weigh_vector(table, np.arange(len(table)), spec)) == per_host
    return per_host


@pytest.fixture
def weigher_conf(policy_conf):
    policy_conf.set_override("image_props_weight_multiplier", 1.0, "filter_scheduler")
    return policy_conf


def fleet(*reports):
    table = HostTable()
    for wire in reports:
        table.update_from_report(table.add(wire["host"]), HostReport.from_wire(wire, wire["host"]), now=0.0)
    return table


@pytest.mark.parametrize("instance_image", [
    {"architecture": "x86_64"}, {"hw_architecture": "amd64"}, {"architecture": "AMD64"},
    {"architecture": "aarch64", "hw_architecture": "x86_64"},  # the standard name wins
])
@pytest.mark.parametrize("requested", [{"hw_architecture": "x86_64"}, {"architecture": "amd64"}])
def test_image_properties_weigher_prefers_the_host_of_a_like_instance_however_named(
        weigher_conf, instance_image, requested):
    table = fleet(agent_report("alike", instance_image),
                  agent_report("other", {"hw_architecture": "aarch64"}))
    assert weights(weigher_conf, table, **requested) == [1.0, 0.0]


def test_an_instance_giving_both_names_counts_once(weigher_conf):
    table = fleet(agent_report("h", {"vm_mode": "hvm", "hw_vm_mode": "HVM"}, {"vm_mode": "hv"}))
    assert table.view(0).image_properties == {"hw_vm_mode": {"hvm": 2}}
    assert weights(weigher_conf, table, vm_mode="hvm") == [2.0]


def test_the_weight_setting_names_the_standard_property(weigher_conf):
    weigher_conf.set_override("image_props_weight_setting", ["img_hv_type=2"], "filter_scheduler")
    table = fleet(agent_report("h", {"hypervisor_type": "xapi"}, {"img_hv_type": "xen"}))
    assert weights(weigher_conf, table, hypervisor_type="xen") == [4.0]


def test_counts_an_older_agent_reports_under_legacy_names_are_read_in_standard_form(weigher_conf):
    counts = {"architecture": {"amd64": 2}, "hw_architecture": {"x86_64": 1}, "os_distro": {"ubuntu": 1}}
    table = fleet(report("old", image_properties=counts))
    assert table.view(0).image_properties == {"hw_architecture": {"x86_64": 3}, "os_distro": {"ubuntu": 1}}
    assert weights(weigher_conf, table, hw_architecture="x86_64", os_distro="ubuntu") == [4.0]


# -- ImagePropertiesWeigher: the properties and values Nova's ImageMetaProps keeps -------------

@pytest.mark.parametrize(("instance_image", "requested"), [
    ({"os_type": "Linux"}, {"os_type": "linux"}),  # Nova's OSType field is lower case
    ({"os_type": "linux"}, {"os_type": "LINUX"}),
    ({"hw_qemu_guest_agent": "yes"}, {"hw_qemu_guest_agent": "True"}),  # flexible booleans
    ({"hw_qemu_guest_agent": "maybe"}, {"hw_qemu_guest_agent": "no"}),  # both False
    ({"hw_cpu_cores": "04"}, {"hw_cpu_cores": "4"}),  # integers
    ({"vmware_adaptertype": "lsiLogic"}, {"hw_disk_bus": "scsi"}),  # the legacy adapter, split
    ({"vmware_adaptertype": "LsiLogicSAS"}, {"hw_scsi_model": "lsisas1068"}),
    ({"hw_vif_model": "VirtualE1000"}, {"hw_vif_model": "e1000"}),
    ({"trait:CUSTOM_GOLD": "required"}, {"trait:CUSTOM_GOLD": "required"}),  # traits_required
])
def test_a_like_instance_counts_as_nova_reads_its_image(weigher_conf, instance_image, requested):
    table = fleet(agent_report("alike", instance_image), agent_report("other", {"os_distro": "ubuntu"}))
    assert weights(weigher_conf, table, **requested) == [1.0, 0.0]


@pytest.mark.parametrize("properties", [
    {"custom_tag": "a"},  # not one of Nova's image metadata fields
    {"hw_numa_mem": "1024"},  # a field Nova builds from hw_numa_mem.0... only
    {"trait:CUSTOM_GOLD": "forbidden"},
    {"img_mappings": "[]"},  # Nova's compute does not keep it with the instance
])
def test_a_property_nova_drops_weighs_nothing(weigher_conf, properties):
    table = fleet(agent_report("h", properties))
    w = plugin(weigher_conf, "weigher", "ImagePropertiesWeigher")
    spec = image_spec(**properties)
    assert [w.weigh(view, spec) for view in table.views()] == [0.0]
    vector = w.weigh_vector(table, np.arange(len(table)), spec)
    assert vector is None or list(vector) == [0.0]  # None: nothing to weigh


def test_counts_an_older_agent_reports_as_written_are_read_as_nova_reads_them(weigher_conf):
    counts = {"os_type": {"Linux": 2, "linux": 1}, "custom_tag": {"a": 1}, "hw_pmu": {"on": 1, "yes": 1}}
    table = fleet(report("old", image_properties=counts))
    assert table.view(0).image_properties == {"os_type": {"linux": 3}, "hw_pmu": {"True": 2}}
    assert weights(weigher_conf, table, os_type="LINUX", custom_tag="a", hw_pmu="t") == [5.0]
