"""What a compute agent's report must hold: every field the scheduler reads or
saves is checked at the edge, against the bounds of the column that keeps it."""

import pytest

from berth_contract import host_names
from berth_contract.host_report import HostReport
from compute_agent.resource_tracker import ResourceTracker
from scheduler.exception import InvalidRequest

UUID = "00000000-0000-4000-8000-0000000000a1"


def report(**changes):
    tracker = ResourceTracker("h1", {"memory_mb": 4096, "local_gb": 100, "vcpus": 8})
    tracker.claim(UUID, {"memory_mb": 512, "root_gb": 1, "vcpus": 1})
    return dict(tracker.report(), **changes)


def test_an_agents_own_report_passes():
    HostReport.from_wire(report(), "h1")


@pytest.mark.parametrize("changes, message", [
    ({"memory_mb": 2**31}, "memory_mb must be between 0 and 2147483647"),
    ({"memory_mb": 1.5}, "memory_mb must be a whole number"),
    ({"memory_mb": 10**400}, "memory_mb must be between 0 and 2147483647, got 1000000000"),
    ({"free_disk_gb": -(10**400)}, "free_disk_gb must be between"),
    ({"metrics": {"cpu.load": 10**400}}, r"metrics\['cpu.load'\] must be a finite number"),
    ({"cpu_utilization": 10**400}, "cpu_utilization must be a non-negative number"),
    ({"stats": {"num_instances": 10**400}}, "stats must map"),
    ({"running_vms": 2**40}, "running_vms must be between 0 and 100000"),
    ({"memory_mb_used": "lots"}, "memory_mb_used must be a number, got 'lots'"),
    ({"memory_mb_used": -5}, "memory_mb_used must be between 0"),
    ({"vcpus_used": -1}, "vcpus_used must be between 0"),
    ({"local_gb_used": float("nan")}, "local_gb_used must be a number"),
    ({"free_ram_mb": -(2**31) - 5}, "free_ram_mb must be between"),
    ({"reported_at": "yesterday"}, "reported_at must be an ISO-8601 time, got 'yesterday'"),
    ({"started_at": 17}, "started_at must be an ISO-8601 time"),
    ({"nodename": "n" * 300}, "nodename must be text of 1 to 255 characters"),
    ({"nodename": "a\nb"}, "nodename must be text"),
    ({"instance_uuids": ["u1"]}, r"instance_uuids\[0\]: must be a UUID"),
    ({"reserved_host_memory_mb": -1}, "reserved_host_memory_mb must be between 0"),
    ({"host": "h2"}, "resources are for host 'h2'"),
])
def test_a_bad_field_refuses_the_whole_report_naming_it(changes, message):
    with pytest.raises(InvalidRequest, match=message):
        HostReport.from_wire(report(**changes), "h1")


@pytest.mark.parametrize("host, message", [
    ("h" * 201, "201 bytes in UTF-8, over 200"),
    ("é" * 101, "202 bytes in UTF-8, over 200"),
    ("ghost\ud800", "lone surrogate"),
    ("tab\there", "control characters"),
    ("", "must be a non-empty string"),
    (["h1"], "must be a non-empty string"),
])
def test_a_host_name_no_queue_or_row_can_hold_is_refused(host, message):
    with pytest.raises(InvalidRequest, match=message):
        HostReport.from_wire(report(host=host), host)
    with pytest.raises(InvalidRequest, match=message):
        host_names.check(host, "host")


def test_a_host_name_of_200_bytes_is_fine():
    assert host_names.check("é" * 100, "host") == "é" * 100


def test_a_report_delivered_again_after_a_newer_one_is_not_taken(conf):
    from scheduler.fleet.host_manager import HostManager

    hosts = HostManager(conf)
    tracker = ResourceTracker("h1", {"memory_mb": 4096, "local_gb": 100, "vcpus": 8})
    old = tracker.report()
    tracker.claim(UUID, {"memory_mb": 1024, "root_gb": 1, "vcpus": 1})
    new = tracker.report()
    old, new = (HostReport.from_wire(wire, "h1") for wire in (old, new))
    assert hosts.update_from_report(new)
    assert not hosts.update_from_report(old)  # handed back, delivered after the new one
    assert not hosts.update_from_report(new)  # the same one twice changes nothing either
    assert hosts.get("h1").free_ram_mb == 4096 - 1024
    restarted = ResourceTracker("h1", {"memory_mb": 4096, "local_gb": 100, "vcpus": 8},
                                started_at="2099-01-01T00:00:00.000000Z")
    # A new agent process counts anew.
    assert hosts.update_from_report(HostReport.from_wire(restarted.report(), "h1"))
    assert hosts.get("h1").free_ram_mb == 4096
