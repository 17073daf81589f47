"""HostReport: the one parser of an agent's report, what it refuses (naming the field), and the
wire form it gives back, as the agents of this release and the previous one send it."""

import pytest

from berth_contract.host_report import HostLoad, HostReport
from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent.resource_tracker import ResourceTracker
from scheduler import conf as berth_conf
from scheduler.exception import InvalidRequest

UUID = "00000000-0000-4000-8000-0000000000a1"
U2 = "00000000-0000-4000-8000-0000000000a2"
#: A report of the previous release's agent (the fake driver, one instance), as it sent it.
PREVIOUS = {
    "host": "h2", "nodename": "h2", "hypervisor_type": "fake", "hypervisor_version": 1000,
    "memory_mb": 32768, "memory_mb_used": 1024, "free_ram_mb": 31744, "local_gb": 1024, "local_gb_used": 1,
    "free_disk_gb": 1023, "vcpus": 16, "vcpus_used": 2, "running_vms": 1, "instance_uuids": [U2],
    "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "reserved_host_cpus": 0,
    "cpu_arch": "x86_64", "vm_modes": ["hvm"], "io_workload": 0, "failed_builds": 0,
    "cpu_info": {"arch": "x86_64", "features": ["aes", "avx", "sse2"], "model": "fake",
                 "topology": {"cores": 16, "sockets": 1, "threads": 1}, "vendor": "fake"},
    "host_ip": "192.0.2.2", "image_properties": {},
    "metrics": {"cpu.percent": 12.5, "instances": 1, "memory.free_mb": 31744, "memory.percent": 3.125,
                "memory.used_mb": 1024, "vcpus.used": 2},
    "stats": {"failed_builds": 0, "io_workload": 0, "num_instances": 1, "num_vm_active": 1},
    "reported_at": "2026-12-03T12:00:00.000000Z", "started_at": "2026-01-01T00:00:00Z", "report_seq": 1,
    "version": "0.1.0",
    "cpu_utilization": 0.125, "memory_mb_in_use": 1024.0, "utilization_sampled_at": "2026-12-03T12:00:00Z",
    "cpu_reserved": 2.0, "cpu_burst": 0.0, "cpu_undeployed_reservation": 0.0, "memory_reserved_mb": 1024.0,
    "memory_burst_mb": 0.0, "memory_undeployed_reservation_mb": 0.0,
    "instance_usage": {U2: {"cpu": 2.0, "memory": 512.0}},
}


