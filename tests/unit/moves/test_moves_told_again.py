"""A committed move reaches its agents whatever is lost between: a move or a confirm asked for
again is answered with what was committed and told again; a move's end is written in one
transaction; what an agent's report shows it missed is told again (memory:// and SQLite, the
agents replaced by recorders: h1 8 GB, h2 16 GB, h3 4 GB)."""

import datetime
import time

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.client import PLACED_AT
from scheduler.fleet import holdings
from scheduler.fleet.reconciler import Reconciler
from scheduler.moves.planner import MoveRefused
from tests.unit.moves.test_moves import (
    CTX,
    FREE,
    active,
    move_casts,
    settled,  # noqa: F401 (an autouse fixture)
)
from tests.unit.scheduler.manager_world import casts, report, request
from tests.unit.scheduler.test_request_ids import berth, stack  # noqa: F401 (a fixture)

LARGER = {"memory_mb": 2048, "vcpus": 2, "root_gb": 10}


def lost(parts, monkeypatch, method):
    """Drop every ``method`` cast to the agents, as a scheduler dying after its commit would."""
    dropped = []
    monkeypatch.setattr(parts.compute, method, lambda *args, **kwargs: dropped.append(args))
    return dropped


def test_a_migration_asked_for_again_is_answered_with_the_one_under_way_and_told_again(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    first = parts.moves.migrate_instance(CTX, uuid)
    dest = first["dest_host"]
    assert parts.moves.migrate_instance(CTX, uuid) == first
    assert parts.moves.migrate_instance(CTX, uuid, host=dest) == first
    other = next(h for h in FREE if h not in (source, dest))
    with pytest.raises(MoveRefused, match="it is MIGRATING"):
        parts.moves.migrate_instance(CTX, uuid, host=other)
    with pytest.raises(MoveRefused, match="it is MIGRATING"):
        parts.moves.migrate_instance(CTX, uuid, live=True)
    told = move_casts(agents, 4)[dest]
    assert [(c[0], c[1]["uuid"], c[3]["id"]) for c in told] == [("prepare_move", uuid, first["id"])] * 3
    assert told[0] == told[1] == told[2]
    assert len(database.list_migrations(instance_uuid=uuid)) == 1
    assert "request" not in first  # what the destination is told stays in the database


def test_a_resize_asked_for_again_is_answered_with_it_and_another_size_refused(world, parts):
    manager, database, agents = world
    uuid, source = active(world)
    first = parts.moves.resize_instance(CTX, uuid, dict(LARGER, name="m1.larger"))
    assert parts.moves.resize_instance(CTX, uuid, dict(LARGER, name="m1.larger")) == first
    with pytest.raises(MoveRefused, match="cannot be resized: it is MIGRATING"):
        parts.moves.resize_instance(CTX, uuid, dict(LARGER, memory_mb=4096))
    assert [c[0] for c in move_casts(agents, 3)[source]] == ["prepare_move"] * 2
    parts.moves.move_update(CTX, uuid, source, first["id"], "done")
    waiting = parts.moves.resize_instance(CTX, uuid, dict(LARGER, name="m1.larger"))
    assert (waiting["id"], waiting["status"]) == (first["id"], "finished")
    assert database.get_instance(uuid)["state"] == "VERIFY_RESIZE"


def test_an_evacuation_asked_for_again_answers_each_instance_with_its_move(world, parts, conf):
    manager, database, agents = world
    uuid, _ = active(world)
    conf.set_override("service_down_time", 1, "scheduler")
    parts.host_manager.get("h2").updated -= 10
    [first] = parts.moves.evacuate_host(CTX, "h2")
    [again] = parts.moves.evacuate_host(CTX, "h2")
    assert again == first and "error" not in again
    dest = first["migration"]["dest_host"]
    assert [c[0] for c in move_casts(agents, 3)[dest]] == ["prepare_move"] * 2


@pytest.mark.parametrize("verb", ["confirmed", "reverted"])
def test_a_confirm_or_revert_asked_for_again_is_answered_with_it_and_the_end_told_again(world, parts, verb):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, LARGER)
    parts.moves.move_update(CTX, uuid, source, migration["id"], "done")
    end = parts.moves.confirm_resize if verb == "confirmed" else parts.moves.revert_resize
    ended = end(CTX, uuid)
    assert end(CTX, uuid) == ended
    assert ended["status"] == verb
    ends = [c for c in move_casts(agents, 4)[source] if c[0] == "end_resize"]
    assert ends == [("end_resize", uuid, migration["id"], verb == "confirmed")] * 2
    other = parts.moves.revert_resize if verb == "confirmed" else parts.moves.confirm_resize
    with pytest.raises(MoveRefused, match="has no resize to be"):
        other(CTX, uuid)


