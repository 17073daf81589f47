"""The jobs as a scheduler process carries them on: every ``[jobs] interval`` it claims the
jobs whose lease it holds or may take (scheduler.db.jobs), reads each one's rows, asks
:func:`scheduler.moves.jobs.policy.next_actions` what to do, and does it.

Every action is a transaction of its own (the scheduler's UnitOfWork: the casts of a move
go out once it commits) that begins with a compare-and-set on the job's version, the one
the claim returned: a scheduler whose lease was taken over, or that lost a race with an
operator's stop, writes nothing and starts nothing, and asks again at its next period. A
step starts through the path ``berth server migrate`` takes (MoveEndpoint.migrate_instance) or
``start_rebalance_step`` with its checks, and is marked running with its migration in the
same transaction: a scheduler killed at any point leaves either both or neither, and the
next one to hold the lease goes on from the rows.

Why in the schedulers: they hold the database, the host table and the claims a move needs;
leases let any number of them share the jobs, and a job outlives the command that started
it, the scheduler carrying it on (SIGKILL: another takes it over once the lease runs out;
SIGTERM: at once, its leases given up) and the broker (the rows are in the database).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

from scheduler import rpc, states
from scheduler.db import jobs as rows
from scheduler.db import rebalance_plans as plan_rows
from scheduler.db.engine import DatabaseUnavailable, to_db_time
from scheduler.exception import InstanceNotFound, InvalidRequest, NoValidHost
from scheduler.moves.jobs import policy
from scheduler.moves.planner import MoveRefused
from scheduler.utils.leased_loop import LeasedLoop

LOG = logging.getLogger(__name__)

#: The most jobs one scheduler claims at a time.
MAX_JOBS = 100
#: Looks at one job in one period: again after a step start that failed.
MAX_ROUNDS = 4


class _Lost(Exception):
    """The job's version moved on: another scheduler or an operator's stop wrote it first."""


def describe(job: dict[str, Any]) -> str:
    if job["kind"] == rows.DRAIN:
        return f"Drain job {job['id']} of host {job['host']}"
    return f"Rebalance job {job['id']} of plan {job['plan_id']}"


class _Drain:
    """A drain's steps: the job_steps rows, each started with migrate_instance."""

    stop_on_failure = False

    def __init__(self, runner: JobRunner, job: dict[str, Any]) -> None:
        self.runner, self.job = runner, job
        self.db = runner.db

    def read(self) -> tuple[list[dict[str, Any]], str | None]:
        found = self.db.get_job(self.job["id"])
        return ([] if found is None else found["steps"]), None

    def end_step(self, step: dict[str, Any], action: policy.EndStep) -> None:
        self._set(step["position"], rows.STEP_RUNNING,
                  {"status": action.status, "dest_host": action.dest_host, "reason": action.reason})
        what = (f"moved {step['instance_uuid']} to {action.dest_host}" if action.status == rows.STEP_DONE
                else f"failed to move {step['instance_uuid']}: {action.reason}")
        LOG.info("%s: %s", describe(self.job), what)

    def start_step(self, work: Any, ctxt: Any, step: dict[str, Any]) -> bool | None:
        uuid, host, position = step["instance_uuid"], self.job["host"], step["position"]
        instance = self.db.get_instance(uuid)
        elsewhere = instance is not None and instance["host"] not in (None, host)
        if elsewhere and instance["state"] == states.ACTIVE:
            # it left the host meanwhile (another command moved it): nothing to move
            self._set(position, rows.PENDING, {"status": rows.STEP_DONE, "dest_host": instance["host"]})
            LOG.info("%s: %s is on %s already", describe(self.job), uuid, instance["host"])
            return True
        migration = None
        if instance is not None and instance["state"] == states.MIGRATING and instance["host"] == host:
            migration = self.db.active_migration(uuid)  # moving already: waited for, not moved again
            if migration is not None and migration["source_host"] != host:
                migration = None
        if migration is None:
            try:
                with work.step("migrate_instance"):
                    migration = self.runner.moves.migrate_instance(ctxt, uuid, live=bool(self.job["live"]))
            except (MoveRefused, NoValidHost, InstanceNotFound, InvalidRequest) as exc:
                self._set(position, rows.PENDING, {"status": rows.FAILED, "reason": str(exc)})
                LOG.info("%s: failed to move %s: %s", describe(self.job), uuid, exc)
                return False
        self._set(position, rows.PENDING, {"status": rows.STEP_RUNNING, "migration_id": migration["id"],
                                           "dest_host": migration.get("dest_host")})
        LOG.info("%s: moving %s to %s (migration %s)", describe(self.job), uuid, migration.get("dest_host"),
                 migration["id"])
        return True

    def stop(self, reason: str) -> None:
        pass

    def finish(self, state: str, reason: str | None) -> None:
        pass

    def _set(self, position: int, expected: str, values: dict[str, Any]) -> None:
        if not self.db.set_job_step(self.job["id"], position, expected, values):
            raise _Lost()


