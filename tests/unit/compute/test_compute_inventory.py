"""The agent's resource classes and traits of [compute_agent]: cpu_dedicated_set, resources, the
resource_* fields and traits, each bad value refused at start naming the option; CPU traits of
/proc/cpuinfo's flags."""

import pytest

from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent import inventory
from compute_agent.cmd import agent as agent_cmd
from compute_agent.driver import cpu_traits, host_facts
from compute_agent.resource_tracker import ResourceTracker
from scheduler import conf as berth_conf
from tests.unit.compute.test_agent_driver_choice import run_until, write_conf


def new_conf(**options):
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("driver", "fake", "compute_agent")
    for name, value in options.items():
        # The fake driver's by their names of [compute_agent] (deprecated): fake_vcpus is [fake] vcpus.
        if name.startswith("fake_"):
            conf.set_override(name.removeprefix("fake_"), value, "fake")
        else:
            conf.set_override(name, value, "compute_agent")
    return conf


@pytest.mark.parametrize("text, cpus", [
    ("0,2,4", {0, 2, 4}),
    ("4-7,^6", {4, 5, 7}),
    ("^6,4-7", {4, 5, 7}),
    (" 1 - 3 , 8", {1, 2, 3, 8}),
    ("0-7,^2-5", {0, 1, 6, 7}),
    ("5", {5}),
])
def test_cpu_dedicated_set_reads_nova_syntax(text, cpus):
    assert inventory.parse_cpu_set(text) == cpus


@pytest.mark.parametrize("text, why", [
    ("1,,2", "empty entry in '1,,2'"),
    ("a-3", "'a' in 'a-3' is not a CPU id"),
    ("7-4", "range '7-4' runs backwards"),
    ("-1", "'' in '-1' is not a CPU id"),
    ("4-5,^4-5", "names no CPU once its exclusions are taken out"),
    ("99999", "'99999' in '99999' is not a CPU id"),
])
def test_a_bad_cpu_dedicated_set_is_refused_saying_why(text, why):
    with pytest.raises(ValueError, match="cpu_dedicated_set") as refused:
        inventory.parse_cpu_set(text)
    assert why in str(refused.value)


@pytest.mark.parametrize("options, why", [
    ({"resources": {"GPU": "2"}}, "[compute_agent] resources: 'GPU' is not a resource class"),
    ({"resources": {"VCPU": "2"}}, "VCPU cannot be given here"),
    ({"resources": {"PCPU": "2"}}, "PCPU cannot be given here: VCPU, MEMORY_MB and DISK_GB come from the "
                                   "host's totals and reserves, PCPU from cpu_dedicated_set"),
    ({"resources": {"MEMORY_MB": "2"}}, "MEMORY_MB cannot be given here"),
    ({"resources": {"VGPU": "0"}}, "[compute_agent] resources: VGPU must be from 1 to"),
    ({"resources": {"VGPU": "two"}}, "[compute_agent] resources: VGPU must be a whole number, got 'two'"),
    ({"resources": {"VGPU": "2"}, "resource_reserved": {"CUSTOM_FPGA": "1"}},
     "[compute_agent] resource_reserved: CUSTOM_FPGA: only the classes of resources (or PCPU) take it"),
    ({"resource_max_unit": {"PCPU": "2"}}, "[compute_agent] resource_max_unit: PCPU: set cpu_dedicated_set"),
    ({"resources": {"VGPU": "2"}, "resource_reserved": {"VGPU": "3"}}, "3 is more than its total 2"),
    ({"resources": {"VGPU": "2"}, "resource_max_unit": {"VGPU": "4"}}, "4 is more than its total 2"),
    ({"resources": {"VGPU": "4"}, "resource_min_unit": {"VGPU": "3"}, "resource_max_unit": {"VGPU": "2"}},
     "[compute_agent] resource_min_unit: VGPU: 3 is more than its max_unit 2"),
    ({"resources": {"VGPU": "2"}, "resource_step_size": {"VGPU": "0"}},
     "[compute_agent] resource_step_size: VGPU must be from 1"),
    ({"resources": {"VGPU": "2"}, "resource_allocation_ratio": {"VGPU": "0"}},
     "[compute_agent] resource_allocation_ratio: VGPU must be above 0"),
    ({"resources": {"VGPU": "2"}, "resource_allocation_ratio": {"VGPU": "nan"}}, "must be above 0"),
    ({"traits": ["CUSTOM_SSD", "ssd"]}, "[compute_agent] traits: 'ssd' is not a trait"),
    ({"cpu_dedicated_set": "2-"}, "[compute_agent] cpu_dedicated_set: '' in '2-' is not a CPU id"),
])
def test_a_bad_resource_option_is_refused_naming_it(options, why):
    with pytest.raises(ValueError) as refused:
        agent_conf.check_resources(new_conf(**options))
    assert why in str(refused.value)


def test_the_agent_does_not_start_with_a_bad_resource_option(tmp_path):
    path = write_conf(tmp_path, driver="fake", resources="VCPU:4")
    with pytest.raises(SystemExit) as stopped:
        agent_cmd.main(["--config-file", path])
    assert str(stopped.value.code).startswith(
        "berth-compute-agent: invalid configuration: [compute_agent] resources: VCPU cannot be given here")


def test_a_dedicated_cpu_the_host_does_not_have_is_refused_at_start():
    conf = new_conf(fake_vcpus=8, cpu_dedicated_set="4-9,^5")
    with pytest.raises(inventory.NotOnThisHost,
                       match=r"cpu_dedicated_set: this host has no CPU 8, 9 \(its CPUs: 0-7\)"):
        ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf))


