"""The fragmentation hint of a refusal, as the instance's fault and `berth server show` say it: a scheduler
on memory:// and SQLite whose hosts hold ACTIVE instances the hint may move."""

import logging
import time
import uuid as uuidlib

import pytest

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler import states
from scheduler.admin.flavors import FlavorEndpoint
from scheduler.service import assemble
from tests.unit.cli_scheduler import cli_scheduler, fields, main, write_conf
from tests.unit.scheduler.service_parts import transport_and_database

GB = 1024
#: Host -> the memory (MB) of each ACTIVE instance on it; every host has 16 GB, 200 GB, 8 vCPUs.
#: 4 GB free on h1, 6 GB on h2: 10 GB in all, and 8 GB (m1.large) fits on neither alone.
FRAGMENTED = {"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]}


def flavor_of(memory_mb, name=None):
    return Flavor(memory_mb=memory_mb, root_gb=10, ephemeral_gb=0, vcpus=1, name=name)


def fill(manager, database, fleet, group=None):
    """Report each host of ``fleet`` holding its instances, and record them ACTIVE there; with
    ``group``, one instance of each host is a member of that server group. The uuids of each host."""
    held = {}
    for host, sizes in fleet.items():
        rows = []
        for index, memory_mb in enumerate(sizes):
            uuid = str(uuidlib.uuid4())
            spec = RequestSpec(instance_uuids=[uuid], flavor=flavor_of(memory_mb, f"mem{memory_mb}"))
            request_spec, filter_properties = spec.instance_to_wire(uuid)
            rows.append({"uuid": uuid, "state": states.ACTIVE, "host": host, "node": host,
                         "memory_mb": memory_mb, "root_gb": 10, "ephemeral_gb": 0, "vcpus": 1,
                         "flavor_name": f"mem{memory_mb}",
                         "request_spec": request_spec, "filter_properties": filter_properties})
            if group is not None and index == 0:
                database.add_server_group_members(group, [uuid])
        database.create_instances(rows)
        held[host] = [row["uuid"] for row in rows]
        used = sum(sizes)
        manager.report_resources({}, host, {
            "host": host, "memory_mb": 16 * GB, "free_ram_mb": 16 * GB - used, "local_gb": 200,
            "free_disk_gb": 200 - 10 * len(sizes), "vcpus": 8, "vcpus_used": len(sizes),
            "instance_uuids": held[host], "running_vms": len(sizes)})
    return held


@pytest.fixture
def scheduler(conf):
    """(the manager, its database), nothing reported yet."""
    conf.set_override("ram_allocation_ratio", 1.0, "filter_scheduler")
    conf.set_override("disk_allocation_ratio", 1.0, "filter_scheduler")
    # what a hint says must not hang on how busy the machine is: 0.1 s ran out under load
    conf.set_override("fragmentation_hint_time_limit", 10.0, "scheduler")
    transport, database = transport_and_database(conf)
    parts = assemble(conf, transport, database)
    yield parts.manager, database
    transport.cleanup()
    database.dispose()


def refuse(manager, database, memory_mb, name="m1.large", hints=None):
    """The fault of one instance of ``memory_mb`` asked for, once refused."""
    uuid = str(uuidlib.uuid4())
    request_spec = {"instance_uuids": [uuid], "num_instances": 1,
                    "instance_type": {"memory_mb": memory_mb, "root_gb": 10, "vcpus": 1, "name": name}}
    manager.run_instance({}, request_spec, {"scheduler_hints": hints} if hints else {})
    row = database.get_instance(uuid)
    assert row["state"] == states.ERROR, row
    return row["fault_reason"]


PLAIN = "No valid host was found: 2 hosts considered; RamFilter removed 2; none left"


def test_a_request_that_fits_nowhere_only_through_fragmentation_is_told_so_and_how_to_make_room(scheduler):
    manager, database = scheduler
    fill(manager, database, FRAGMENTED)
    # h2 needs 2 GB more: one 2 GB instance to h1; h1 needs 4 GB more: one 6 GB instance to h2
    assert refuse(manager, database, 8 * GB) == (
        f"{PLAIN}; fragmentation: 2 hosts would have room after moving instances off them (fewest: 1 "
        "migration, 2 GB); `berth rebalance plan --make-room m1.large`")


def test_the_command_keeps_the_zone_asked_for(scheduler):
    manager, database = scheduler
    fill(manager, database, FRAGMENTED)
    assert refuse(manager, database, 8 * GB, hints={"availability_zone": "nova"}).endswith(
        "(fewest: 1 migration, 2 GB); `berth rebalance plan --make-room m1.large --zone nova`")


def test_only_hosts_freed_by_moves_the_filters_accept_are_counted_and_no_more_is_claimed(scheduler):
    manager, database = scheduler
    # 4 GB free on h1, 2 GB on h2. h2 is freed by its 4 GB instance going to h1 (or both 2 GB ones);
    # h1's 6 GB instances fit nowhere else: not counted, and not proven impossible either
    fill(manager, database, {"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 4 * GB, 2 * GB, 2 * GB]})
    assert refuse(manager, database, 6 * GB).endswith(
        "fragmentation: at least 1 host would have room after moving instances off it (fewest: 1 migration, "
        "4 GB); `berth rebalance plan --make-room m1.large`")


def test_no_hint_when_the_hosts_lack_the_room_in_total(scheduler):
    manager, database = scheduler
    fill(manager, database, FRAGMENTED)
    # 12 GB fits an empty host, but the fleet has 10 GB free: migrations move room, they make none
    assert refuse(manager, database, 12 * GB) == PLAIN


def test_no_hint_for_a_flavor_larger_than_any_host(scheduler):
    manager, database = scheduler
    fill(manager, database, FRAGMENTED)
    assert refuse(manager, database, 20 * GB) == PLAIN


def test_no_hint_when_the_time_limit_is_0(scheduler, conf):
    manager, database = scheduler
    conf.set_override("fragmentation_hint_time_limit", 0, "scheduler")
    fill(manager, database, FRAGMENTED)
    assert refuse(manager, database, 8 * GB) == PLAIN


def test_no_hint_when_anti_affinity_refuses_every_host(scheduler):
    manager, database = scheduler
    group = str(uuidlib.uuid4())
    database.create_server_group(group, "apart", "anti-affinity")
    fill(manager, database, FRAGMENTED, group=group)
    # 2 GB has room on both hosts, but a member of the group is on each
    assert refuse(manager, database, 2 * GB, hints={"group": group}) == (
        "No valid host was found: 2 hosts considered; ServerGroupAntiAffinityFilter removed 2; none left")


def test_no_hint_when_the_instances_to_move_have_nowhere_to_go(scheduler):
    manager, database = scheduler
    # 4 GB free on each: 8 GB in all, but freeing either host means 6 GB the other cannot take
    fill(manager, database, {"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 6 * GB]})
    assert refuse(manager, database, 8 * GB) == PLAIN


def test_a_burst_of_refusals_reuses_the_answer_and_spends_no_more_than_the_limit(scheduler, caplog):
    manager, database = scheduler
    fill(manager, database, FRAGMENTED)
    hints = manager._scheduling.planner.fragmentation
    clock = [100.0]
    hints._clock = lambda: clock[0]
    hints._refilled = clock[0]
    first = refuse(manager, database, 8 * GB)
    assert "fragmentation: 2 hosts would have room" in first
    # a like request, the fleet unchanged: the same answer, nothing spent
    hints._budget = 0.0
    assert refuse(manager, database, 8 * GB) == first
    # another request, this second's budget spent: no hint, and a log line says why
    with caplog.at_level(logging.INFO, logger="scheduler.planning.fragmentation"):
        assert refuse(manager, database, 7 * GB, name="m1.other") == PLAIN
    assert "the hints of other refusals spent this second's [scheduler] fragmentation_hint_time_limit" \
        in caplog.text
    # a second later the budget is back
    clock[0] += 1.0
    assert "fragmentation: 2 hosts would have room" in refuse(manager, database, 7 * GB, name="m1.other")


def test_berth_show_gives_the_reason(tmp_path):
    conf_file = write_conf(tmp_path, "[filter_scheduler]\nram_allocation_ratio = 1.0\n")

    def fragmented(conf, database, manager):
        fill(manager, database, FRAGMENTED)
        return [FlavorEndpoint(database)]

    with cli_scheduler(conf_file, fragmented) as database:
        status, out = main(conf_file, "boot", "--flavor", "m1.large")
        assert status == 0, out
        [uuid] = out.split()
        deadline = time.monotonic() + 10
        while (database.get_instance(uuid) or {}).get("state") != states.ERROR:
            assert time.monotonic() < deadline, "the refusal was not recorded"
            time.sleep(0.02)
        status, out = main(conf_file, "show", uuid)
    assert status == 0
    shown = fields(out)
    assert shown["fault_reason"] == (
        f"{PLAIN}; fragmentation: 2 hosts would have room after moving instances off them (fewest: 1 "
        "migration, 2 GB); `berth rebalance plan --make-room m1.large`")
