"""Moving instances, the scheduler's side: resize, migration, evacuation and their ends, over
memory:// and SQLite, the agents replaced by recorders (h1 8 GB, h2 16 GB, h3 4 GB)."""

import datetime
import uuid as uuidlib

import pytest

from berth_contract import traits
from scheduler import rpc
from scheduler.exception import InvalidRequest
from scheduler.fleet.holdings import differences
from scheduler.moves.planner import MoveRefused
from tests.unit.scheduler.manager_world import casts, report, request
from tests.unit.scheduler.test_request_ids import berth, stack  # noqa: F401 (a fixture)

CTX = rpc.Context({})
FREE = {"h1": 8192, "h2": 16384, "h3": 4096}


@pytest.fixture(autouse=True)
def settled(world):
    """Every cast of a test handled by its recorders before the next test's recorders listen."""
    yield
    for agent in world[2].values():
        agent.handled_all_sent()


def active(world, memory_mb=1024, host_reports=True, hints=None, resizes_in_place=True):
    """An instance placed (on h2, the emptiest) and ACTIVE there, its host's report listing it (and
    saying that its driver resizes in place, as the fake driver's agents do, unless not
    ``resizes_in_place``)."""
    manager, database, agents = world
    [uuid], spec, props = request(memory_mb)
    props.update({"scheduler_hints": hints} if hints else {})
    manager.run_instance(CTX, spec, props)
    host = database.get_instance(uuid)["host"]
    manager.instance_update(CTX, uuid, host, "ACTIVE")
    if host_reports:
        said = [traits.RESIZE_IN_PLACE] if resizes_in_place else []
        manager.report_resources({}, host, report(host, FREE[host], used=memory_mb, uuids=[uuid],
                                                  traits=said))
    return uuid, host


def free(parts, host):
    return parts.host_manager.get(host).free_ram_mb


def move_casts(agents, expected):
    received = casts(agents, expected)
    return {host: [c for c in calls if c[0] != "run_instance"] for host, calls in received.items()}


def test_a_migration_goes_step_by_step_between_its_agents_holding_both_hosts_until_it_ends(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    assert (source, migration["status"], migration["kind"], migration["step"]) == (
        "h2", "migrating", "migration", "prepare")
    assert dest != source
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"]) == ("MIGRATING", "h2", dest)
    # both hold it meanwhile: the source by its report, the destination by this placement
    assert free(parts, source) == 16384 - 1024
    assert free(parts, dest) == FREE[dest] - 1024
    [(name, instance, props, sent)] = move_casts(agents, 2)[dest]
    assert (name, instance["uuid"], instance["flavor"]["memory_mb"]) == ("prepare_move", uuid, 1024)
    assert props["limits"]["memory_mb"] == FREE[dest]  # the destination's limits, as for a build
    assert sent == {"id": migration_id, "kind": "migration", "source_host": "h2", "live": False,
                    "old_flavor": instance["flavor"]}

    # the destination prepared: its source is told to migrate the instance out through its transfer
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={"uri": "tcp:h9:4444"})
    assert database.get_migration(migration_id)["step"] == "migrate"
    assert move_casts(agents, 3)[source] == [
        ("migrate_out", uuid, dict(sent, dest_host=dest), {"uri": "tcp:h9:4444"})]
    # the source migrated it out: the destination is told to finish
    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated")
    assert database.get_migration(migration_id)["step"] == "finish"
    assert move_casts(agents, 4)[dest][-1] == ("finish_move", uuid, migration_id)
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"]) == ("MIGRATING", "h2", dest)

    parts.moves.move_update(CTX, uuid, dest, migration_id, "done")
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"]) == ("ACTIVE", dest, None)
    assert database.get_migration(migration_id)["status"] == "completed"
    terminate = move_casts(agents, 5)[source]
    assert terminate[-1] == ("terminate_instance", uuid, f"moved to {dest} (migration {migration_id})")


