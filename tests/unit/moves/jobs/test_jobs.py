"""Drains and rebalance plans as jobs, the scheduler's side, over memory:// and SQLite (h1 8 GB,
h2 16 GB, h3 4 GB, the agents replaced by recorders): started by the RPC methods, carried on by
the runner from the rows alone, by one scheduler at a time, and taken over by another."""

import functools

import pytest

from scheduler import rpc
from scheduler.admin.grouping import known_host
from scheduler.admin.hosts import HostAdminEndpoint
from scheduler.db import models
from scheduler.exception import InvalidRequest
from scheduler.moves.jobs.api import JobEndpoint, JobNotFound
from scheduler.moves.jobs.runner import JobRunner
from scheduler.moves.planner import MoveRefused
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.moves.test_rebalance import BIGGER, boot, reported
from tests.unit.scheduler import manager_world

CTX = rpc.Context({})


@pytest.fixture
def jobs(conf, world, parts):
    database = world[1]
    host_admin = HostAdminEndpoint(conf, database, parts.host_manager,
                                   functools.partial(known_host, database, parts.host_manager))
    return JobEndpoint(database, host_admin, parts.rebalance)


def runner(world, parts, owner="s1:1", lease_s=15.0):
    database = world[1]
    return JobRunner(database, parts.moves, parts.rebalance,
                     lambda: UnitOfWork(database, parts.outbox, parts.undo), owner, lease_s)


def end_moves(world, parts, outcome="done", fault=None):
    """Each move under way ends as its destination would say: ``outcome``."""
    database = world[1]
    for migration in database.list_migrations(status="migrating"):
        if outcome == "done":
            manager_world.moved(parts, migration, CTX)
        else:
            parts.moves.move_update(CTX, migration["instance_uuid"], migration["dest_host"], migration["id"],
                                    outcome, fault)


def expire(database, **values):
    """Set the jobs' times (``deadline``, ``lease_expires_at``) as if that long had passed."""
    with database._transaction(write=True) as connection:
        connection.execute(models.jobs.update().values(values))


def statuses(job):
    return [s["status"] for s in job["steps"]]


# -- drains ---------------------------------------------------------------------------------


def test_a_drain_disables_the_host_and_the_runner_moves_everything_off_it_a_few_at_a_time(
        world, parts, jobs):
    database = world[1]
    moved = [boot(world, "h2", 1024) for _ in range(5)]
    job = jobs.start_drain(CTX, "h2", max_parallel=2)
    assert (job["kind"], job["state"], job["host"], job["started"]) == ("drain", "running", "h2", True)
    assert statuses(job) == ["pending"] * 5
    on_h2 = [i["uuid"] for i in database.list_instances(host="h2")]
    assert [s["instance_uuid"] for s in job["steps"]] == on_h2
    assert "h2" in parts.host_manager.disabled and parts.host_manager.disabled["h2"] == "draining"
    work = runner(world, parts)
    work.run_once()
    job = jobs.show_job(CTX, job["id"])
    assert statuses(job) == ["running", "running", "pending", "pending", "pending"]
    assert all(s["migration_id"] for s in job["steps"][:2])
    work.run_once()  # nothing ended: nothing more starts
    assert statuses(jobs.show_job(CTX, job["id"])) == statuses(job)
    while jobs.show_job(CTX, job["id"])["state"] != "done":
        end_moves(world, parts)
        work.run_once()
        assert sum(s == "running" for s in statuses(jobs.show_job(CTX, job["id"]))) <= 2
    job = jobs.show_job(CTX, job["id"])
    assert statuses(job) == ["done"] * 5 and job["finished_at"] is not None
    assert {database.get_instance(u)["host"] for u in moved} <= {"h1", "h3"}
    assert all(s["dest_host"] == database.get_instance(s["instance_uuid"])["host"] for s in job["steps"])
    assert database.list_instances(host="h2") == []
    assert database.get_job(job["id"])["active_key"] is None  # the host may be drained again


def test_a_drain_records_each_refusal_and_failure_with_the_reason_and_goes_on(world, parts, jobs):
    database = world[1]
    big = boot(world, "h2", 9000)  # fits nowhere else
    small = boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2", max_parallel=2)
    work = runner(world, parts)
    work.run_once()
    job = jobs.show_job(CTX, job["id"])
    by_uuid = {s["instance_uuid"]: s for s in job["steps"]}
    assert by_uuid[big]["status"] == "failed"
    assert by_uuid[big]["reason"].startswith(f"Instance {big} cannot be moved (migration): No valid host")
    assert by_uuid[small]["status"] == "running"
    end_moves(world, parts, "failed", {"reason": "disk full on the destination"})
    work.run_once()
    job = jobs.show_job(CTX, job["id"])
    assert (job["state"], statuses(job)) == ("done", ["failed", "failed"])
    assert {s["reason"] for s in job["steps"]} >= {"disk full on the destination"}
    assert database.get_instance(small)["host"] == "h2"


