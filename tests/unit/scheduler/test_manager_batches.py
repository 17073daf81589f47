"""The scheduler's batch forms: a batch of messages behaves as the messages one by one."""

import datetime
import uuid as uuidlib

import pytest

from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.exception import InvalidRequest
from scheduler.rpc import deadletter
from scheduler.service import SchedulerService
from tests.unit.rpc.test_bad_input import dead_letters
from tests.unit.scheduler.manager_world import casts, report, request
from tests.unit.scheduler.service_parts import transport_and_database


def _calls(*requests):
    return [(rpc.Context({}), {"request_spec": spec, "filter_properties": props}) for spec, props in requests]


def test_a_batch_of_requests_places_each_once_and_refuses_only_the_bad_one(world):
    manager, database, agents = world
    one, spec_one, props_one = request()
    two, spec_two, props_two = request(memory_mb=2048, count=2)
    bad = dict(spec_one, instance_uuids=[str(uuidlib.uuid4())], instance_type={"memory_mb": -1})
    outcomes = manager._run_instances(_calls((spec_one, props_one), (bad, {}), (spec_two, props_two),
                                             (spec_one, props_one)))  # named twice: placed once
    assert outcomes[0] is None and outcomes[2] is None and outcomes[3] is None
    assert isinstance(outcomes[1], InvalidRequest)
    assert database.get_instance(bad["instance_uuids"][0])["state"] == "ERROR"
    placed = casts(agents, 3)
    assert sorted(call[1]["uuid"] for calls in placed.values() for call in calls) == sorted(one + two)
    records = database.get_instances(one + two)
    assert {r["state"] for r in records.values()} == {"SCHEDULED"}
    used = {h: s.total_usable_ram_mb - s.free_ram_mb for h, s in
            ((h, manager.host_manager.get(h)) for h in ("h1", "h2", "h3"))}
    assert sum(used.values()) == 1024 + 2 * 2048  # consumed once each, on the hosts cast to
    for host, calls in placed.items():
        assert used[host] == sum(call[1]["flavor"]["memory_mb"] for call in calls)


def test_a_new_instance_is_created_when_it_is_scheduled_not_after(world):
    manager, database, agents = world
    uuids, spec, props = request(count=2)
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 2)
    for record in database.get_instances(uuids).values():
        assert record["created_at"] == record["scheduled_at"] == record["updated_at"]


def test_an_instance_another_worker_scheduled_meanwhile_is_left_to_it(world, monkeypatch):
    # Both workers read the instance as new; the other one inserted it first.
    manager, database, agents = world
    (mine, theirs), spec, props = request(memory_mb=2048, count=2)
    database.create_instances([{"uuid": theirs, "state": "SCHEDULED", "host": "h3", "memory_mb": 2048,
                                "root_gb": 10, "vcpus": 2}])
    monkeypatch.setattr(database, "get_instances", lambda uuids: {})
    manager.run_instance(rpc.Context({}), spec, props)
    placed = casts(agents, 1)
    assert [call[1]["uuid"] for calls in placed.values() for call in calls] == [mine]
    assert database.get_instance(theirs)["host"] == "h3"
    assert database.get_instance(mine)["state"] == "SCHEDULED"
    used = {h: manager.host_manager.get(h).total_usable_ram_mb - manager.host_manager.get(h).free_ram_mb
            for h in ("h1", "h2", "h3")}
    assert sum(used.values()) == 2048  # theirs consumed nowhere here


def test_a_worker_counts_what_another_placed_since_the_hosts_last_report(world, parts):
    # Another worker placed two instances on h2 after h2 reported; one is ACTIVE already.
    manager, database, _ = world
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    database.create_instances([
        {"uuid": str(uuidlib.uuid4()), "state": state, "host": "h2", "memory_mb": 2048,
         "scheduled_at": now + datetime.timedelta(seconds=1)}
        for state in ("SCHEDULED", "ACTIVE")])
    free = manager.host_manager.get("h2").free_ram_mb
    parts.claims.learn({"h2"})
    assert manager.host_manager.get("h2").free_ram_mb == free - 2 * 2048


@pytest.fixture
def world_with_groups(conf, request):
    filters = ["RamFilter", "ServerGroupAntiAffinityFilter", "DifferentHostFilter", "SameHostFilter"]
    conf.set_override("enabled_filters", filters, group="filter_scheduler")
    return request.getfixturevalue("world")


def test_requests_of_an_anti_affinity_group_in_one_batch_see_each_other(world_with_groups):
    manager, database, agents = world_with_groups
    group = str(uuidlib.uuid4())
    database.create_server_group(group, "spread", "anti-affinity")
    requests = []
    for _ in range(3):
        _, spec, _ = request()
        requests.append((spec, {"scheduler_hints": {"group": group}}))
    assert manager._run_instances(_calls(*requests)) == [None, None, None]
    placed = casts(agents, 3)
    assert sorted(placed) == ["h1", "h2", "h3"]  # one each, though h2 has room for all


