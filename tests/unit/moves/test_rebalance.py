"""Rebalance plans, the scheduler's side, over memory:// and SQLite (h1 8 GB, h2 16 GB, h3 4 GB,
the agents replaced by recorders): a plan saved with its steps and generations, shown, applied
through live migrations, refused when the fleet changed, stopped."""

import pytest

from scheduler import rpc
from scheduler.exception import InvalidRequest
from scheduler.moves.fleet_snapshot import fleet_snapshot
from scheduler.moves.planner import MoveRefused
from scheduler.moves.rebalance_api import NoRebalancePlan, PlanNotFound
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.moves.test_moves import free
from tests.unit.scheduler.manager_world import moved, report, request

CTX = rpc.Context({})
BIG = {"name": "big", "memory_mb": 6144, "root_gb": 10, "ephemeral_gb": 0, "vcpus": 2}
BIGGER = dict(BIG, name="bigger", memory_mb=7168)
RAM = {"h1": 8192, "h2": 16384, "h3": 4096}


def boot(world, host, memory_mb):
    """An instance ACTIVE on ``host``."""
    manager, database, _ = world
    [uuid], spec, props = request(memory_mb)
    manager.run_instance(CTX, spec, dict(props, force_hosts=[host]))
    assert database.get_instance(uuid)["host"] == host
    manager.instance_update(CTX, uuid, host, "ACTIVE")
    return uuid


def reported(world):
    """Each host reports the instances ACTIVE on it."""
    manager, database, _ = world
    for host, ram in RAM.items():
        on = database.list_instances(host=host, states=["ACTIVE"])
        manager.report_resources({}, host, report(host, ram, used=sum(i["memory_mb"] for i in on),
                                                  uuids=[i["uuid"] for i in on]))


def served(parts, database, method, *args):
    """``method`` run as the RPC server runs a message: in a unit of work, which rolls back
    what the method wrote should it raise."""
    work = UnitOfWork(database, parts.outbox, parts.undo)
    with work, work.step(method.__name__):
        return method(CTX, *args)


@pytest.fixture
def fleet(world):
    """No host has 6 GB free (h1 2 GB, h2 5 GB, h3 2 GB): moving h1's 4 GB instance to h2 makes room."""
    four = boot(world, "h1", 4096)
    two = boot(world, "h1", 2048)
    boot(world, "h2", 11264)
    boot(world, "h3", 2048)
    reported(world)
    return {"four": four, "two": two}


def test_a_plan_is_saved_with_its_steps_the_hosts_generations_and_the_figures(world, parts, fleet):
    database = world[1]
    generations = database.host_generations(["h1", "h2"])
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    [step] = plan["steps"]
    assert (step["instance_uuid"], step["source_host"], step["dest_host"], step["status"]) == (
        fleet["four"], "h1", "h2", "pending")
    assert (step["source_generation"], step["dest_generation"]) == (generations["h1"], generations["h2"])
    assert step["reason"] == "frees room on h1 for flavor big"
    assert plan["state"] == "planned" and plan["summary"]["placements"] == ["h1"]
    before, after = plan["summary"]["before"], plan["summary"]["after"]
    assert before["largest_fit"] != "big" and after["largest_fit"] == "big"
    assert (before["hosts_used"], after["hosts_used"]) == (3, 3)
    # saved: shown and listed by its id
    assert parts.rebalance.show_rebalance_plan(CTX, plan["id"])["steps"] == plan["steps"]
    [listed] = parts.rebalance.list_rebalance_plans(CTX)
    assert (listed["id"], listed["goal"], listed["step_count"], listed["state"]) == (
        plan["id"], "make_room", 1, "planned")