class _Rebalance:
    """A rebalance job's steps: its plan's, each started with start_rebalance_step and its
    checks; the plan's state is written with the job's."""

    stop_on_failure = True

    def __init__(self, runner: JobRunner, job: dict[str, Any]) -> None:
        self.runner, self.job = runner, job
        self.db = runner.db
        self.plan_id = job["plan_id"]

    def read(self) -> tuple[list[dict[str, Any]], str | None]:
        plan = self.db.get_rebalance_plan(self.plan_id)
        if plan is None:
            return [], f"rebalance plan {self.plan_id} is gone"
        steps = [dict(s, reason=s.get("failure")) for s in plan["steps"]]
        stopped = plan["state"] in (plan_rows.STOPPING, plan_rows.STOPPED)
        return steps, (plan.get("reason") or "stopped by berth rebalance stop") if stopped else None

    def end_step(self, step: dict[str, Any], action: policy.EndStep) -> None:
        values: dict[str, Any] = {"status": action.status}
        if action.status == rows.FAILED:
            values["failure"] = action.reason
        if not self.db.set_rebalance_step(self.plan_id, step["position"], plan_rows.RUNNING, values):
            raise _Lost()
        LOG.info("%s: step %s %s", describe(self.job), step["position"],
                 f"moved {step['instance_uuid']} to {step['dest_host']}" if action.status == rows.STEP_DONE
                 else f"failed: {action.reason}")

    def start_step(self, work: Any, ctxt: Any, step: dict[str, Any]) -> bool | None:
        try:
            with work.step("start_rebalance_step"):
                answer = self.runner.rebalance.start_rebalance_step(ctxt, self.plan_id, step["position"])
        except MoveRefused as exc:  # the plan stopped, or the step started, meanwhile: read it again
            LOG.info("%s: step %s not started: %s", describe(self.job), step["position"], exc)
            return None
        if "refused" in answer:  # the step's failure and the plan's stop are written
            LOG.info("%s: step %s refused: %s", describe(self.job), step["position"], answer["refused"])
            return False
        LOG.info("%s: step %s moving %s from %s to %s (migration %s)", describe(self.job), step["position"],
                 step["instance_uuid"], step["source_host"], step["dest_host"], answer["migration"]["id"])
        return True

    def stop(self, reason: str) -> None:
        self.db.set_rebalance_plan_state(self.plan_id, plan_rows.STOPPING,
                                         (plan_rows.PLANNED, plan_rows.APPLYING), reason)

    def finish(self, state: str, reason: str | None) -> None:
        applying = (plan_rows.PLANNED, plan_rows.APPLYING)
        if state == rows.DONE:
            self.db.set_rebalance_plan_state(self.plan_id, plan_rows.DONE, applying)
        else:
            self.db.set_rebalance_plan_state(self.plan_id, plan_rows.STOPPED, (*applying, plan_rows.STOPPING),
                                             reason)


KINDS: dict[str, Callable[[JobRunner, dict[str, Any]], _Drain | _Rebalance]] = {
    rows.DRAIN: _Drain, rows.REBALANCE: _Rebalance}


def lease_owner(conf: Any) -> str:
    """``<host>:<pid>``: two schedulers on one host, or one restarted, never take each other's
    leases for their own (the scaling controller's leases are named so too)."""
    return f"{conf.host}:{os.getpid()}"