def test_a_same_or_different_host_hint_sees_an_instance_placed_earlier_in_the_batch(world_with_groups):
    manager, database, agents = world_with_groups
    first, spec, props = request()
    _, apart, _ = request()
    _, beside, _ = request()
    outcomes = manager._run_instances(_calls(
        (spec, props),
        (apart, {"scheduler_hints": {"different_host": first}}),
        (beside, {"scheduler_hints": {"same_host": first}}),
    ))
    assert outcomes == [None, None, None]
    placed = {call[1]["uuid"]: host for host, calls in casts(agents, 3).items() for call in calls}
    assert placed[first[0]] == "h2"
    assert placed[apart["instance_uuids"][0]] != "h2"
    assert placed[beside["instance_uuids"][0]] == "h2"


def test_a_batch_of_instance_updates_applies_each_and_refuses_only_the_bad_ones(world):
    manager, database, agents = world
    first, spec, props = request(count=2, memory_mb=4096)
    manager.run_instance(rpc.Context({}), spec, props)
    hosts = {u: database.get_instance(u)["host"] for u in first}
    free_before = {h: manager.host_manager.get(h).free_ram_mb for h in set(hosts.values())}
    missing = str(uuidlib.uuid4())
    a, b = first

    def update(instance_uuid, host, state, fault=None):
        kwargs = {"instance_uuid": instance_uuid, "host": host, "state": state, "fault": fault}
        return rpc.Context({}), kwargs

    outcomes = manager._instance_updates([
        update(a, hosts[a], "BUILDING"), update(a, hosts[a], "ACTIVE"),
        update(missing, hosts[a], "ACTIVE"), update(b, hosts[b], "RUNNING"),
        update(b, hosts[b], "ERROR", {"reason": "image gone"}),
        update(a, hosts[a], "BUILDING"),  # late: ignored, not an error
    ])
    assert [type(o).__name__ if o else None for o in outcomes] == [
        None, None, "InvalidRequest", "InvalidRequest", None, None]
    assert f"no instance {missing}" in str(outcomes[2])
    assert database.get_instance(a)["state"] == "ACTIVE"
    assert database.get_instance(a)["launched_at"] is not None
    failed = database.get_instance(b)
    assert (failed["state"], failed["fault_reason"]) == ("ERROR", "image gone")
    # The failed build's room is given back at once.
    assert manager.host_manager.get(hosts[b]).free_ram_mb == free_before[hosts[b]] + 4096


def test_in_a_batch_an_invalid_request_is_refused_alone_and_the_others_placed(world):
    manager, database, agents = world
    good, spec_good, props_good = request()
    by_count = {"num_instances": 500, "instance_type": {"memory_mb": 64, "vcpus": 1}}
    named, spec_named, _ = request(count=2)
    dangling = {"scheduler_hints": {"group": "00000000-0000-4000-8000-00000000f00d"}}
    outcomes = manager._run_instances(_calls((by_count, dangling), (spec_good, props_good),
                                             (spec_named, dangling)))
    assert [type(o).__name__ if o else None for o in outcomes] == ["InvalidRequest", None, "InvalidRequest"]
    assert "Server group 00000000-0000-4000-8000-00000000f00d does not exist" in str(outcomes[0])
    casts(agents, 1)
    states = {i["uuid"]: i["state"] for i in database.list_instances(include_deleted=True)}
    assert states == {good[0]: "SCHEDULED", named[0]: "ERROR", named[1]: "ERROR"}  # none of the 500


def test_a_lone_bad_request_is_dead_lettered_and_its_refusal_recorded(conf):
    transport, database = transport_and_database(conf)
    service = SchedulerService(conf, transport, database)
    service.start()
    try:
        bad = str(uuidlib.uuid4())
        spec = {"instance_uuids": [bad], "instance_type": {"memory_mb": -1}}
        SchedulerClient(transport).run_instance({}, spec, {})
        [letter] = dead_letters(transport, 1)
        assert letter.headers[deadletter.REASON].startswith("InvalidRequest")
        record = database.get_instance(bad)
        assert record["state"] == "ERROR" and "memory_mb" in record["fault_reason"]
    finally:
        service.stop()
        transport.cleanup()
        database.dispose()


def test_a_batch_of_reports_takes_each_and_refuses_only_the_bad_one(world):
    manager, _, _ = world
    manager.reports.drain()

    def sent(host, **changes):
        return rpc.Context({}), {"host": host, "resources": dict(report(host, 16384), **changes)}

    h2_free = manager.host_manager.get("h2").free_ram_mb
    outcomes = manager._reports([
        sent("h1", free_ram_mb=1000, report_seq=5, started_at="2026-12-05T00:00:00Z"),
        sent("h2", memory_mb=-1),
        sent("new-host", free_ram_mb=3000),
        sent("h1", free_ram_mb=2000, report_seq=4, started_at="2026-12-05T00:00:00Z"),  # older: ignored
    ])
    assert [type(o).__name__ if o else None for o in outcomes] == [None, "InvalidRequest", None, None]
    assert "memory_mb" in str(outcomes[1])
    assert manager.host_manager.get("h1").free_ram_mb == 1000
    assert manager.host_manager.get("new-host").free_ram_mb == 3000
    assert manager.host_manager.get("h2").free_ram_mb == h2_free
    assert sorted(manager.reports.drain()) == ["h1", "new-host"]
    context, kwargs = sent("h2", memory_mb=-1)
    with pytest.raises(InvalidRequest, match="memory_mb"):  # alone, as the method
        manager.report_resources(context, **kwargs)