def test_an_evacuation_is_rebuilt_by_its_destination_alone_its_source_being_down(world, parts, conf):
    manager, database, agents = world
    uuid, source = active(world)
    conf.set_override("service_down_time", 1, "scheduler")
    parts.host_manager.get(source).updated -= 10
    [answer] = parts.moves.evacuate_host(CTX, source)
    migration = answer["migration"]
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={})
    assert database.get_migration(migration_id)["step"] == "finish"  # no migrate step: its source is down
    parts.moves.move_update(CTX, uuid, dest, migration_id, "done")
    assert database.get_instance(uuid)["host"] == dest
    received = move_casts(agents, 4)
    assert [c[0] for c in received[dest]] == ["prepare_move", "finish_move"]
    assert [c[0] for c in received[source]] == ["terminate_instance"]  # waits for it, should it come back


def test_a_step_said_twice_or_out_of_turn_changes_nothing(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "done")  # before its steps: ignored
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={"uri": "a"})
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={"uri": "b"})
    assert database.get_migration(migration_id, request=True)["transfer"] == {"uri": "a"}
    assert [c[0] for c in move_casts(agents, 3)[source]] == ["migrate_out"]  # once
    assert database.get_instance(uuid)["state"] == "MIGRATING"


def test_a_second_move_of_a_moving_instance_is_refused_with_the_reason(world, parts):
    uuid, _ = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    with pytest.raises(MoveRefused, match=f"it is MIGRATING \\(a move is under way from h2 to "
                                          f"{migration['dest_host']}\\)"):
        parts.moves.migrate_instance(CTX, uuid, live=True)
    with pytest.raises(MoveRefused, match="cannot be resized: it is MIGRATING"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    assert len(world[1].list_migrations(instance_uuid=uuid)) == 1


def test_a_failed_move_leaves_the_instance_active_on_its_source_and_frees_the_destination(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest = migration["dest_host"]
    parts.moves.move_update(CTX, uuid, dest, migration["id"], "failed", {"reason": f"{dest}: disk on fire"})
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"], row["memory_mb"]) == ("ACTIVE", source, None, 1024)
    ended = database.get_migration(migration["id"])
    assert (ended["status"], ended["reason"]) == ("error", f"{dest}: disk on fire")
    assert free(parts, dest) == FREE[dest]
    # a late or repeated word changes nothing
    parts.moves.move_update(CTX, uuid, dest, migration["id"], "done")
    assert database.get_instance(uuid)["host"] == source


def test_a_move_update_from_another_host_or_of_another_instance_is_refused(world, parts):
    uuid, _ = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest = migration["dest_host"]
    wrong = next(h for h in FREE if h not in (dest, "h2"))
    with pytest.raises(InvalidRequest, match=f"goes from h2 to {dest}; {wrong} cannot say it done"):
        parts.moves.move_update(CTX, uuid, wrong, migration["id"], "done")
    with pytest.raises(InvalidRequest, match=f"goes from h2 to {dest}; h2 cannot say it prepared"):
        parts.moves.move_update(CTX, uuid, "h2", migration["id"], "prepared", transfer={})
    with pytest.raises(InvalidRequest, match=f"goes from h2 to {dest}; {dest} cannot say it migrated"):
        parts.moves.move_update(CTX, uuid, dest, migration["id"], "migrated")
    with pytest.raises(InvalidRequest, match="outcome must be one of done, failed, prepared, migrated"):
        parts.moves.move_update(CTX, uuid, dest, migration["id"], "maybe")
    with pytest.raises(InvalidRequest, match="transfer must be an object, and only of a move prepared"):
        parts.moves.move_update(CTX, uuid, dest, migration["id"], "done", transfer={"uri": "x"})
    other, _ = active(world)
    with pytest.raises(InvalidRequest, match=f"no migration {migration['id']} of instance {other}"):
        parts.moves.move_update(CTX, other, dest, migration["id"], "done")
    assert world[1].get_instance(uuid)["state"] == "MIGRATING"


def test_a_move_that_fails_at_its_source_frees_the_destination_and_runs_on_the_source(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={})
    parts.moves.move_update(CTX, uuid, source, migration_id, "failed", {"reason": "h2: link down"})
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"]) == ("ACTIVE", source, None)
    assert database.get_migration(migration_id)["reason"] == "h2: link down"
    assert free(parts, dest) == FREE[dest]
    received = move_casts(agents, 5)
    assert received[dest][-1] == ("terminate_instance", uuid, "h2: link down")
    assert received[source][-1] == ("abort_move", uuid, migration_id)


def test_migrate_to_a_named_host_runs_the_filters_unless_forced(world, parts):
    uuid, _ = active(world, memory_mb=7000)
    with pytest.raises(MoveRefused, match="cannot be moved \\(migration\\): .*RamFilter"):
        parts.moves.migrate_instance(CTX, uuid, host="h3")
    assert world[1].get_instance(uuid)["state"] == "ACTIVE"
    assert free(parts, "h3") == 4096
    forced = parts.moves.migrate_instance(CTX, uuid, host="h3", force=True)
    assert forced["dest_host"] == "h3"
    [(_, _, props, _)] = move_casts(world[2], 2)["h3"]
    assert props["limits"] == {}  # forced: no filter, and no limit to the agent's claim (Nova's force_hosts)


def test_bad_move_requests_are_refused_and_change_nothing(world, parts):
    uuid, _ = active(world)
    with pytest.raises(InvalidRequest, match="force needs a host"):
        parts.moves.migrate_instance(CTX, uuid, force=True)
    with pytest.raises(MoveRefused, match="is on h2 already"):
        parts.moves.migrate_instance(CTX, uuid, host="h2")
    with pytest.raises(MoveRefused, match="No host h9 has reported"):
        parts.moves.migrate_instance(CTX, uuid, host="h9")
    with pytest.raises(InvalidRequest, match="resize_instance: flavor.memory_mb"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": -1, "vcpus": 1})
    with pytest.raises(MoveRefused, match="has that size already"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": 1024, "vcpus": 2, "root_gb": 10})
    with pytest.raises(MoveRefused, match="has no resize to be confirmed: it is ACTIVE"):
        parts.moves.confirm_resize(CTX, uuid)
    assert world[1].get_instance(uuid)["state"] == "ACTIVE"
    assert world[1].list_migrations(instance_uuid=uuid) == []


def test_a_resize_that_fits_is_done_in_place_and_confirmed(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 4096, "vcpus": 2, "root_gb": 10,
                                                        "name": "m1.large"})
    assert (migration["dest_host"], migration["kind"]) == (source, "resize")
    [(name, instance, _, sent)] = move_casts(agents, 2)[source]
    assert (name, instance["flavor"]["memory_mb"], sent["old_flavor"]["memory_mb"]) == (
        "prepare_move", 4096, 1024)
    # until the agent reports again, the host counts the old size and the new one
    assert free(parts, source) == 16384 - 1024 - 4096
    parts.moves.move_update(CTX, uuid, source, migration["id"], "done")
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["memory_mb"], row["flavor_name"]) == (
        "VERIFY_RESIZE", source, 4096, "m1.large")
    confirmed = parts.moves.confirm_resize(CTX, uuid)
    assert confirmed["status"] == "confirmed"
    assert database.get_instance(uuid)["state"] == "ACTIVE"
    assert move_casts(agents, 3)[source][-1] == ("end_resize", uuid, migration["id"], True)


def test_a_resize_that_does_not_fit_moves_and_a_revert_brings_it_back(world, parts):
    manager, database, agents = world
    uuid, source = active(world, memory_mb=4096)
    manager.report_resources({}, "h2", report("h2", 16384, used=16000, uuids=[uuid]))  # h2 nearly full
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 6144, "vcpus": 2, "root_gb": 10})
    assert migration["dest_host"] == "h1"
    parts.moves.move_update(CTX, uuid, "h1", migration["id"], "prepared", transfer={})
    parts.moves.move_update(CTX, uuid, "h2", migration["id"], "migrated")
    parts.moves.move_update(CTX, uuid, "h1", migration["id"], "done")
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"], row["memory_mb"]) == (
        "VERIFY_RESIZE", "h1", "h2", 6144)
    # the source still holds the old size: nothing told it to let go
    received = move_casts(agents, 4)
    assert ([c[0] for c in received["h1"]], [c[0] for c in received["h2"]]) == (
        ["prepare_move", "finish_move"], ["migrate_out"])

    reverted = parts.moves.revert_resize(CTX, uuid)
    assert reverted["status"] == "reverted"
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["move_host"], row["memory_mb"]) == ("ACTIVE", "h2", None, 4096)
    assert row["request_spec"]["instance_type"]["memory_mb"] == 4096
    received = move_casts(agents, 6)
    assert received["h1"][-1] == ("terminate_instance", uuid, f"resize {migration['id']} reverted to h2")
    assert received["h2"][-1] == ("abort_move", uuid, migration["id"])  # it runs the instance again
    assert free(parts, "h1") == 8192