def test_the_agent_exits_saying_which_dedicated_cpus_the_host_lacks(tmp_path):
    path = write_conf(tmp_path, driver="fake", fake_vcpus=4, cpu_dedicated_set="2-5")
    status, out = run_until(["compute_agent.cmd.agent", "--config-file", path], "starting with", tmp_path)
    assert status == 1, out
    assert out.splitlines()[-1] == ("berth-compute-agent: cannot start: [compute_agent] cpu_dedicated_set: "
                                    "this host has no CPU 4, 5 (its CPUs: 0-3)")
    assert "Traceback" not in out


def test_good_options_give_the_classes_their_placement_fields():
    configured = inventory.from_conf(new_conf(
        resources={"VGPU": "4", "CUSTOM_FPGA": "2"}, cpu_dedicated_set="4-7,^6",
        resource_reserved={"VGPU": "1", "PCPU": "1"}, resource_max_unit={"VGPU": "2"},
        resource_step_size={"CUSTOM_FPGA": "2"}, resource_allocation_ratio={"CUSTOM_FPGA": "1.5"},
        traits=["CUSTOM_SSD", "COMPUTE_TRUSTED_CERTS", "CUSTOM_SSD"]))
    assert configured.dedicated_cpus == {4, 5, 7}
    assert configured.inventories["VGPU"].to_wire() == {
        "total": 4, "reserved": 1, "min_unit": 1, "max_unit": 2, "step_size": 1, "allocation_ratio": 1.0}
    assert configured.inventories["CUSTOM_FPGA"].to_wire() == {
        "total": 2, "reserved": 0, "min_unit": 1, "max_unit": 2, "step_size": 2, "allocation_ratio": 1.5}
    assert configured.inventories["PCPU"].to_wire() == {
        "total": 3, "reserved": 1, "min_unit": 1, "max_unit": 3, "step_size": 1, "allocation_ratio": 1.0}
    assert configured.traits == ("CUSTOM_SSD", "COMPUTE_TRUSTED_CERTS")


def test_no_options_add_nothing():
    assert inventory.from_conf(new_conf()) == inventory.Configured()


# -- traits of the CPU ------------------------------------------------------------------

CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr mmx sse sse2 ss ht pni pclmulqdq \
ssse3 fma cx16 sse4_1 sse4_2 x2apic popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm \
bmi1 avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni md_clear flush_l1d
address sizes\t: 46 bits physical, 48 bits virtual

processor\t: 1
flags\t\t: fpu
"""


def test_cpu_flags_of_proc_cpuinfo_become_os_traits_names(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    info = host_facts.cpu_info(arch="x86_64", cpuinfo_path=str(path))
    assert cpu_traits.of_flags(info["arch"], info["features"]) == [
        "HW_CPU_X86_ABM", "HW_CPU_X86_AESNI", "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512BW",
        "HW_CPU_X86_AVX512CD", "HW_CPU_X86_AVX512DQ", "HW_CPU_X86_AVX512F", "HW_CPU_X86_AVX512VL",
        "HW_CPU_X86_AVX512VNNI", "HW_CPU_X86_BMI", "HW_CPU_X86_BMI2", "HW_CPU_X86_CLMUL", "HW_CPU_X86_F16C",
        "HW_CPU_X86_FMA3", "HW_CPU_X86_INTEL_MD_CLEAR", "HW_CPU_X86_MMX", "HW_CPU_X86_SSE",
        "HW_CPU_X86_SSE2", "HW_CPU_X86_SSE3", "HW_CPU_X86_SSE41", "HW_CPU_X86_SSE42", "HW_CPU_X86_SSSE3",
    ]


def test_another_architectures_flags_give_no_x86_traits():
    assert cpu_traits.of_flags("aarch64", ["aes", "sha1", "sha2", "asimd"]) == []
    assert cpu_traits.of_flags(None, ["avx2"]) == []


def test_the_host_driver_reports_this_machines_cpu_traits():
    conf = new_conf()
    conf.set_override("driver", "host", "compute_agent")
    found = drivers.load_driver(conf).get_traits()
    assert all(name.startswith("HW_CPU_X86_") for name in found)
    info = host_facts.cpu_info()
    assert ("HW_CPU_X86_SSE2" in found) == ("sse2" in info["features"] and info["arch"] == "x86_64")


@pytest.mark.parametrize("features, has_avx2", [(["sse2", "avx2"], True), (["sse2", "avx"], False)])
def test_the_fake_drivers_cpu_features_give_its_traits(features, has_avx2):
    conf = new_conf(fake_cpu_features=features)
    tracker = ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf))
    report = tracker.report()
    assert ("HW_CPU_X86_AVX2" in report["traits"]) is has_avx2
    assert "HW_CPU_X86_SSE2" in report["traits"]


def test_the_fake_drivers_cpu_traits_are_none_on_another_architecture():
    """Its CPU's traits are none; what it can do besides (power_control) is said as ever."""
    conf = new_conf(fake_cpu_arch="aarch64", traits=["CUSTOM_ARM_BOX"])
    tracker = ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf))
    assert tracker.report()["traits"] == ["CUSTOM_ARM_BOX", "CUSTOM_BERTH_POWER_CONTROL",
                                          "CUSTOM_BERTH_RESIZE_IN_PLACE"]


def test_only_a_driver_with_power_control_says_so_in_its_traits():
    conf = new_conf(fake_cpu_arch="aarch64")
    for name, said in (("fake", True), ("host", False)):
        tracker = ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf, name))
        assert ("CUSTOM_BERTH_POWER_CONTROL" in tracker.report()["traits"]) is said