def test_a_confirm_by_the_window_writes_both_rows_or_neither(world, parts, conf, monkeypatch):
    manager, database, agents = world
    conf.set_override("resize_confirm_window", 60, "scheduler")
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, LARGER)
    parts.moves.move_update(CTX, uuid, source, migration["id"], "done")
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=90)
    update_migration = database.update_migration

    def dies(*args, **kwargs):
        raise RuntimeError("the scheduler died here")

    monkeypatch.setattr(database, "update_migration", dies)
    with pytest.raises(RuntimeError):
        parts.move_expiry.expire(now=later)
    assert database.get_instance(uuid)["state"] == "VERIFY_RESIZE"  # rolled back with the other row
    monkeypatch.setattr(database, "update_migration", update_migration)
    assert parts.move_expiry.expire(now=later) == 1
    assert database.get_instance(uuid)["state"] == "ACTIVE"
    assert database.get_migration(migration["id"])["status"] == "confirmed"


def test_a_confirm_by_the_window_while_the_broker_is_away_is_kept_and_said(world, parts, conf, monkeypatch,
                                                                          caplog):
    manager, database, agents = world
    conf.set_override("resize_confirm_window", 60, "scheduler")
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, LARGER)
    parts.moves.move_update(CTX, uuid, source, migration["id"], "done")

    def away(*args, **kwargs):
        raise rpc.MessageDeliveryFailure("the broker is away")

    monkeypatch.setattr(parts.compute, "end_resize", away)
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=90)
    assert parts.move_expiry.expire(now=later) == 1
    assert database.get_migration(migration["id"])["status"] == "confirmed"
    assert "could not be told now (the broker is away); they are told again" in caplog.text


def reconciler(parts, database):
    return Reconciler(database, 0.05, parts.applier.terminate, moves=parts.move_applier,
                      build=parts.applier.send_build_again)


def host_report(host, uuids, open_moves=None, move_steps=None):
    wire = report(host, FREE[host], used=1024 * len(uuids), uuids=uuids)
    if open_moves is not None:
        wire["open_moves"] = open_moves
    if move_steps is not None:
        wire["move_steps"] = move_steps
    return HostReport.from_wire(wire, host)


def test_an_end_of_a_resize_its_host_missed_is_told_again_once_its_report_shows_it_open(
        world, parts, monkeypatch):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.resize_instance(CTX, uuid, LARGER)
    parts.moves.move_update(CTX, uuid, source, migration["id"], "done")
    dropped = lost(parts, monkeypatch, "end_resize")
    parts.moves.confirm_resize(CTX, uuid)
    assert len(dropped) == 1
    monkeypatch.undo()
    fixing = reconciler(parts, database)
    time.sleep(0.1)  # the confirm settled
    still_open = {source: host_report(source, [uuid], {uuid: [migration["id"], "done"]})}
    fixing.run(still_open, now=100.0)
    fixing.run(still_open, now=100.01)  # not told twice at once
    assert move_casts(agents, 3)[source][1:] == [("end_resize", uuid, migration["id"], True)]
    fixing.run({source: host_report(source, [uuid], {})}, now=200.0)  # heard: nothing more
    move_casts(agents, 3)


def test_a_move_its_destination_never_heard_of_is_told_again_and_heard_ones_are_not(world, parts,
                                                                                    monkeypatch):
    manager, database, agents = world
    uuid, source = active(world)
    dropped = lost(parts, monkeypatch, "prepare_move")
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest = migration["dest_host"]
    assert len(dropped) == 1
    monkeypatch.undo()
    fixing = reconciler(parts, database)
    fixing.run({dest: host_report(dest, [])}, now=1.0)  # too young: may be on its way
    time.sleep(0.1)
    preparing = {uuid: [migration["id"], "preparing"]}
    fixing.run({dest: host_report(dest, [uuid], {}, preparing)}, now=2.0)  # under way
    fixing.run({source: host_report(source, [uuid], {})}, now=3.0)  # the source is not the one to tell
    move_casts(agents, 1)  # the build
    fixing.run({dest: host_report(dest, [], {})}, now=4.0)
    [(name, instance, props, sent)] = move_casts(agents, 2)[dest]
    assert (name, instance["uuid"], sent["id"]) == ("prepare_move", uuid, migration["id"])
    assert sent["source_host"] == source
    assert props["limits"]["memory_mb"] == FREE[dest]


