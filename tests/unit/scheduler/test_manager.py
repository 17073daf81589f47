"""The scheduler's RPC endpoint over memory:// and SQLite, agents replaced by recorders."""

import uuid as uuidlib

import pytest

from scheduler import rpc
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.manager import DELETED_BY_CLIENT
from tests.unit.scheduler.manager_world import HOSTS, casts, report, request


def test_run_instance_places_on_the_best_host_and_casts_the_build_there(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({"project_id": "p"}), spec, props)
    [(method, instance, request_spec, filter_properties)] = casts(agents, 1)["h2"]
    assert method == "run_instance"
    assert instance["uuid"] == uuids[0] and instance["flavor"]["memory_mb"] == 1024
    # Nova's initial allocation ratios: RAM 1.0, disk 1.0, CPU 4.0 (8 physical CPUs)
    assert filter_properties["limits"] == {"memory_mb": 16384.0, "disk_gb": 100.0, "vcpu": 32.0}
    assert filter_properties["retry"]["num_attempts"] == 1
    assert request_spec["instance_uuids"] == uuids
    record = database.get_instance(uuids[0])
    assert (record["state"], record["host"], record["attempts"]) == ("SCHEDULED", "h2", 1)


def test_a_request_that_fits_nowhere_is_error_with_the_filters_named(world):
    manager, database, agents = world
    uuids, spec, props = request(memory_mb=100_000)
    manager.run_instance(rpc.Context({}), spec, props)
    record = database.get_instance(uuids[0])
    assert record["state"] == "ERROR"
    assert "3 hosts considered; RamFilter removed 3" in record["fault_reason"]
    assert casts(agents, 0) == {}


def test_a_redelivered_request_is_placed_once(world):
    manager, database, agents = world
    uuids, spec, props = request(count=2)
    manager.run_instance(rpc.Context({}), spec, props)
    manager.run_instance(rpc.Context({}), spec, props)
    placed = casts(agents, 2)
    assert sum(len(c) for c in placed.values()) == 2