def test_a_goal_out_of_reach_is_refused_with_the_reason_and_nothing_is_saved(world, parts, fleet):
    huge = dict(BIG, name="huge", memory_mb=32768)
    with pytest.raises(NoRebalancePlan, match="No rebalance plan \\(make_room\\): no host can ever take "
                                              "flavor huge"):
        parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": huge})
    with pytest.raises(InvalidRequest,
                       match="goal must be one of balance, consolidate, make_room, got .tidy."):
        parts.rebalance.plan_rebalance(CTX, "tidy", {})
    with pytest.raises(InvalidRequest, match="method must be one of auto, greedy, exact"):
        parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG, "method": "guess"})
    with pytest.raises(InvalidRequest, match="count must be a whole number"):
        parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG, "count": 0})
    with pytest.raises(PlanNotFound, match="No rebalance plan 7"):
        parts.rebalance.show_rebalance_plan(CTX, 7)
    assert parts.rebalance.list_rebalance_plans(CTX) == []


def test_a_flavor_that_fits_already_gets_a_plan_of_no_step_that_is_done(world, parts, fleet):
    small = dict(BIG, name="small", memory_mb=2048)
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": small})
    assert (plan["steps"], plan["state"], plan["summary"]["note"]) == ([], "done",
                                                                      "flavor small fits without migrations")
    assert [p["state"] for p in parts.rebalance.list_rebalance_plans(CTX)] == ["done"]


def test_applying_a_step_live_migrates_the_instance_to_its_planned_host(world, parts, fleet):
    manager, database, _ = world
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    migration = parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)["migration"]
    assert (migration["kind"], migration["source_host"], migration["dest_host"]) == (
        "live-migration", "h1", "h2")
    assert free(parts, "h2") == 5120 - 4096  # the destination holds it from the start
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert (shown["state"], shown["steps"][0]["status"]) == ("applying", "running")
    with pytest.raises(MoveRefused, match="Step 1 of rebalance plan .* is running already"):
        parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)
    moved(parts, migration)
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert (shown["state"], shown["steps"][0]["status"]) == ("done", "done")
    assert [p["state"] for p in parts.rebalance.list_rebalance_plans(CTX)] == ["done"]
    assert database.get_instance(fleet["four"])["host"] == "h2"
    reported(world)  # h1's agent no longer lists it
    assert free(parts, "h1") == 6144  # the room was made
    # what the fleet shows now counts the flavor the plan made room for, as its prediction did
    reached = parts.rebalance.show_rebalance_plan(CTX, plan["id"])["reached"]["summary"]
    assert reached["largest_fit"] == plan["summary"]["after"]["largest_fit"] == "big"


def test_a_step_whose_host_changed_since_the_plan_is_refused_and_the_plan_stops(world, parts, fleet):
    database = world[1]
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    boot(world, "h2", 1024)  # placed on the planned destination meanwhile: its generation moves
    refused = served(parts, database, parts.rebalance.start_rebalance_step, plan["id"], 1)
    assert refused["refused"].startswith("host h2 changed since the plan was made")
    assert database.get_instance(fleet["four"])["host"] == "h1"  # nothing else moved in its place
    assert database.list_migrations(instance_uuid=fleet["four"]) == []
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert (shown["state"], shown["steps"][0]["status"]) == ("stopped", "failed")
    assert shown["steps"][0]["failure"].startswith(
        "host h2 changed since the plan was made: its generation is")


def test_a_step_whose_instance_moved_is_refused(world, parts, fleet):
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    migration = parts.moves.migrate_instance(CTX, fleet["four"], host="h3", force=True)
    refused = parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)
    assert refused == {"position": 1, "refused": f"instance {fleet['four']} is no longer ACTIVE on h1 as the "
                                                 "plan saw it: it is MIGRATING on h1"}
    assert world[1].get_migration(migration["id"])["dest_host"] == "h3"