def test_each_step_of_a_move_is_told_again_to_the_agent_whose_step_it_is_until_it_does_it(world, parts,
                                                                                           monkeypatch):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    fixing = reconciler(parts, database)
    # the destination prepared, but its word was lost: it is told again, and says it again
    time.sleep(0.1)
    fixing.run({dest: host_report(dest, [uuid], {}, {uuid: [migration_id, "prepared"]})}, now=1.0)
    assert move_casts(agents, 3)[dest][-1][0] == "prepare_move"
    # the source never heard migrate_out: told again; once it migrates, left alone
    dropped = lost(parts, monkeypatch, "migrate_out")
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={"uri": "u"})
    time.sleep(0.1)
    fixing.run({source: host_report(source, [uuid], {})}, now=2.0)
    told = (source, uuid, dict(migration_wire(migration), dest_host=dest), {"uri": "u"})
    assert [c[1:] for c in dropped] == [told, told]
    monkeypatch.undo()
    fixing.run({source: host_report(source, [uuid], {}, {uuid: [migration_id, "migrating"]})}, now=9.0)
    fixing.run({dest: host_report(dest, [uuid], {}, {uuid: [migration_id, "prepared"]})}, now=9.0)
    move_casts(agents, 3)  # nothing more: the source is at it, the destination not the one to tell
    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated")
    assert move_casts(agents, 4)[dest][-1] == ("finish_move", uuid, migration_id)
    # the destination finished, its done lost: it holds the instance with no step; told finish again
    time.sleep(0.1)
    fixing.run({dest: host_report(dest, [uuid], {})}, now=20.0)
    assert move_casts(agents, 5)[dest][-1] == ("finish_move", uuid, migration_id)


def test_a_source_that_holds_out_a_move_that_failed_is_told_to_run_it_again(world, parts, monkeypatch):
    manager, database, agents = world
    uuid, source = active(world)
    migration = parts.moves.migrate_instance(CTX, uuid)
    dest, migration_id = migration["dest_host"], migration["id"]
    parts.moves.move_update(CTX, uuid, dest, migration_id, "prepared", transfer={})
    parts.moves.move_update(CTX, uuid, source, migration_id, "migrated")
    dropped = lost(parts, monkeypatch, "abort_move")
    parts.moves.move_update(CTX, uuid, dest, migration_id, "failed", {"reason": f"{dest}: cannot boot it"})
    assert len(dropped) == 1
    monkeypatch.undo()
    time.sleep(0.1)
    held_out = {uuid: [migration_id, "migrated"]}
    reconciler(parts, database).run({source: host_report(source, [uuid], {}, held_out)}, now=1.0)
    # the end told again to both: the destination lets go, the source runs it
    received = move_casts(agents, 7)
    assert received[source][-1] == ("abort_move", uuid, migration_id)
    assert [c[0] for c in received[dest][-2:]] == ["terminate_instance"] * 2


def migration_wire(migration):
    return {"id": migration["id"], "kind": migration["kind"], "source_host": migration["source_host"],
            "live": False, "old_flavor": migration["old_flavor"]}


SETTLED = datetime.datetime(2026, 12, 6, 12, 0, 0)
BEFORE = SETTLED - datetime.timedelta(seconds=1)


def move_row(migration_id, uuid, source, dest, status, updated_at=BEFORE, kind="resize"):
    return {"id": migration_id, "instance_uuid": uuid, "source_host": source, "dest_host": dest,
            "status": status, "kind": kind, "updated_at": updated_at}