class JobRunner:
    """Carries on the jobs ``owner`` may hold; see the module's docstring. ``moves``: the
    MoveEndpoint; ``rebalance``: the RebalanceEndpoint; ``unit_of_work()``: the scheduler's
    UnitOfWork, one transaction whose casts go out once it commits."""

    def __init__(self, database: Any, moves: Any, rebalance: Any, unit_of_work: Callable[[], Any], owner: str,
                 lease_s: float) -> None:
        self.db = database
        self.moves = moves
        self.rebalance = rebalance
        self._unit_of_work = unit_of_work
        self.owner = owner
        self.lease_s = lease_s

    def run_once(self) -> int:
        """Claim this owner's jobs and carry each on; how many actions were taken. One job's
        trouble is logged and leaves the others be."""
        acted = 0
        for job in self.db.claim_jobs(self.owner, self.db.now(), self.lease_s, MAX_JOBS):
            try:
                acted += self.carry_on(job)
            except DatabaseUnavailable:
                raise
            except Exception:
                LOG.exception("%s: failed; trying again at the next look", describe(job))
        return acted

    def release(self) -> int:
        """Give up this owner's leases (when the process stops): how many."""
        return int(self.db.release_jobs(self.owner))

    def carry_on(self, job: dict[str, Any]) -> int:
        """Act on ``job`` as claimed (its version is the one to write with); how many actions."""
        kind = KINDS[job["kind"]](self, job)
        version, acted = job["version"], 0
        view = policy.JobView(state=job["state"], max_parallel=job["max_parallel"],
                              stop_on_failure=kind.stop_on_failure,
                              deadline=to_db_time(job["deadline"]) if job.get("deadline") else None,
                              timeout=job.get("timeout"))
        for _ in range(MAX_ROUNDS):
            steps, stop_asked = kind.read()
            by_position = {s["position"]: s for s in steps}
            running = [s["migration_id"] for s in steps
                       if s["status"] == rows.STEP_RUNNING and s["migration_id"] is not None]
            moves = {i: policy.MoveView(m["status"], m.get("dest_host"), m.get("reason"))
                     for i, m in self.db.migrations_by_id(running).items()}
            views = [policy.StepView(s["position"], s["status"], s.get("migration_id"), s.get("reason"))
                     for s in steps]
            actions = policy.next_actions(_with(view, stop_asked=stop_asked), views, moves, self.db.now())
            if not actions:
                break
            again = False
            for action in actions:
                try:
                    version, outcome = self._act(kind, version, action, by_position)
                except _Lost:
                    LOG.debug("%s: written by another meanwhile; read again at the next look", describe(job))
                    return acted
                acted += 1
                if isinstance(action, policy.Stop):
                    view = _with(view, state=rows.STOPPING)
                elif isinstance(action, policy.Finish):
                    view = _with(view, state=action.state)
                if outcome is not True and isinstance(action, policy.StartStep):
                    again = True  # refused, or changed meanwhile: decide again before starting more
                    break
            if not again or view.state in rows.ENDED:
                break
        return acted

    def _act(self, kind: _Drain | _Rebalance, version: int, action: policy.Action,
             steps: dict[int, dict[str, Any]]) -> tuple[int, bool | None]:
        """Carry out one action in a transaction of its own, after the compare-and-set on the
        job's version: (the new version, what a step start came to)."""
        job = kind.job
        values: dict[str, Any] = {}
        if isinstance(action, policy.Stop):
            values = {"state": rows.STOPPING, "reason": action.reason}
        elif isinstance(action, policy.Finish):
            values = {"state": action.state, **({"reason": action.reason} if action.reason else {})}
        ctxt = {"request_id": rpc.new_request_id()}
        outcome: bool | None = True
        with rpc.handling(ctxt):
            try:
                with self._unit_of_work() as work:
                    new = self.db.set_job(job["id"], version, values)
                    if new is None:
                        raise _Lost()
                    if isinstance(action, policy.EndStep):
                        kind.end_step(steps[action.position], action)
                    elif isinstance(action, policy.StartStep):
                        outcome = kind.start_step(work, ctxt, steps[action.position])
                    elif isinstance(action, policy.Stop):
                        kind.stop(action.reason)
                        LOG.info("%s stopping: %s", describe(job), action.reason)
                    else:
                        kind.finish(action.state, action.reason)
                        LOG.info("%s %s%s", describe(job), action.state,
                                 f" ({action.reason})" if action.reason else "")
            except rpc.RetryLater as exc:  # the commit met the database away, or lost a race
                raise DatabaseUnavailable(str(exc)) from exc
            except rpc.MessageDeliveryFailure as exc:
                LOG.warning("%s: a move started, but its destination could not be told now (%s); it is "
                            "told again once the agents' reports show it did not hear", describe(job), exc)
        return new, outcome


def _with(view: policy.JobView, **changes: Any) -> policy.JobView:
    return dataclasses.replace(view, **changes)


class JobLoop:
    """``runner.run_once`` every ``interval_s`` in a thread of its own (a LeasedLoop, as the
    scaling controller's); on stop, the leases given up so that another scheduler takes the jobs
    over at its next look."""

    def __init__(self, runner: JobRunner, interval_s: float) -> None:
        self.runner = runner
        self.interval_s = interval_s
        self._loop = LeasedLoop(self.look, runner.release, interval_s, "jobs", "job(s)", runner.lease_s)
        self._away_said = False

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def look(self) -> None:
        """One look at the jobs; a failure is logged (the database away: once until it is back)."""
        try:
            self.runner.run_once()
        except DatabaseUnavailable as exc:
            if not self._away_said:
                LOG.warning("Jobs: %s; trying again every %g s", exc, self.interval_s)
            self._away_said = True
            return
        except Exception:
            LOG.exception("Jobs: a look failed; trying again in %g s", self.interval_s)
            return
        self._away_said = False