def test_with_resize_in_place_off_a_resize_always_moves(world, parts, conf):
    conf.set_override("resize_in_place", False, "scheduler")
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    assert migration["dest_host"] != source


def test_a_resize_on_a_host_whose_driver_cannot_resize_in_place_moves_or_is_refused_saying_why(
        world, parts):
    manager, _, agents = world
    uuid, source = active(world, resizes_in_place=False)  # qemu's agents: no resize in place
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    assert migration["dest_host"] != source
    parts.moves.move_update(CTX, uuid, migration["dest_host"], migration["id"], "failed",
                            fault={"reason": "test"})
    move_casts(agents, 4)
    # Too big for every other host, though it would fit on its own: refused, not sent there.
    with pytest.raises(MoveRefused, match="No valid host was found"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": 12288, "vcpus": 2, "root_gb": 10})


def test_evacuate_is_refused_for_a_host_that_is_up_and_moves_what_a_dead_one_held(world, parts, conf):
    manager, database, agents = world
    uuid, source = active(world)
    with pytest.raises(MoveRefused, match="Host h2 is up .*drain it instead"):
        parts.moves.evacuate_host(CTX, "h2")
    assert database.get_instance(uuid)["state"] == "ACTIVE"
    conf.set_override("service_down_time", 1, "scheduler")
    parts.host_manager.get("h2").updated -= 10  # its last report is old: the host is down
    [answer] = parts.moves.evacuate_host(CTX, "h2")
    assert answer["migration"]["kind"] == "evacuation"
    assert answer["migration"]["dest_host"] in ("h1", "h3")
    assert database.get_instance(uuid)["move_host"] == answer["migration"]["dest_host"]


def test_a_resize_waiting_too_long_is_confirmed_and_a_silent_move_fails(world, parts, conf):
    manager, database, agents = world
    conf.set_override("resize_confirm_window", 60, "scheduler")
    conf.set_override("move_timeout", 120, "scheduler")
    resized, _ = active(world)
    migration = parts.moves.resize_instance(CTX, resized, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    parts.moves.move_update(CTX, resized, migration["dest_host"], migration["id"], "done")
    stuck, _ = active(world)
    silent = parts.moves.migrate_instance(CTX, stuck)
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert parts.move_expiry.expire(now=now + datetime.timedelta(seconds=30)) == 0
    assert parts.move_expiry.expire(now=now + datetime.timedelta(seconds=90)) == 1
    assert database.get_instance(resized)["state"] == "ACTIVE"
    assert parts.move_expiry.expire(now=now + datetime.timedelta(seconds=200)) == 1
    row = database.get_instance(stuck)
    assert (row["state"], row["host"]) == ("ACTIVE", "h2")
    assert "no word of the move for more than 120 s" in database.get_migration(silent["id"])["reason"]


def test_without_a_window_a_resize_waits_for_the_user(world, parts):
    uuid, _ = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    parts.moves.move_update(CTX, uuid, migration["dest_host"], migration["id"], "done")
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(days=30)
    assert parts.move_expiry.expire(now=later) == 0
    assert world[1].get_instance(uuid)["state"] == "VERIFY_RESIZE"


def test_an_anti_affinity_peer_never_lands_on_a_host_a_moving_member_holds(world, parts):
    manager, database, agents = world
    group = str(uuidlib.uuid4())
    database.create_server_group(group, "web", "anti-affinity")
    hint = {"group": group}
    first, _ = active(world, hints=hint)  # on h2
    migration = parts.moves.migrate_instance(CTX, first)  # h2 -> h1 (the next emptiest)
    assert migration["dest_host"] == "h1"
    second, _ = active(world, hints=hint, host_reports=False)
    # h2 and h1 both hold the moving member: the peer goes to h3, small as it is
    assert database.get_instance(second)["host"] == "h3"


def test_deleting_a_moving_instance_drops_it_on_both_hosts(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    manager.delete_instance(CTX, uuid)
    received = move_casts(agents, 4)
    assert received[source][-1][0] == received[migration["dest_host"]][-1][0] == "terminate_instance"
    assert database.get_migration(migration["id"])["status"] == "error"


def test_the_reconciler_leaves_the_other_end_of_a_move_alone(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    dest = parts.moves.migrate_instance(CTX, uuid)["dest_host"]
    recorded = database.instances_to_reconcile([dest], [uuid])
    settled = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
    assert differences(dest, [uuid], recorded, settled) == []
    assert differences("h3" if dest != "h3" else "h1", [uuid], recorded, settled)[0].action == "terminate"


def test_no_move_goes_to_a_host_that_is_down_or_disabled_even_forced(world, parts, conf):
    uuid, _ = active(world)
    conf.set_override("service_down_time", 30, "scheduler")
    parts.host_manager.get("h3").updated -= 60  # silent for a minute
    for force in (False, True):
        with pytest.raises(MoveRefused, match="Host h3 is down \\(no report for more than \\[scheduler\\] "
                                              "service_down_time, 30 s\\): it cannot take instance"):
            parts.moves.migrate_instance(CTX, uuid, host="h3", force=force)
    parts.host_manager.set_disabled({"h1": "new disks"})
    with pytest.raises(MoveRefused, match="Host h1 is disabled \\(new disks\\): it takes no instance"):
        parts.moves.migrate_instance(CTX, uuid, host="h1")
    assert world[1].list_migrations(instance_uuid=uuid) == []


def test_an_instance_whose_host_is_down_is_evacuated_not_migrated(world, parts, conf):
    uuid, _ = active(world)
    conf.set_override("service_down_time", 30, "scheduler")
    parts.host_manager.get("h2").updated -= 60
    with pytest.raises(MoveRefused, match="its host h2 is down .*berth host evacuate h2"):
        parts.moves.migrate_instance(CTX, uuid)
    with pytest.raises(MoveRefused, match="its host h2 is down"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    assert world[1].get_instance(uuid)["state"] == "ACTIVE"


def test_a_disk_is_never_shrunk_and_a_deleted_instance_says_so(world, parts):
    manager, database, agents = world
    uuid, _ = active(world)
    with pytest.raises(MoveRefused, match="cannot be resized to a smaller disk \\(root 10 -> 0 GB"):
        parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2})
    manager.delete_instance(CTX, uuid)
    manager.instance_update(CTX, uuid, "h2", "DELETED")
    with pytest.raises(MoveRefused, match=f"Instance {uuid} is DELETED: nothing to move"):
        parts.moves.migrate_instance(CTX, uuid)


def test_a_resize_in_place_that_never_ends_gives_the_old_size_back_and_destroys_nothing(world, parts, conf):
    manager, database, agents = world
    conf.set_override("move_timeout", 120, "scheduler")
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, {"memory_mb": 2048, "vcpus": 2, "root_gb": 10})
    assert migration["dest_host"] == source  # in place
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=200)
    assert parts.move_expiry.expire(now=later) == 1
    row = database.get_instance(uuid)
    assert (row["state"], row["host"], row["memory_mb"]) == ("ACTIVE", source, 1024)
    # its host is told to hold the old size again: not to terminate the instance
    assert [c[0] for c in move_casts(agents, 3)[source]] == ["prepare_move", "end_resize"]


def gpu_report(host, gpus, used=0, uuids=()):
    """``report()`` of a host with ``gpus`` VGPUs, ``used`` of them by ``uuids``."""
    figures = report(host, FREE[host], used=1024 * len(uuids), uuids=uuids)
    inventory = {"reserved": 0, "min_unit": 1, "step_size": 1, "allocation_ratio": 1.0}
    figures["inventories"] = {"MEMORY_MB": dict(inventory, total=FREE[host], max_unit=FREE[host])}
    figures["usages"] = {"MEMORY_MB": 1024 * len(uuids)}
    if gpus:
        figures["inventories"]["VGPU"] = dict(inventory, total=gpus, max_unit=gpus)
        figures["usages"]["VGPU"] = used
    return figures


def test_a_gpu_instance_moves_only_to_a_free_gpu_and_holds_one_on_both_hosts_meanwhile(world, parts):
    manager, database, agents = world
    for host, gpus in (("h1", 0), ("h2", 1), ("h3", 1)):
        manager.report_resources({}, host, gpu_report(host, gpus))
    [uuid], spec, props = request(1024)
    spec["instance_type"]["extra_specs"] = {"resources:VGPU": "1"}
    manager.run_instance(CTX, spec, props)
    source = database.get_instance(uuid)["host"]
    assert source == "h2"  # the emptiest of the two with a GPU
    manager.instance_update(CTX, uuid, source, "ACTIVE")
    manager.report_resources({}, source, gpu_report(source, 1, used=1, uuids=[uuid]))
    casts(agents, 1)

    migration = parts.moves.migrate_instance(CTX, uuid)
    assert migration["dest_host"] == "h3"  # h1 has more RAM free but no GPU
    gpus_used = {host: parts.host_manager.get(host).used("VGPU") for host in ("h2", "h3")}
    assert gpus_used == {"h2": 1, "h3": 1}
    [(name, instance, _props, _sent)] = move_casts(agents, 2)["h3"]
    assert instance["flavor"]["extra_specs"] == {"resources:VGPU": "1"}
    # A second GPU instance finds none free while both ends hold this one.
    [other], spec, props = request(1024)
    spec["instance_type"]["extra_specs"] = {"resources:VGPU": "1"}
    manager.run_instance(CTX, spec, props)
    assert database.get_instance(other)["state"] == "ERROR"
    assert "ResourceClassFilter removed 3" in database.get_instance(other)["fault_reason"]


def test_a_live_migrations_figures_said_with_its_migrated_step_are_recorded_on_it(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid, live=True)
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={"uri": "tcp:h9:4444"})
    figures = {"downtime_ms": 61, "total_ms": 1843, "memory_bytes": 9 << 20}
    for bad, message in (({"downtime_ms": -1}, "downtime_ms must be a whole number >= 0, got -1"),
                         ({"downtime_ms": 1.5}, "downtime_ms must be a whole number >= 0, got 1.5"),
                         ({"pause_ms": 3}, "'pause_ms' is not one of downtime_ms, total_ms, memory_bytes"),
                         ([61], "figures must be an object")):
        with pytest.raises(InvalidRequest, match=message):
            parts.moves.move_update(CTX, uuid, source, migration_id, "migrated", figures=bad)
    with pytest.raises(InvalidRequest, match="figures are of a move migrated, not done"):
        parts.moves.move_update(CTX, uuid, dest, migration_id, "done", figures=figures)
    assert database.get_migration(migration_id)["step"] == "migrate"  # nothing refused changed it

    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated", figures=figures)
    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated", figures={"downtime_ms": 5})  # again
    parts.moves.move_update(CTX, uuid, dest, migration_id, "done")
    [listed] = parts.moves.list_migrations(CTX, instance_uuid=uuid)
    assert (listed["kind"], listed["status"], listed["figures"]) == ("live-migration", "completed", figures)


def test_a_move_whose_source_said_no_figures_records_none(world, parts):
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={})
    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated")
    parts.moves.move_update(CTX, uuid, dest, migration_id, "done")
    assert world[1].get_migration(migration_id)["figures"] is None