@pytest.mark.parametrize("open_moves, moves, held, expected", [
    # a resize in place confirmed or reverted that its host holds open: its end again
    ({"u": [1, "done"]}, {1: move_row(1, "u", "h", "h", "confirmed")}, {"u"}, [(1, "end")]),
    ({"u": [1, "done"]}, {1: move_row(1, "u", "h", "h", "reverted")}, {"u"}, [(1, "end")]),
    ({"u": [1, "moving"]}, {1: move_row(1, "u", "h", "h", "error")}, {"u"}, [(1, "end")]),
    (None, {1: move_row(1, "u", "h", "h", "confirmed")}, {"u"}, []),  # an agent that does not say
    # ended a moment ago: the end may be on its way
    ({"u": [1, "done"]}, {1: move_row(1, "u", "h", "h", "confirmed", updated_at=SETTLED)}, {"u"}, []),
    # waiting for its confirmation, or another instance's migration: nothing
    ({"u": [1, "done"]}, {1: move_row(1, "u", "h", "h", "finished")}, {"u"}, []),
    ({"u": [1, "done"]}, {1: move_row(1, "v", "h", "h", "confirmed")}, {"u"}, []),
    # a resize in place under way: not heard of, or its "done" lost: told again; under way: not
    ({}, {1: move_row(1, "u", "h", "h", "migrating")}, {"u"}, [(1, "move")]),
    ({"u": [1, "done"]}, {1: move_row(1, "u", "h", "h", "migrating")}, {"u"}, [(1, "move")]),
    ({"u": [1, "moving"]}, {1: move_row(1, "u", "h", "h", "migrating")}, {"u"}, []),
    ({"u": [2, "moving"]}, {1: move_row(1, "u", "h", "h", "migrating")}, {"u"}, [(1, "move")]),
    (None, {1: move_row(1, "u", "h", "h", "migrating")}, {"u"}, []),
    # a move in its destination does not hold, holds done (its word lost), takes in, or to another host
    ({}, {1: move_row(1, "u", "s", "h", "migrating", kind="migration")}, set(), [(1, "move")]),
    ({}, {1: move_row(1, "u", "s", "h", "migrating", kind="migration")}, {"u"}, [(1, "move")]),
    ({"u": [1, "moving"]}, {1: move_row(1, "u", "s", "h", "migrating", kind="migration")}, {"u"}, []),
    (None, {1: move_row(1, "u", "s", "h", "migrating", kind="migration")}, set(), []),
    ({}, {1: move_row(1, "u", "s", "x", "migrating", kind="migration")}, set(), []),
    ({}, {1: move_row(1, "u", "s", "h", "migrating", kind="migration", updated_at=SETTLED)}, set(), []),
])
def test_what_an_agent_missed_of_the_moves(open_moves, moves, held, expected):
    found = holdings.unheard("h", held, open_moves, moves, SETTLED)
    assert [(u.migration["id"], u.command) for u in found] == expected


def test_a_build_lost_with_its_cast_is_sent_again_for_its_agent_to_ask_about(world, parts, monkeypatch):
    """Stamped as placed long ago: the agent asks (start_build) before building it, lest it was placed
    elsewhere meanwhile."""
    manager, database, agents = world
    dropped = lost(parts, monkeypatch, "run_instance")
    [uuid], spec, props = request()
    manager.run_instance(CTX, spec, props)
    host = database.get_instance(uuid)["host"]
    assert len(dropped) == 1
    monkeypatch.undo()
    fixing = reconciler(parts, database)
    time.sleep(0.1)
    fixing.run({host: host_report(host, [])}, now=1.0)
    fixing.run({host: host_report(host, [])}, now=1.01)  # not twice at once
    [(name, instance, sent_spec, sent_props)] = casts(agents, 1)[host]
    assert (name, instance["uuid"], instance["flavor"]["memory_mb"]) == ("run_instance", uuid, 1024)
    assert sent_props["limits"]["memory_mb"] == FREE[host]
    assert agents[host].contexts[-1][PLACED_AT] == 0


def test_a_build_timed_out_is_taken_back_and_placed_again_in_one_transaction(world, parts, conf, monkeypatch):
    manager, database, agents = world
    conf.set_override("build_timeout", 1, "scheduler")
    [uuid], spec, props = request()
    manager.run_instance(CTX, spec, props)
    first = database.get_instance(uuid)["host"]
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=60)

    def dies(jobs):
        raise RuntimeError("the scheduler died here")

    monkeypatch.setattr(parts.build_expiry, "_reschedule", dies)
    with pytest.raises(RuntimeError):
        parts.build_expiry.expire(now=later)
    row = database.get_instance(uuid)
    assert (row["state"], row["host"]) == ("SCHEDULED", first)  # not left SCHEDULING for good
    monkeypatch.undo()
    assert parts.build_expiry.expire(now=later) == 1
    row = database.get_instance(uuid)
    assert row["state"] == "SCHEDULED" and row["host"] != first
