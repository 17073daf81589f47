"""What the host is (architecture, VM modes, hypervisor type and version) comes from the driver
alone: the fake one's from its [fake] options, the host one's from the machine."""

import platform

import pytest

from compute_agent import driver as drivers
from compute_agent.driver import host_facts
from compute_agent.resource_tracker import ResourceTracker


def report(conf, driver_name):
    conf.set_override("driver", driver_name, "compute_agent")
    return ResourceTracker.from_conf(conf, "h", "h", drivers.load_driver(conf)).report()


@pytest.mark.parametrize(("machine", "arch"), [
    ("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64"),
    ("i386", "i686"), ("ppc64le", "ppc64le"), ("s390x", "s390x"), ("", None),
])
def test_the_machines_architecture_is_named_as_nova_names_it(monkeypatch, machine, arch):
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert host_facts.machine_arch() == arch


def test_the_host_driver_reports_the_machines_architecture_whatever_the_fake_options_say(conf, monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    conf.set_override("cpu_arch", "x86_64", "fake")
    conf.set_override("vm_modes", ["xen"], "fake")
    conf.set_override("hypervisor_type", "qemu", "fake")
    found = report(conf, "host")
    assert (found["cpu_arch"], found["cpu_info"]["arch"]) == ("aarch64", "aarch64")
    assert (found["hypervisor_type"], found["vm_modes"]) == ("host", ["hvm"])
    assert found["hypervisor_version"] == host_facts.kernel_version()
    # An aarch64 CPU's flags are no x86 traits.
    assert not [t for t in found["traits"] if t.startswith("HW_CPU_X86_")]


def test_the_fake_driver_reports_its_options(conf, monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "s390x")  # not the simulated host's
    conf.set_override("cpu_arch", "aarch64", "fake")
    conf.set_override("vm_modes", ["hvm", "exe"], "fake")
    conf.set_override("hypervisor_type", "qemu", "fake")
    conf.set_override("hypervisor_version", 8002001, "fake")
    found = report(conf, "fake")
    assert (found["cpu_arch"], found["cpu_info"]["arch"]) == ("aarch64", "aarch64")
    assert (found["hypervisor_type"], found["vm_modes"], found["hypervisor_version"]) == (
        "qemu", ["hvm", "exe"], 8002001)


def test_a_driver_that_says_nothing_of_its_host_reports_its_type_and_no_architecture(conf):
    class Bare(drivers.ComputeDriver):
        hypervisor_type = "bare"

        def get_totals(self):
            return {"memory_mb": 1024, "local_gb": 10, "vcpus": 1}

    found = ResourceTracker.from_conf(conf, "h", "h", Bare(conf)).report()
    assert (found["hypervisor_type"], found["cpu_arch"], found["vm_modes"]) == ("bare", None, [])
