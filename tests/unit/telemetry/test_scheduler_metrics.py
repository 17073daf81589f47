"""What the scheduler tells Prometheus: its decisions' outcomes once committed, and the
fleet as its host table holds it."""

import time

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.exception import InvalidRequest
from scheduler.fleet.host_manager import HostManager
from scheduler.telemetry.scheduler_metrics import FleetCollector
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.scheduler.manager_world import (
    assembled,  # noqa: F401 - a fixture
    casts,
    parts,  # noqa: F401, F811 - a fixture
    report,
    request,
    world,  # noqa: F401, F811 - a fixture
)
from tests.unit.telemetry.scrape import value

OUTCOMES = ("placed", "rescheduled", "no_valid_host", "error")


def placements():
    return {outcome: value("berth_scheduler_placements_total", outcome=outcome) for outcome in OUTCOMES}


def moved(before):
    return {outcome: count - before[outcome] for outcome, count in placements().items()
            if count != before[outcome]}


def test_each_outcome_is_counted_per_instance(world):  # noqa: F811 - the fixture
    manager, database, agents = world
    before = placements()
    decisions = value("berth_scheduler_decision_seconds_count")
    ram_removed = value("berth_scheduler_refusal_hosts_removed_total", filter="RamFilter")

    uuids, spec, props = request(count=2)
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 2)
    assert moved(before) == {"placed": 2}

    first_host = database.get_instance(uuids[0])["host"]
    retry = {"num_attempts": 1, "hosts": [[first_host, first_host]], "exc_reason": "full"}
    again = dict(spec, instance_uuids=uuids[:1], num_instances=1)
    manager.run_instance(rpc.Context({}), again, {"retry": retry})
    assert moved(before) == {"placed": 2, "rescheduled": 1}
    casts(agents, 3)  # every build cast taken: none is left for the next test's agents

    manager.run_instance(rpc.Context({}), *request(memory_mb=100_000)[1:])  # fits nowhere
    assert moved(before) == {"placed": 2, "rescheduled": 1, "no_valid_host": 1}
    assert value("berth_scheduler_refusal_hosts_removed_total", filter="RamFilter") - ram_removed == 3

    _, bad, props = request()
    bad["instance_type"]["memory_mb"] = "lots"
    with pytest.raises(InvalidRequest):
        manager.run_instance(rpc.Context({}), bad, props)
    assert moved(before) == {"placed": 2, "rescheduled": 1, "no_valid_host": 1, "error": 1}
    assert value("berth_scheduler_decision_seconds_count") - decisions >= 3


def test_a_batch_rolled_back_counts_nothing(world, parts):  # noqa: F811 - the fixtures
    manager, database, agents = world
    before = placements()
    with pytest.raises(RuntimeError), UnitOfWork(database, parts.outbox, parts.undo):
        manager.run_instance(rpc.Context({}), *request(count=3)[1:])
        raise RuntimeError("the commit fails")
    assert moved(before) == {}
    with UnitOfWork(database, parts.outbox, parts.undo):
        manager.run_instance(rpc.Context({}), *request(count=3)[1:])
    assert moved(before) == {"placed": 3}
    assert sum(len(calls) for calls in casts(agents, 3).values()) == 3  # the rolled-back batch cast none


def family(collector, name):
    [found] = [f for f in collector.collect() if f.name == name]
    return {tuple(sorted(s.labels.items())): s.value for s in found.samples}


def test_the_fleet_by_state_and_the_room_of_the_hosts_that_take_work(conf):
    hosts = HostManager(conf)
    for host, ram, used in (("a", 8192, 1024), ("b", 4096, 0), ("off", 2048, 0), ("gone", 1024, 0),
                            ("quiet", 512, 0)):
        hosts.update_from_report(HostReport.from_wire(report(host, ram, used), host))
    hosts.set_disabled({"off": "maintenance"})
    hosts.forget("gone")
    hosts.get("quiet").updated = time.monotonic() - 120  # no report for longer than service_down_time
    collector = FleetCollector(hosts, lambda: 60.0)
    assert family(collector, "berth_scheduler_hosts") == {
        (("state", "up"),): 2, (("state", "down"),): 1, (("state", "disabled"),): 1}
    mib, gib = 1024 ** 2, 1024 ** 3
    assert family(collector, "berth_fleet_memory_bytes") == {(): (8192 + 4096) * mib}
    assert family(collector, "berth_fleet_memory_free_bytes") == {(): (8192 - 1024 + 4096) * mib}
    assert family(collector, "berth_fleet_disk_bytes") == {(): 200 * gib}
    assert family(collector, "berth_fleet_vcpus") == {(): 16}
    [age] = family(collector, "berth_scheduler_oldest_host_report_age_seconds").values()
    assert 120 <= age < 130


def test_a_fleet_with_no_host_says_so_without_an_age(conf):
    collector = FleetCollector(HostManager(conf), lambda: 60.0)
    assert family(collector, "berth_scheduler_hosts") == {
        (("state", "up"),): 0, (("state", "down"),): 0, (("state", "disabled"),): 0}
    names = [f.name for f in collector.collect()]
    assert "berth_scheduler_oldest_host_report_age_seconds" not in names


def test_per_host_series_only_when_asked(conf):
    hosts = HostManager(conf)
    hosts.update_from_report(HostReport.from_wire(report("a", 8192, 1024), "a"))
    hosts.update_from_report(HostReport.from_wire(report("b", 4096), "b"))
    assert not [f for f in FleetCollector(hosts, lambda: 60.0).collect() if f.name.startswith("berth_host_")]
    collector = FleetCollector(hosts, lambda: 60.0, per_host=lambda: True)
    mib = 1024 ** 2
    assert family(collector, "berth_host_memory_free_bytes") == {
        (("host", "a"),): (8192 - 1024) * mib, (("host", "b"),): 4096 * mib}
    assert family(collector, "berth_host_disk_free_bytes") == {
        (("host", "a"),): 100 * 1024 ** 3, (("host", "b"),): 100 * 1024 ** 3}
    assert family(collector, "berth_host_vcpus_used") == {(("host", "a"),): 0, (("host", "b"),): 0}
    assert all(0 <= age < 5 for age in family(collector, "berth_host_report_age_seconds").values())