def test_a_stopped_plan_starts_no_step(world, parts, fleet):
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    stopped = parts.rebalance.stop_rebalance_plan(CTX, plan["id"])
    assert (stopped["state"], stopped["reason"]) == ("stopped", "stopped by berth rebalance stop")
    with pytest.raises(MoveRefused, match="Rebalance plan .* is stopped "
                                          "\\(stopped by berth rebalance stop\\): "
                                          "no step starts"):
        parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)
    assert world[1].get_instance(fleet["four"])["state"] == "ACTIVE"
    with pytest.raises(MoveRefused, match="is stopped already: nothing to stop"):
        parts.rebalance.stop_rebalance_plan(CTX, plan["id"])


def test_stopping_while_a_step_runs_lets_it_end(world, parts, fleet):
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    migration = parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)["migration"]
    assert parts.rebalance.stop_rebalance_plan(CTX, plan["id"])["state"] == "stopping"
    moved(parts, migration)
    assert parts.rebalance.show_rebalance_plan(CTX, plan["id"])["state"] == "done"


def test_steps_to_the_same_host_pass_its_generation_check_each_after_the_other(world, parts):
    """h1 holds 2 + 2 + 3 GB: room for 7 GB there takes all three off, two of them onto h2."""
    database = world[1]
    taken_off = [boot(world, "h1", memory) for memory in (2048, 2048, 3072)]
    boot(world, "h2", 11264)
    boot(world, "h3", 2048)
    reported(world)
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    assert sorted(s["instance_uuid"] for s in plan["steps"]) == sorted(taken_off)
    assert sorted(s["dest_host"] for s in plan["steps"]) == ["h2", "h2", "h3"]
    for step in plan["steps"]:
        migration = parts.rebalance.start_rebalance_step(CTX, plan["id"], step["position"])["migration"]
        moved(parts, migration)
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert shown["state"] == "done" and {s["status"] for s in shown["steps"]} == {"done"}
    assert {database.get_instance(u)["host"] for u in taken_off} == {"h2", "h3"}


def test_a_step_whose_move_fails_stops_the_plan_with_the_agents_reason(world, parts):
    for memory in (2048, 2048, 3072):
        boot(world, "h1", memory)
    boot(world, "h2", 11264)
    boot(world, "h3", 2048)
    reported(world)
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    first = plan["steps"][0]
    migration = parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)["migration"]
    parts.moves.move_update(CTX, first["instance_uuid"], first["dest_host"], migration["id"], "failed",
                            {"reason": "disk on fire"})
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert (shown["state"], shown["reason"]) == ("stopped", "step 1 failed: disk on fire")
    assert [s["status"] for s in shown["steps"]] == ["failed", "pending", "pending"]
    with pytest.raises(MoveRefused, match="is stopped \\(step 1 failed: disk on fire\\): no step starts"):
        parts.rebalance.start_rebalance_step(CTX, plan["id"], 2)
    assert world[1].list_migrations(instance_uuid=plan["steps"][1]["instance_uuid"]) == []


def test_the_fleet_a_plan_reads_moves_only_active_instances_it_can_read(conf, world, parts, fleet):
    database = world[1]
    moving = boot(world, "h3", 1024)
    parts.moves.migrate_instance(CTX, moving, host="h2")
    database.update_instance(fleet["two"], {"request_spec": {"instance_type": "not a flavor"}})
    snapshot = fleet_snapshot(conf, database, parts.host_manager)
    residents = snapshot.residents
    assert residents[fleet["four"]].movable and residents[fleet["four"]].host == "h1"
    assert not residents[moving].movable  # MIGRATING: it holds its room where it is
    assert not residents[fleet["two"]].movable  # its stored request cannot be read
    assert residents[fleet["two"]].amounts == (2, 2048, 10)
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIG})
    assert fleet["two"] not in {s["instance_uuid"] for s in plan["steps"]}