#: A valid inventory of 4 units.
INV = {"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4, "step_size": 1, "allocation_ratio": 1.0}


def wire(**changes):
    tracker = ResourceTracker("h1", {"memory_mb": 4096, "local_gb": 100, "vcpus": 8})
    tracker.claim(UUID, {"memory_mb": 512, "root_gb": 1, "vcpus": 1})
    return dict(tracker.report(), **changes)


@pytest.mark.parametrize("changes, field, why", [
    ({"memory_mb": None}, "memory_mb", "must be a number, got None"),
    ({"memory_mb": True}, "memory_mb", "must be a number, got True"),
    ({"free_ram_mb": 2**31}, "free_ram_mb", "must be between -2147483647 and 2147483647"),
    ({"local_gb": 0.5}, "local_gb", "must be a whole number, got 0.5"),
    ({"free_disk_gb": float("inf")}, "free_disk_gb", "must be a number, got inf"),
    ({"vcpus": -1}, "vcpus", "must be between 0 and 2147483647, got -1"),
    ({"vcpus_used": "2"}, "vcpus_used", "must be a number, got '2'"),
    ({"report_seq": 0}, "report_seq", "must be between 1 and"),
    ({"hypervisor_version": 1.5}, "hypervisor_version", "must be a whole number"),
    ({"hypervisor_type": ""}, "hypervisor_type", "must be text of 1 to 255 characters"),
    ({"reported_at": "soon"}, "reported_at", "must be an ISO-8601 time, got 'soon'"),
    ({"instance_uuids": "u1"}, "instance_uuids", "must be a list of at most 100000"),
    ({"instance_uuids": [UUID, 7]}, "instance_uuids[1]", ": must be a UUID, got 7"),
    ({"io_workload": -1}, "io_workload", "must be a count, got -1"),
    ({"failed_builds": 1.0}, "failed_builds", "must be a count, got 1.0"),
    ({"cpu_arch": 5}, "cpu_arch", "must be a string of at most 255 characters"),
    ({"vm_modes": "hvm"}, "vm_modes", "must be a list of strings"),
    ({"supported_instances": [["x86_64", "kvm"]]}, "supported_instances", "must be a list of [architecture"),
    ({"host_ip": "10.0.0.300"}, "host_ip", "must be an IP address, got '10.0.0.300'"),
    ({"cpu_info": []}, "cpu_info", "must be an object"),
    ({"cpu_info": {"cache": 1}}, "cpu_info", "['cache'] is not what a cpu_info holds"),
    ({"image_properties": {"os": "linux"}}, "image_properties", "must map each image property"),
    ({"version": "v" * 65}, "version", "must be text of at most 64 characters"),
    ({"stats": {"num_instances": True}}, "stats", "must map at most 200 names"),
    ({"metrics": []}, "metrics", "must be an object of at most 200 entries"),
    ({"metrics": {"cpu": "high"}}, "metrics", "['cpu'] must be a finite number"),
    ({"cpu_utilization": -0.5}, "cpu_utilization", "must be a non-negative number, got -0.5"),
    ({"memory_burst_mb": float("nan")}, "memory_burst_mb", "must be a non-negative number, got nan"),
    ({"utilization_sampled_at": ["t0"]}, "utilization_sampled_at", "must be a short string"),
    ({"host": "h2"}, "resources", "are for host 'h2'"),
    ({"inventories": []}, "inventories", "must be an object of at most 100 resource classes"),
    ({"inventories": {f"CUSTOM_C{i}": INV for i in range(101)}}, "inventories", "at most 100"),
    ({"inventories": {"GPU": INV}}, "inventories['GPU']", ": is not a resource class"),
    ({"inventories": {"VGPU": {"total": 4}}}, "inventories['VGPU']", "must be an object of exactly"),
    ({"inventories": {"VGPU": dict(INV, total=-1)}}, "inventories['VGPU'].total", "from 0 to 2147483647"),
    ({"inventories": {"VGPU": dict(INV, total=2**31)}}, "inventories['VGPU'].total", "got 2147483648"),
    ({"inventories": {"VGPU": dict(INV, step_size=0)}}, "inventories['VGPU'].step_size", "from 1 to"),
    ({"inventories": {"VGPU": dict(INV, max_unit=1.5)}}, "inventories['VGPU'].max_unit", "got 1.5"),
    ({"inventories": {"VGPU": dict(INV, allocation_ratio=float("nan"))}},
     "inventories['VGPU'].allocation_ratio", "got nan"),
    ({"inventories": {"VGPU": dict(INV, allocation_ratio=3.5e38)}},
     "inventories['VGPU'].allocation_ratio", "must be a number of at most 3.40282e+38"),
    # Placement refuses an inventory whose capacity is below 0, and only that.
    ({"inventories": {"VGPU": dict(INV, reserved=5)}}, "inventories['VGPU']",
     "must have a capacity of at least 0, as Placement does: (total 4 - reserved 5) * allocation_ratio 1 "
     "is -1"),
    ({"inventories": {"VGPU": dict(INV, allocation_ratio=-1.0)}}, "inventories['VGPU']",
     "* allocation_ratio -1 is -4"),
    ({"inventories": {"VGPU": INV}, "usages": {"VGPU": -1}}, "usages['VGPU']", "from 0 to"),
    ({"inventories": {"VGPU": INV}, "usages": {"VGPU": "1"}}, "usages['VGPU']", "got '1'"),
    ({"inventories": {"VGPU": INV}, "usages": {"CUSTOM_FPGA": 1}}, "usages['CUSTOM_FPGA']",
     ": is not a class of inventories"),
    ({"inventories": None, "usages": {"VGPU": 1}}, "usages['VGPU']", ": is not a class of inventories"),
    ({"usages": {"vgpu": 1}}, "usages['vgpu']", ": is not a resource class"),
    ({"traits": "CUSTOM_SSD"}, "traits", "must be a list of at most 1000 trait names"),
    ({"traits": ["CUSTOM_SSD"] * 1001}, "traits", "must be a list of at most 1000"),
    ({"traits": ["CUSTOM_SSD", "HW_CPU_X86_AVX9"]}, "traits[1]", ": 'HW_CPU_X86_AVX9' is not a trait"),
    ({"traits": [["CUSTOM_SSD"]]}, "traits[0]", "is not a trait"),
    ({"open_moves": [UUID]}, "open_moves", "must be an object of at most 100000 entries"),
    ({"open_moves": {U2: [3, "done"]}}, f"open_moves[{U2!r}]", ": is not an instance of instance_uuids"),
    ({"open_moves": {UUID: 3}}, f"open_moves[{UUID!r}]", 'must be [migration id (a positive integer), "mov'),
    ({"open_moves": {UUID: [0, "done"]}}, f"open_moves[{UUID!r}]", "got [0, 'done']"),
    ({"open_moves": {UUID: [3, "gone"]}}, f"open_moves[{UUID!r}]", "got [3, 'gone']"),
])
def test_a_bad_field_is_refused_by_name_with_why(changes, field, why):
    with pytest.raises(InvalidRequest) as refused:
        HostReport.from_wire(wire(**changes), "h1")
    assert refused.value.field == field
    assert type(refused.value) is InvalidRequest  # what a dead letter's reason names
    assert str(refused.value).startswith(f"report_resources from h1: {field}")
    assert why in str(refused.value)


def test_the_moves_an_agent_holds_open_travel_with_its_report_but_not_into_the_hosts_row():
    report = HostReport.from_wire(wire(open_moves={UUID: [7, "moving"]}), "h1")
    assert report.open_moves == {UUID: [7, "moving"]}
    assert report.to_wire()["open_moves"] == {UUID: [7, "moving"]}  # passed on to the other schedulers
    assert "open_moves" not in report.to_wire(usage=False)  # the row saved of the host
    assert HostReport.from_wire(wire(), "h1").open_moves is None


@pytest.mark.parametrize("changes", [
    {"min_unit": 3, "max_unit": 2},  # no allocation fits, yet Placement takes it
    {"allocation_ratio": 0.0},
    {"reserved": 5, "allocation_ratio": 0.0},  # capacity 0
    {"reserved": 4},
    {"reserved": 5, "allocation_ratio": -0.5},  # capacity 0.5
    {"allocation_ratio": -0.2},  # capacity -0.8, 0 as Placement truncates it
    {"step_size": 8, "max_unit": 4},
    {"allocation_ratio": 1e6, "total": 2**31 - 1, "max_unit": 2**31 - 1},
])
def test_an_inventory_placement_accepts_is_accepted_as_sent(changes):
    sent = wire()
    sent["inventories"] = dict(sent["inventories"], VGPU=dict(INV, **changes), CUSTOM_FPGA=INV)
    report = HostReport.from_wire(sent, "h1")
    assert report.inventories["VGPU"] == dict(INV, **changes)
    assert report.inventories["CUSTOM_FPGA"] == INV


def test_what_is_not_an_object_is_refused():
    with pytest.raises(InvalidRequest, match="report_resources from h1: resources must be an object"):
        HostReport.from_wire([("memory_mb", 1)], "h1")


def test_the_agents_report_comes_back_as_it_was_sent():
    sent = wire(cpu_utilization=0.5, memory_mb_in_use=100.0, utilization_sampled_at="2026-01-01T00:00:00Z",
                instance_usage={UUID: {"cpu": 0.5, "memory": 100.0}})
    report = HostReport.from_wire(sent, "h1")
    assert report.memory_mb == 4096 and report.free_ram_mb == 4096 - 512
    assert report.instance_uuids == [UUID]
    assert report.load == HostLoad(cpu_utilization=0.5, memory_mb_in_use=100.0,
                                   utilization_sampled_at="2026-01-01T00:00:00Z")
    assert report.to_wire() == sent
    assert "instance_usage" not in report.to_wire(usage=False)


def test_keys_it_does_not_know_are_kept_and_sent_on():
    report = HostReport.from_wire(wire(numa_topology={"cells": 2}), "h1")
    assert report.extra == {"numa_topology": {"cells": 2}}
    assert report.to_wire()["numa_topology"] == {"cells": 2}


def test_a_report_without_load_figures_has_no_load():
    assert HostReport.from_wire(wire(), "h1").load is None


def test_a_previous_release_agents_report_is_understood_and_given_back_whole():
    report = HostReport.from_wire(PREVIOUS, "h2")
    assert report.load.cpu_reserved == 2.0 and report.instance_usage == {U2: {"cpu": 2.0, "memory": 512.0}}
    assert report.extra == {}
    assert report.to_wire() == PREVIOUS


def test_this_release_agent_sends_the_keys_the_previous_one_sent():
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("driver", "fake", "compute_agent")
    tracker = ResourceTracker.from_conf(conf, "h2", "h2", drivers.load_driver(conf))
    tracker.claim(U2, {"memory_mb": 512, "root_gb": 1, "vcpus": 2})
    assert set(tracker.report()) == set(PREVIOUS) | {"inventories", "usages", "traits"}


def test_resource_classes_and_traits_of_a_report_are_taken_and_given_back():
    sent = wire(inventories={"VGPU": INV, "VCPU": dict(INV, total=8, max_unit=8, allocation_ratio=16.0)},
                usages={"VGPU": 2, "VCPU": 1}, traits=["HW_CPU_X86_AVX2", "CUSTOM_SSD"])
    report = HostReport.from_wire(sent, "h1")
    assert report.inventories["VCPU"]["allocation_ratio"] == 16.0
    assert report.usages == {"VGPU": 2, "VCPU": 1}
    assert report.traits == ["HW_CPU_X86_AVX2", "CUSTOM_SSD"]
    assert report.to_wire() == sent


def test_the_agents_own_report_of_classes_and_traits_passes_the_check():
    report = HostReport.from_wire(wire(), "h1")
    assert set(report.inventories) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    assert report.usages == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
