"""The RPC methods of jobs (admin API 1.3): start a drain, apply a rebalance plan, show,
list and stop jobs.

Starting only writes rows: the job is carried on by the schedulers (scheduler.moves.jobs.runner),
whatever becomes of the command that started it, which watches it with show_job. A host
drained or a plan applied by a job that has not ended is not taken by a second one: asking
again answers with the job under way (``started`` false), so that a command run again, or
a call delivered twice, watches the same job.
"""

from __future__ import annotations

import logging
from typing import Any

from berth_contract import host_names
from scheduler import api_versions, rpc, states
from scheduler.db import jobs as rows
from scheduler.db import rebalance_plans as plan_rows
from scheduler.exception import BerthError, InvalidRequest
from scheduler.moves.jobs.runner import describe
from scheduler.moves.planner import MoveRefused

LOG = logging.getLogger(__name__)

#: The states of the instances a drain moves: ACTIVE ones, and those moving already.
MOVED_STATES = (states.ACTIVE, *states.MOVING)
#: The most moves a job may have under way at once.
MAX_PARALLEL = 100
#: The longest timeout a drain may be given, in seconds (a week).
MAX_TIMEOUT = 7 * 24 * 3600


class JobNotFound(BerthError):
    invalid_input = True


def _whole(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(f"{where} must be a whole number from {low} to {high}, got {str(value)[:60]!r}")
    return value


def stop_reason(job: dict[str, Any]) -> str:
    """Why an operator's stop stopped ``job``: the command that stops it."""
    if job["kind"] == rows.DRAIN:
        return f"stopped by berth host drain {job['host']} --stop"
    return "stopped by berth rebalance stop"


class JobEndpoint:
    RPC_API = api_versions.ADMIN

    def __init__(self, database: Any, host_admin: Any, rebalance: Any) -> None:
        self._db = database
        self._host_admin = host_admin  # HostAdminEndpoint: a drain disables its host as host_disable does
        self._rebalance = rebalance  # RebalanceEndpoint: the plans, as show_rebalance_plan shows them

    # -- starting -----------------------------------------------------------------

    @rpc.callers(rpc.OPERATOR)
    def start_drain(self, context, host, live=False, max_parallel=2, timeout=None):
        """Disable ``host`` (reason ``draining``) and start a job that moves each of its
        instances ACTIVE or moving elsewhere, ``live`` if asked, at most ``max_parallel`` under
        way, starting none after ``timeout`` seconds. The job, ``started`` true; the drain of the
        host under way already, ``started`` false."""
        host_names.check(host, "start_drain: host")
        if not isinstance(live, bool):
            raise InvalidRequest(f"start_drain: live must be true or false, got {str(live)[:20]!r}")
        _whole(max_parallel, "start_drain: max_parallel", 1, MAX_PARALLEL)
        if timeout is not None:
            _whole(timeout, "start_drain: timeout", 1, MAX_TIMEOUT)
        under_way = self._active(rows.DRAIN, host=host)
        if under_way is not None:
            return under_way
        found = self._host_admin.host_disable(context, host, reason="draining")
        host = found.get("host", host)
        uuids = [i["uuid"] for i in self._db.list_instances(host=host, states=list(MOVED_STATES))]
        job = self._db.create_job(rows.DRAIN, max_parallel, host=host, live=live, timeout=timeout,
                                  instance_uuids=uuids)
        if job is None:  # another call started one meanwhile
            return self._active(rows.DRAIN, host=host) or {}
        if not uuids:
            self._db.set_job(job["id"], job["version"], {"state": rows.DONE})
        LOG.info("Drain job %s of host %s started: %d instance(s) to move, at most %d at a time%s", job["id"],
                 host, len(uuids), max_parallel, f", for at most {timeout} s" if timeout else "")
        return dict(self._shown(job["id"]), started=True)

    @rpc.callers(rpc.OPERATOR)
    def apply_rebalance_plan(self, context, plan_id, max_parallel=2):
        """Start a job that applies the plan's pending steps, at most ``max_parallel`` under way,
        each checked as start_rebalance_step checks it; the plan stops at the first that fails.
        The job, ``started`` true; the job applying it already, ``started`` false. A plan that
        ended (or is stopping) is refused."""
        _whole(max_parallel, "apply_rebalance_plan: max_parallel", 1, MAX_PARALLEL)
        plan = self._rebalance.show_rebalance_plan(context, plan_id)
        under_way = self._active(rows.REBALANCE, plan_id=plan["id"])
        if under_way is not None:
            return under_way
        if plan["state"] not in (plan_rows.PLANNED, plan_rows.APPLYING) or plan.get("reason"):
            raise MoveRefused(f"Rebalance plan {plan['id']} is {plan['state']}"
                              + (f" ({plan['reason']})" if plan.get("reason") else "") + ": nothing to apply")
        job = self._db.create_job(rows.REBALANCE, max_parallel, plan_id=plan["id"], live=True)
        if job is None:
            return self._active(rows.REBALANCE, plan_id=plan["id"]) or {}
        self._db.set_rebalance_plan_state(plan["id"], plan_rows.APPLYING, (plan_rows.PLANNED,))
        LOG.info("Rebalance job %s of plan %s started: %d step(s) to start, at most %d at a time", job["id"],
                 plan["id"], sum(s["status"] == plan_rows.PENDING for s in plan["steps"]), max_parallel)
        return dict(self._shown(job["id"]), started=True)

    # -- reading ------------------------------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.OPERATOR)
    def show_job(self, context, job_id):
        """The job and each step: its instance, status (pending, running, done, failed), its
        migration, the host it went to, why it failed."""
        _whole(job_id, "show_job: job_id", 1, 2**31 - 1)
        return self._shown(job_id)

    @rpc.read_only
    @rpc.callers(rpc.OPERATOR)
    def list_jobs(self, context, kind=None, host=None, plan_id=None, active=False):
        """Jobs newest first (at most 100), without their steps: of ``kind`` (drain, rebalance),
        draining ``host``, applying ``plan_id``, only those not ended if ``active``."""
        if kind is not None and kind not in rows.KINDS:
            raise InvalidRequest(f"list_jobs: kind must be one of {', '.join(rows.KINDS)}, got "
                                 f"{str(kind)[:30]!r}")
        if host is not None:
            host_names.check(host, "list_jobs: host")
        if plan_id is not None:
            _whole(plan_id, "list_jobs: plan_id", 1, 2**31 - 1)
        if not isinstance(active, bool):
            raise InvalidRequest("list_jobs: active must be true or false")
        found = self._db.list_jobs(kind=kind, host=host, plan_id=plan_id, active=active)
        return [_public(job) for job in found]

    # -- stopping -----------------------------------------------------------------

    @rpc.callers(rpc.OPERATOR)
    def stop_job(self, context, job_id):
        """Start no new step of the job; those under way end on their own, and the job ends
        stopped once they have. A rebalance job's plan stops with it. The job."""
        _whole(job_id, "stop_job: job_id", 1, 2**31 - 1)
        job = self._get(job_id)
        if job["state"] in rows.ENDED:
            raise MoveRefused(f"Job {job_id} is {job['state']} already: nothing to stop")
        stop(self._db, job, stop_reason(job))
        return self._shown(job_id)

    # -- the jobs as shown ----------------------------------------------------------

    def _active(self, kind: str, host: str | None = None,
                plan_id: int | None = None) -> dict[str, Any] | None:
        found = self._db.list_jobs(kind=kind, host=host, plan_id=plan_id, active=True, limit=1)
        return dict(self._shown(found[0]["id"]), started=False) if found else None

    def _get(self, job_id: int) -> dict[str, Any]:
        job = self._db.get_job(job_id)
        if job is None:
            raise JobNotFound(f"No job {job_id}")
        return job

    def _shown(self, job_id: int) -> dict[str, Any]:
        job = self._get(job_id)
        if job["kind"] == rows.REBALANCE:
            plan = self._db.get_rebalance_plan(job["plan_id"]) or {"steps": []}
            names = self._db.get_instances([s["instance_uuid"] for s in plan["steps"]])
            steps = [{"position": s["position"], "instance_uuid": s["instance_uuid"],
                      "display_name": (names.get(s["instance_uuid"]) or {}).get("display_name"),
                      "source_host": s["source_host"], "dest_host": s["dest_host"], "status": s["status"],
                      "migration_id": s["migration_id"], "reason": s.get("failure")} for s in plan["steps"]]
            job["plan_state"], job["plan_reason"] = plan.get("state"), plan.get("reason")
        else:
            names = self._db.get_instances([s["instance_uuid"] for s in job["steps"]])
            steps = [{"position": s["position"], "instance_uuid": s["instance_uuid"],
                      "display_name": (names.get(s["instance_uuid"]) or {}).get("display_name"),
                      "source_host": job["host"], "dest_host": s["dest_host"], "status": s["status"],
                      "migration_id": s["migration_id"], "reason": s["reason"]} for s in job["steps"]]
        return {**_public(job), "steps": steps}


def stop(database: Any, job: dict[str, Any], reason: str) -> None:
    """Stop ``job`` with ``reason``: no new step starts; a rebalance job's plan stops too."""
    if database.stop_job(job["id"], reason):
        LOG.info("%s stopping: %s", describe(job), reason)
    if job["kind"] == rows.REBALANCE:
        database.set_rebalance_plan_state(job["plan_id"], plan_rows.STOPPING,
                                          (plan_rows.PLANNED, plan_rows.APPLYING), reason)


def stop_plan(database: Any, plan_id: int, reason: str) -> None:
    """Stop the job applying plan ``plan_id``, if one is (berth rebalance stop)."""
    for job in database.list_jobs(kind=rows.REBALANCE, plan_id=plan_id, active=True):
        stop(database, job, reason)


def _public(job: dict[str, Any]) -> dict[str, Any]:
    """The job as the API gives it: its rows' columns but the version and the key it holds."""
    return {key: value for key, value in job.items() if key not in ("version", "active_key", "steps")}