def test_each_instance_of_the_fleet_keeps_its_own_request(conf, world, parts):
    """Instances whose stored requests are alike but for their uuid each keep their own
    request, also when it names the instance elsewhere than in instance_uuids."""
    database = world[1]
    plain, named, other = (boot(world, "h2", 1024) for _ in range(3))
    for uuid in (named, other):
        stored = database.get_instance(uuid)["request_spec"]
        project = dict(stored, instance_properties=dict(stored["instance_properties"], project_id=uuid))
        database.update_instance(uuid, {"request_spec": project})
    residents = fleet_snapshot(conf, database, parts.host_manager).residents
    assert residents[plain].spec.project_id is None and residents[plain].spec.instance_uuids == [plain]
    for uuid in (named, other):
        assert residents[uuid].spec.project_id == uuid and residents[uuid].spec.instance_uuids == [uuid]
        assert residents[uuid].amounts == (2, 1024, 10) and residents[uuid].movable


def test_consolidate_and_balance_are_planned_through_the_same_endpoint(world, parts, fleet):
    plan = parts.rebalance.plan_rebalance(CTX, "consolidate", {"max_migrations": 3})
    assert plan["goal"] == "consolidate" and plan["options"]["max_migrations"] == 3
    assert 1 <= len(plan["steps"]) <= 3
    assert plan["summary"]["after"]["hosts_used"] < plan["summary"]["before"]["hosts_used"]
    with pytest.raises(NoRebalancePlan, match="No rebalance plan \\(balance\\): no host has measured load"):
        parts.rebalance.plan_rebalance(CTX, "balance", {"target_skew": 1.1})
    with pytest.raises(InvalidRequest, match="unknown option\\(s\\) of balance: headroom"):
        parts.rebalance.plan_rebalance(CTX, "balance", {"headroom": 0.1})
    with pytest.raises(InvalidRequest, match="target_skew is the busiest host's utilisation over the "
                                             "fleet's, a number of at least 1.0, got '0.5'"):
        parts.rebalance.plan_rebalance(CTX, "balance", {"target_skew": 0.5})


def test_each_instance_carries_its_share_of_its_hosts_measured_load(conf, world, parts, fleet):
    table = parts.host_manager.table
    row = table.index["h1"]
    table.util_measured[row], table.cpu_util[row] = True, 0.5  # 4 of h1's 8 cores busy, as measured
    snapshot = fleet_snapshot(conf, world[1], parts.host_manager)
    # h1's two instances take 2 vCPUs each: 2 cores of load each; h2 measured nothing
    assert {r.uuid: r.load for r in snapshot.residents.values() if r.host == "h1"} == {
        fleet["four"]: 2.0, fleet["two"]: 2.0}
    assert {r.load for r in snapshot.residents.values() if r.host == "h2"} == {0.0}
    assert snapshot.load[row] == 4.0


def usage_report(world, host, cpu, usage, at):
    """``host`` reports its ACTIVE instances, ``cpu`` of its 8 cores busy and each instance's use
    (``usage``: {uuid: busy vCPUs}), sampled at ``at``."""
    manager, database, _ = world
    on = database.list_instances(host=host, states=["ACTIVE"])
    manager.report_resources({}, host, report(
        host, RAM[host], used=sum(i["memory_mb"] for i in on), uuids=[i["uuid"] for i in on],
        cpu_utilization=cpu, memory_mb_in_use=sum(i["memory_mb"] for i in on) / 2,
        utilization_sampled_at=at,
        instance_usage={uuid: {"cpu": busy, "memory": 512.0} for uuid, busy in usage.items()}))