def test_a_reschedule_avoids_the_host_that_refused(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    retry = {"num_attempts": 1, "hosts": [["h2", "h2"]], "exc_reason": "h2: Insufficient memory"}
    manager.run_instance(rpc.Context({}), spec, {"retry": retry})
    placed = casts(agents, 2)
    assert len(placed["h1"]) == 1
    assert placed["h1"][0][3]["retry"]["hosts"] == [["h2", "h2"]]
    assert database.get_instance(uuids[0])["attempts"] == 2
    # h2's local consumption was given back when the reschedule came in
    assert manager.host_manager.get("h2").free_ram_mb == 16384


def test_past_max_attempts_the_instance_is_error_with_the_last_failure(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    database.update_instance(uuids[0], {"host": "h3", "attempts": 3})  # its third host sends it back
    retry = {"num_attempts": 3, "hosts": [["h2", "h2"], ["h1", "h1"], ["h3", "h3"]],
             "exc_reason": "h3: Insufficient memory: requested 1024 MB"}
    manager.run_instance(rpc.Context({}), spec, {"retry": retry})
    record = database.get_instance(uuids[0])
    assert record["state"] == "ERROR"
    assert record["fault_reason"] == (
        "Exceeded maximum number of attempts (3); last failure: h3: Insufficient memory: requested 1024 MB"
    )


def test_a_bad_request_marks_its_instances_error_with_the_field(world):
    manager, database, agents = world
    uuids, spec, props = request()
    spec["instance_type"]["memory_mb"] = "lots"
    with pytest.raises(InvalidRequest, match="memory_mb: must be an integer"):
        manager.run_instance(rpc.Context({}), spec, props)
    record = database.get_instance(uuids[0])
    assert record["state"] == "ERROR"
    assert "memory_mb: must be an integer" in record["fault_reason"]


INVALID = [
    ({"scheduler_hints": {"group": "not-a-group"}}, "Invalid scheduler hint group: must be a UUID"),
    ({"scheduler_hints": {"same_host": "00000000-0000-4000-8000-00000000beef"}},
     "Instance 00000000-0000-4000-8000-00000000beef does not exist"),
    ({"scheduler_hints": {"cidr": "/24", "build_near_host_ip": "10.0.0.1"}},
     "scheduler hint cidr is honoured by SimpleCIDRAffinityFilter, which is not enabled"),
    ({"retry": {"num_attempts": 10_000}}, "a new request is past \\[scheduler\\] max_attempts \\(3\\)"),
]


@pytest.mark.parametrize("props, message", INVALID)
def test_an_invalid_request_by_count_is_refused_once_and_records_nothing(world, props, message):
    manager, database, agents = world
    spec = {"num_instances": 1000, "instance_type": {"memory_mb": 64, "vcpus": 1}}  # 82 bytes for 1,000
    with pytest.raises(InvalidRequest, match=message):
        manager.run_instance(rpc.Context({}), spec, props)
    assert database.list_instances(include_deleted=True) == []


@pytest.mark.parametrize("props, message", INVALID)
def test_an_invalid_request_naming_its_instances_says_why_on_each(world, props, message):
    manager, database, agents = world
    uuids, spec, _ = request(count=3)
    with pytest.raises(InvalidRequest, match=message):
        manager.run_instance(rpc.Context({}), spec, props)
    for uuid in uuids:
        record = database.get_instance(uuid)
        assert (record["state"], record["host"], record["memory_mb"]) == ("ERROR", None, 1024)
        assert record["fault_reason"].startswith("Invalid request: ")
        assert record["request_spec"] is None  # the request itself is in the dead letter


def test_a_reschedule_whose_server_group_is_gone_puts_its_instance_in_error(world):
    manager, database, agents = world
    group = "00000000-0000-4000-8000-00000000face"
    database.create_server_group(group, "g", "anti-affinity")
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, {"scheduler_hints": {"group": group}})
    [host] = casts(agents, 1)
    database.delete_server_group(group)
    retry = {"num_attempts": 1, "hosts": [[host, host]], "exc_reason": "build failed"}
    manager.run_instance(rpc.Context({}), spec, {"scheduler_hints": {"group": group}, "retry": retry})
    record = database.get_instance(uuids[0])
    assert record["state"] == "ERROR" and f"Server group {group} does not exist" in record["fault_reason"]


def test_agent_updates_move_the_instance_and_stale_ones_are_ignored(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    manager.instance_update({}, uuids[0], "h2", "BUILDING")
    assert database.get_instance(uuids[0])["state"] == "BUILDING"
    manager.instance_update({}, uuids[0], "h1", "ACTIVE")  # not its host
    assert database.get_instance(uuids[0])["state"] == "BUILDING"
    manager.instance_update({}, uuids[0], "h2", "ACTIVE")
    record = database.get_instance(uuids[0])
    assert record["state"] == "ACTIVE" and record["launched_at"]


def test_delete_sends_terminate_to_the_host_then_the_agent_confirms(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    manager.delete_instance({}, uuids[0])
    assert database.get_instance(uuids[0])["state"] == "DELETING"
    assert casts(agents, 2)["h2"][1] == ("terminate_instance", uuids[0], DELETED_BY_CLIENT)
    manager.instance_update({}, uuids[0], "h2", "ACTIVE")  # a late build result
    assert database.get_instance(uuids[0])["state"] == "DELETING"
    manager.instance_update({}, uuids[0], "h2", "DELETED")
    assert database.get_instance(uuids[0])["state"] == "DELETED"
    assert database.list_instances() == []


def test_deleting_an_instance_without_host_needs_no_agent(world):
    manager, database, agents = world
    uuids, spec, props = request(memory_mb=100_000)
    manager.run_instance(rpc.Context({}), spec, props)
    manager.delete_instance({}, uuids[0])
    assert database.get_instance(uuids[0])["state"] == "DELETED"
    assert casts(agents, 0) == {}


def test_select_destinations_returns_hosts_and_consumes(world):
    manager, database, agents = world
    chosen = []
    for _ in range(4):
        _, spec, props = request(memory_mb=4096)
        [destination] = manager.select_destinations({}, spec, props)
        chosen.append(destination["host"])
    # h2 (16384 MB free) twice; then h1 and h2 tie at 8192 free, and the earlier host wins;
    # then h2 (8192 against h1's 4096).
    assert chosen == ["h2", "h2", "h1", "h2"]
    assert destination["limits"]["memory_mb"] == 16384  # ram_allocation_ratio 1.0, as Nova's
    _, spec, props = request(memory_mb=4097)  # 4096 left on each
    with pytest.raises(NoValidHost):
        manager.select_destinations({}, spec, props)
    assert casts(agents, 0) == {}


def test_a_bad_report_changes_nothing(world):
    manager, database, agents = world
    with pytest.raises(InvalidRequest, match="memory_mb must be a number"):
        manager.report_resources({}, "h9", {"host": "h9", "memory_mb": "lots"})
    with pytest.raises(InvalidRequest, match="resources are for host 'h2'"):
        manager.report_resources({}, "h1", report("h2", 1))
    assert manager.host_manager.get("h9") is None
    assert manager.host_manager.get("h1").total_usable_ram_mb == 8192


def test_list_hosts_shows_usage_and_liveness(world):
    manager, database, agents = world
    manager.report_resources({}, "h1", report("h1", 8192, used=1536))
    hosts = {h["host"]: h for h in manager.list_hosts({})}
    assert set(hosts) == set(HOSTS)
    assert hosts["h1"]["memory_mb_used"] == 1536 and hosts["h1"]["free_ram_mb"] == 6656
    assert hosts["h1"]["state"] == "up"
    manager.host_manager.get("h3").updated -= 3600
    assert manager.list_hosts({})[2]["state"] == "down"


def test_list_hosts_shows_inventories_traits_and_measured_load(world):
    manager, database, agents = world
    uuid = str(uuidlib.uuid4())
    gpu = {"total": 4, "reserved": 1, "min_unit": 1, "max_unit": 2, "step_size": 1, "allocation_ratio": 1.5}
    manager.report_resources({}, "h1", report(
        "h1", 8192, used=1024, uuids=[uuid], inventories={"VGPU": gpu}, usages={"VGPU": 2},
        traits=["CUSTOM_GOLD", "HW_CPU_X86_AVX2"], cpu_utilization=0.25, memory_mb_in_use=2048,
        utilization_sampled_at=100.0, instance_usage={uuid: {"cpu": 1.5, "memory": 512.0}}))
    hosts = {h["host"]: h for h in manager.list_hosts({})}
    assert hosts["h1"]["inventories"] == {"VGPU": {
        "total": 4, "reserved": 1, "allocation_ratio": 1.5, "min_unit": 1, "max_unit": 2, "step_size": 1,
        "used": 2}}
    assert hosts["h1"]["traits"] == ["CUSTOM_GOLD", "HW_CPU_X86_AVX2"]
    assert hosts["h1"]["cpu_util"] == 0.25
    assert hosts["h1"]["instance_load"]["instances"] == {uuid: {"cpu": 1.5, "memory_mb": 512.0}}
    # h2 reported no inventory, trait nor load: the fields say so rather than being absent
    assert (hosts["h2"]["inventories"], hosts["h2"]["traits"], hosts["h2"]["instance_load"]) == ({}, [], None)


def test_select_destinations_writes_nothing_not_even_a_group_member(world):
    """It is marked read-only (run without a savepoint): a group hint is read, never joined."""
    manager, database, agents = world
    group = str(uuidlib.uuid4())
    database.create_server_group(group, "spread", "anti-affinity")
    uuids, spec, props = request(memory_mb=1024)
    props["scheduler_hints"] = {"group": group}
    [destination] = manager.select_destinations({}, spec, props)
    assert destination["host"] in HOSTS
    assert database.get_server_group(group)["members"] == []
    assert database.get_instance(uuids[0]) is None
    assert type(manager).select_destinations.berth_read_only is True


def test_select_destinations_of_as_many_as_fit_returns_a_host_for_each_that_fits(world):
    manager, database, agents = world
    _, spec, props = request(memory_mb=8192, count=5)  # 1 on h1, 2 on h2, none on h3
    chosen = manager.select_destinations({}, dict(spec, min_num_instances=2), props)
    assert sorted(d["host"] for d in chosen) == ["h1", "h2", "h2"]
    _, spec, props = request(memory_mb=4096, count=2)  # 4096 left on h3 alone
    fewer = r"\(none booted: 1 of 2 fit, fewer than the 2 asked for at least\)"
    with pytest.raises(NoValidHost, match=fewer):
        manager.select_destinations({}, dict(spec, min_num_instances=2), props)
    assert casts(agents, 0) == {}