def test_draining_a_host_being_drained_answers_with_the_same_job(world, parts, jobs):
    boot(world, "h2", 1024)
    first = jobs.start_drain(CTX, "h2")
    again = jobs.start_drain(CTX, "h2", max_parallel=5)
    assert (again["id"], again["started"], again["max_parallel"]) == (first["id"], False, 2)
    assert len(world[1].list_jobs(kind="drain")) == 1


def test_a_drain_of_an_empty_host_is_done_at_once_and_one_of_an_unknown_host_refused(world, parts, jobs):
    job = jobs.start_drain(CTX, "h3")
    assert (job["state"], job["steps"]) == ("done", [])
    with pytest.raises(InvalidRequest):
        jobs.start_drain(CTX, "nosuch")
    assert [j["host"] for j in world[1].list_jobs()] == ["h3"]
    with pytest.raises(InvalidRequest, match="max_parallel must be a whole number from 1 to 100"):
        jobs.start_drain(CTX, "h2", max_parallel=0)


def test_a_stopped_drain_starts_nothing_more_and_ends_once_its_moves_have(world, parts, jobs):
    for _ in range(3):
        boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2", max_parallel=1)
    work = runner(world, parts)
    work.run_once()
    stopped = jobs.stop_job(CTX, job["id"])
    assert (stopped["state"], stopped["reason"]) == ("stopping", "stopped by berth host drain h2 --stop")
    work.run_once()
    assert statuses(jobs.show_job(CTX, job["id"])) == ["running", "pending", "pending"]
    end_moves(world, parts)
    work.run_once()
    job = jobs.show_job(CTX, job["id"])
    assert (job["state"], statuses(job)) == ("stopped", ["done", "pending", "pending"])
    with pytest.raises(MoveRefused, match=f"Job {job['id']} is stopped already: nothing to stop"):
        jobs.stop_job(CTX, job["id"])
    with pytest.raises(JobNotFound):
        jobs.show_job(CTX, 99)


def test_a_drain_past_its_timeout_stops_saying_so(world, parts, jobs):
    database = world[1]
    boot(world, "h2", 1024)
    boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2", max_parallel=1, timeout=60)
    expire(database, deadline=database.now())  # the timeout passed: moved back instead of waited for
    runner(world, parts).run_once()
    job = jobs.show_job(CTX, job["id"])
    assert (job["state"], job["reason"], statuses(job)) == ("stopped", "timed out after 60 s",
                                                           ["pending", "pending"])


# -- one scheduler at a time -------------------------------------------------------------------


def test_one_scheduler_at_a_time_carries_a_job_and_another_takes_it_over_when_the_lease_runs_out(
        world, parts, jobs):
    database = world[1]
    for _ in range(3):
        boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2", max_parallel=1)
    first, second = runner(world, parts, "s1:1"), runner(world, parts, "s2:2", lease_s=15.0)
    first.run_once()
    assert second.run_once() == 0  # held by s1
    assert database.get_job(job["id"])["lease_owner"] == "s1:1"
    end_moves(world, parts)
    expire(database, lease_expires_at=database.now())  # s1 died: its lease runs out
    assert second.run_once() > 0
    job = jobs.show_job(CTX, job["id"])
    assert job["lease_owner"] == "s2:2" and statuses(job) == ["done", "running", "pending"]
    assert first.run_once() == 0  # back, it finds the job held by s2


def test_a_runner_whose_claim_is_stale_writes_and_starts_nothing(world, parts, jobs):
    database = world[1]
    uuid = boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2")
    work = runner(world, parts)
    [claimed] = database.claim_jobs("s1:1", database.now(), 15, 10)
    jobs.stop_job(CTX, job["id"])  # written meanwhile: the version moved on
    assert work.carry_on(claimed) == 0
    assert statuses(jobs.show_job(CTX, job["id"])) == ["pending"]
    assert database.list_migrations(instance_uuid=uuid) == []


def test_a_step_whose_move_started_before_is_waited_for_not_moved_again(world, parts, jobs):
    database = world[1]
    uuid = boot(world, "h2", 1024)
    migration = parts.moves.migrate_instance(CTX, uuid)  # moving already when the drain starts
    job = jobs.start_drain(CTX, "h2")
    runner(world, parts).run_once()
    [step] = jobs.show_job(CTX, job["id"])["steps"]
    assert (step["status"], step["migration_id"]) == ("running", migration["id"])
    assert len(database.list_migrations(instance_uuid=uuid)) == 1