def test_each_instance_carries_its_own_measured_use_averaged_and_its_host_keeps_the_rest(
        conf, world, parts, fleet):
    # h1: "four" busy on 3 vCPUs, "two" idle, 1 core of h1's busy with no instance's work
    usage_report(world, "h1", 4 / 8, {fleet["four"]: 3.0, fleet["two"]: 0.0}, "2026-01-01T00:00:00Z")
    snapshot = fleet_snapshot(conf, world[1], parts.host_manager)
    row = snapshot.table.index["h1"]
    loads = {r.uuid: r.load for r in snapshot.residents.values() if r.host == "h1"}
    assert loads == {fleet["four"]: 3.0, fleet["two"]: 0.0} and snapshot.load[row] == 4.0
    assert snapshot.estimated == ""
    # the next sample: "four" idle. Its figure is a moving average (half-life 300 s): one sample
    # of an instance does not make it idle
    usage_report(world, "h1", 1 / 8, {fleet["four"]: 0.0, fleet["two"]: 0.0}, "2026-01-01T00:01:00Z")
    averaged = fleet_snapshot(conf, world[1], parts.host_manager)
    four = averaged.residents[fleet["four"]].load
    assert 0.0 < four < 3.0
    with averaged.moved([]):
        assert averaged.load[row] == pytest.approx(four + 1.0)  # the background stays 1 core
    # moved away, "four" takes its figure along; h1 keeps its background
    averaged.move(fleet["four"], "h2")
    assert averaged.load[row] == pytest.approx(1.0)


def test_a_balance_plan_applied_shows_the_skew_it_reached_beside_the_one_it_predicted(
        conf, world, parts, fleet):
    database = world[1]
    busy = {fleet["four"]: 3.0, fleet["two"]: 3.0}  # h1 6 of 8 vCPUs busy, the others idle

    def measured(at):
        for host in RAM:
            on = [i["uuid"] for i in database.list_instances(host=host, states=["ACTIVE"])]
            usage = {uuid: busy.get(uuid, 0.0) for uuid in on}
            usage_report(world, host, sum(usage.values()) / 8, usage, at)

    measured("2026-01-01T00:00:00Z")
    plan = parts.rebalance.plan_rebalance(CTX, "balance", {"max_migrations": 1, "target_skew": 1.0})
    [step] = plan["steps"]
    assert step["source_host"] == "h1" and plan["summary"]["before"]["skew"] == pytest.approx(3.0)
    predicted = plan["summary"]["after"]["skew"]
    assert "reached" not in parts.rebalance.show_rebalance_plan(CTX, plan["id"])  # nothing applied yet
    migration = parts.rebalance.start_rebalance_step(CTX, plan["id"], 1)["migration"]
    moved(parts, migration)
    measured("2026-01-01T00:01:00Z")  # the agents measure each instance where it is now
    shown = parts.rebalance.show_rebalance_plan(CTX, plan["id"])
    assert shown["state"] == "done"
    assert shown["reached"]["summary"]["skew"] == pytest.approx(predicted, abs=0.05)
    assert dict(shown["reached"]["figures"])["skew"] == dict(
        (name, after) for name, _before, after in plan["summary"]["figures"])["skew"]


def test_a_host_whose_agent_measures_it_as_a_whole_shares_its_load_and_the_plan_says_so(
        conf, world, parts, fleet):
    manager, database, _ = world
    on = database.list_instances(host="h1", states=["ACTIVE"])
    manager.report_resources({}, "h1", report("h1", RAM["h1"], used=6144, uuids=[i["uuid"] for i in on],
                                              cpu_utilization=0.5, memory_mb_in_use=4096.0,
                                              utilization_sampled_at="2026-01-01T00:00:00Z"))
    snapshot = fleet_snapshot(conf, database, parts.host_manager)
    assert {r.load for r in snapshot.residents.values() if r.host == "h1"} == {2.0}
    assert snapshot.estimated == ("1 host(s) measured as a whole only (their agents report no per-instance "
                                  "use): their load shared among their instances by vCPUs")


def test_a_shutoff_instance_holds_its_room_in_a_plans_fleet_and_does_not_move(conf, world, parts, fleet):
    database = world[1]
    stopped = boot(world, "h3", 1024)
    database.update_instance(stopped, {"state": "SHUTOFF"})
    residents = fleet_snapshot(conf, database, parts.host_manager).residents
    assert residents[stopped].host == "h3" and not residents[stopped].movable
    assert residents[stopped].amounts == (2, 1024, 10)