def test_releasing_gives_the_jobs_up_at_once(world, parts, jobs):
    boot(world, "h2", 1024)
    job = jobs.start_drain(CTX, "h2")
    first = runner(world, parts, "s1:1")
    first.run_once()
    assert first.release() == 1
    runner(world, parts, "s2:2").run_once()
    assert world[1].get_job(job["id"])["lease_owner"] == "s2:2"


# -- rebalance plans -------------------------------------------------------------------------------


@pytest.fixture
def three_steps(world):
    """h1 holds 2 + 2 + 3 GB: room for 7 GB there takes all three off."""
    for memory in (2048, 2048, 3072):
        boot(world, "h1", memory)
    boot(world, "h2", 11264)
    boot(world, "h3", 2048)
    reported(world)


def test_a_rebalance_job_applies_the_plan_and_writes_its_steps_and_state(world, parts, jobs, three_steps):
    database = world[1]
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    job = jobs.apply_rebalance_plan(CTX, plan["id"], max_parallel=2)
    assert (job["kind"], job["plan_id"], job["plan_state"]) == ("rebalance", plan["id"], "applying")
    work = runner(world, parts)
    work.run_once()
    assert statuses(jobs.show_job(CTX, job["id"])) == ["running", "running", "pending"]
    while database.get_job(job["id"])["state"] != "done":
        end_moves(world, parts)
        work.run_once()
    saved = database.get_rebalance_plan(plan["id"])  # written, not worked out when read
    assert (saved["state"], [s["status"] for s in saved["steps"]]) == ("done", ["done"] * 3)
    assert {database.get_instance(s["instance_uuid"])["host"] for s in saved["steps"]} == {"h2", "h3"}
    with pytest.raises(MoveRefused, match=f"Rebalance plan {plan['id']} is done: nothing to apply"):
        jobs.apply_rebalance_plan(CTX, plan["id"])


def test_a_failed_step_stops_the_plan_with_the_agents_reason(world, parts, jobs, three_steps):
    database = world[1]
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    job = jobs.apply_rebalance_plan(CTX, plan["id"], max_parallel=1)
    work = runner(world, parts)
    work.run_once()
    end_moves(world, parts, "failed", {"reason": "disk on fire"})
    work.run_once()
    saved = database.get_rebalance_plan(plan["id"])
    assert (saved["state"], saved["reason"]) == ("stopped", "step 1 failed: disk on fire")
    assert [s["status"] for s in saved["steps"]] == ["failed", "pending", "pending"]
    job = jobs.show_job(CTX, job["id"])
    assert (job["state"], job["reason"]) == ("stopped", "step 1 failed: disk on fire")


def test_a_refused_step_stops_the_plan_there_with_the_reason(world, parts, jobs, three_steps):
    database = world[1]
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    first = plan["steps"][0]
    boot(world, first["dest_host"], 512)  # placed on the planned destination meanwhile
    job = jobs.apply_rebalance_plan(CTX, plan["id"], max_parallel=2)
    runner(world, parts).run_once()
    saved = database.get_rebalance_plan(plan["id"])
    assert saved["state"] == "stopped"
    assert saved["reason"].startswith(f"step 1 refused: host {first['dest_host']} changed since the plan")
    assert [s["status"] for s in saved["steps"]] == ["failed", "pending", "pending"]
    assert database.list_migrations(status="migrating") == []  # nothing else started in its place
    assert jobs.show_job(CTX, job["id"])["reason"] == saved["reason"]


def test_berth_rebalance_stop_stops_the_job_and_the_plan_ends_stopped(world, parts, jobs, three_steps):
    database = world[1]
    plan = parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})
    job = jobs.apply_rebalance_plan(CTX, plan["id"], max_parallel=1)
    work = runner(world, parts)
    work.run_once()
    assert parts.rebalance.stop_rebalance_plan(CTX, plan["id"])["state"] == "stopping"
    assert database.get_job(job["id"])["state"] == "stopping"
    end_moves(world, parts)
    work.run_once()
    saved = database.get_rebalance_plan(plan["id"])
    assert (saved["state"], saved["reason"]) == ("stopped", "stopped by berth rebalance stop")
    assert [s["status"] for s in saved["steps"]] == ["done", "pending", "pending"]
    assert database.get_job(job["id"])["state"] == "stopped"
