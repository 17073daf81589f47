"""The RPC methods of rebalance plans (admin API 1.2): make and save a plan, list and show them,
start one step, stop a plan.

``berth rebalance apply`` starts a job (scheduler.moves.jobs) that the schedulers carry on, starting
each step with start_rebalance_step as a ``berth`` of the release before jobs did from the
command, and writing the steps' and the plan's states as the moves end (a plan whose steps such a
``berth`` started is shown as their migrations say). Each step is checked here, where the host
table and the claims are, at the moment it starts:
the instance must still be ACTIVE where the plan saw it, both hosts' generations must be those
the plan recorded (plus the claims of the plan's own steps), and the destination must still
pass the filters (the path of ``berth server migrate --live --host``). A step that fails a check is
refused with the reason, and the plan stops there: nothing else is moved in its place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from berth_contract.request_spec import Flavor
from scheduler import api_versions, rpc, states
from scheduler.db import moves as migration_rows
from scheduler.db import rebalance_plans as rows
from scheduler.exception import BerthError, InstanceNotFound, InvalidRequest, NoValidHost
from scheduler.moves.fleet_snapshot import fleet_snapshot
from scheduler.moves.goals import OptionError, check, goals
from scheduler.moves.goals import goal as goal_of
from scheduler.moves.jobs import api as jobs
from scheduler.moves.planner import MoveRefused
from scheduler.moves.rebalance import RebalancePlan, figures
from scheduler.moves.rebalance.judge import Judge

LOG = logging.getLogger(__name__)


class PlanNotFound(BerthError):
    invalid_input = True


class NoRebalancePlan(BerthError):
    """The goal cannot be reached: the planner's reason."""

    invalid_input = True


def _options(goal: Any, options: Any) -> dict[str, Any]:
    """The goal's options checked against its schema (rebalance_goals.check): InvalidRequest naming
    what is wrong."""
    if goal_of(goal) is None:
        raise InvalidRequest(f"plan_rebalance: goal must be one of {', '.join(sorted(goals()))}, "
                             f"got {str(goal)[:60]!r}")
    if not isinstance(options, dict):
        raise InvalidRequest("plan_rebalance: options must be an object")
    try:
        return check(goal, options)
    except OptionError as exc:
        raise InvalidRequest(f"plan_rebalance: {exc}") from None


def _plan_id(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{where}: plan_id must be a positive whole number, got {str(value)[:60]!r}")
    return value


class RebalanceEndpoint:
    RPC_API = api_versions.ADMIN

    def __init__(self, conf: Any, database: Any, hosts: Any, selector: Any, moves: Any) -> None:
        self._conf = conf
        self._db = database
        self._hosts = hosts  # HostManager
        self._selector = selector  # its filters decide every destination
        self._moves = moves  # MoveEndpoint: a step is its migrate_instance(live, host)

    # -- making a plan ------------------------------------------------------------

    @rpc.callers(rpc.OPERATOR)
    def plan_rebalance(self, context, goal, options):
        """Plan ``goal`` (an installed rebalance goal) with ``options`` on the fleet as it is now and
        save the plan; the plan with its steps. A goal that cannot be reached is refused with the
        planner's reason, and nothing is saved."""
        checked = _options(goal, options)
        snapshot = fleet_snapshot(self._conf, self._db, self._hosts)
        filters = list(self._selector.filters)
        result = goals()[goal]().plan(snapshot, {**checked, "filters": filters})
        if not isinstance(result, RebalancePlan):
            raise NoRebalancePlan(f"No rebalance plan ({goal}): {result.reason}")
        if result.before is None or result.after is None:
            result.before, result.after = figures.before_after(snapshot, Judge(filters), result.moves)
        before, after = result.before, result.after
        involved = sorted({h for m in result.moves for h in (m.source, m.destination)})
        generations = self._db.host_generations(involved) if involved else {}
        steps = [{"instance_uuid": m.instance, "source_host": m.source, "dest_host": m.destination,
                  "source_generation": generations.get(m.source, 0),
                  "dest_generation": generations.get(m.destination, 0),
                  "memory_mb": float(m.memory_mb), "reason": m.reason} for m in result.moves]
        summary = {"method": result.method, "optimal": result.optimal, "note": result.note,
                   "left": dict(result.left), "placements": list(result.placements),
                   "before": before.summary(),
                   "after": after.summary(),
                   "figures": [[name, value, shown_after] for (name, value), (_, shown_after)
                               in zip(figures.shown(before), figures.shown(after), strict=True)]}
        plan = self._db.create_rebalance_plan(goal, checked, summary, steps)
        LOG.info("Rebalance plan %s (%s): %d migration(s), %s", plan["id"], goal, len(steps), result.method)
        return self._shown(plan)

    # -- reading ------------------------------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_rebalance_plans(self, context):
        """Plans newest first, each in the state show_rebalance_plan gives it."""
        plans = self._db.list_rebalance_plans()
        for plan in plans:
            if plan["state"] in (rows.APPLYING, rows.STOPPING) or not plan["step_count"]:  # as its steps say
                shown = self._shown(self._get(plan["id"]))
                plan.update(state=shown["state"], reason=shown.get("reason"))
        return plans

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_rebalance_plan(self, context, plan_id):
        """The plan, each step's status as its migration says (pending, running, done, failed
        with the reason), and the plan's state; once a step has started, ``reached``: the figures
        of the fleet as it is now, measured as the plan predicted its own (``summary["figures"]``)."""
        plan = self._shown(self._get(_plan_id(plan_id, "show_rebalance_plan")))
        if any(step["status"] != rows.PENDING for step in plan["steps"]):
            snapshot = fleet_snapshot(self._conf, self._db, self._hosts)
            asked = [Flavor.from_wire(plan["options"]["flavor"])] if "flavor" in plan["options"] else []
            now = figures.measure(snapshot, Judge(list(self._selector.filters)),
                                  [*figures.flavors_in_use(snapshot), *asked])
            plan["reached"] = {"summary": now.summary(),
                               "figures": [[name, value] for name, value in figures.shown(now)]}
        return plan

    def _get(self, plan_id: int) -> dict[str, Any]:
        plan = self._db.get_rebalance_plan(plan_id)
        if plan is None:
            raise PlanNotFound(f"No rebalance plan {plan_id} (berth rebalance list)")
        return plan

    def _shown(self, plan: dict[str, Any]) -> dict[str, Any]:
        names = self._db.get_instances([s["instance_uuid"] for s in plan["steps"]]) if plan["steps"] else {}
        for step in plan["steps"]:
            step["display_name"] = (names.get(step["instance_uuid"]) or {}).get("display_name")
            if step["status"] == rows.RUNNING and step["migration_id"] is not None:
                migration = self._db.get_migration(step["migration_id"]) or {}
                status = migration.get("status")
                if status in (migration_rows.COMPLETED, migration_rows.CONFIRMED):
                    step["status"] = rows.STEP_DONE
                elif status in (migration_rows.ERROR, migration_rows.REVERTED):
                    step["status"] = rows.FAILED
                    step["failure"] = migration.get("reason") or f"migration {step['migration_id']} {status}"
        statuses = {s["status"] for s in plan["steps"]}
        if not plan["steps"]:  # it fits already: nothing to apply
            plan["state"] = rows.DONE
        elif plan["state"] in (rows.APPLYING, rows.STOPPING) and rows.RUNNING not in statuses:
            if statuses <= {rows.STEP_DONE}:
                plan["state"] = rows.DONE
            elif plan["state"] == rows.STOPPING or rows.FAILED in statuses:
                plan["state"] = rows.STOPPED
        if rows.FAILED in statuses and not plan.get("reason"):
            failed = next(s for s in plan["steps"] if s["status"] == rows.FAILED)
            plan["reason"] = f"step {failed['position']} failed: {failed['failure']}"
        return plan

    # -- applying -----------------------------------------------------------------

    @rpc.callers(rpc.OPERATOR)
    def start_rebalance_step(self, context, plan_id, position):
        """Start step ``position`` of the plan (a live migration to its planned host), after its
        checks: {position, migration} once started; {position, refused: why} when it fails them,
        and the plan stops (answered, not raised: the step's failure and the stop are saved with
        the message's transaction, which a raise would roll back)."""
        plan = self._shown(self._get(_plan_id(plan_id, "start_rebalance_step")))
        steps = {s["position"]: s for s in plan["steps"]}
        step = steps.get(position) if isinstance(position, int) and not isinstance(position, bool) else None
        if step is None:
            raise InvalidRequest(f"start_rebalance_step: plan {plan['id']} has no step {str(position)[:20]}")
        if plan["state"] not in (rows.PLANNED, rows.APPLYING) or plan.get("reason"):
            raise MoveRefused(f"Rebalance plan {plan['id']} is {plan['state']}"
                              + (f" ({plan['reason']})" if plan.get("reason") else "") + ": no step starts")
        if step["status"] != rows.PENDING:
            raise MoveRefused(f"Step {position} of rebalance plan {plan['id']} is {step['status']} already")
        self._db.set_rebalance_plan_state(plan["id"], rows.APPLYING, (rows.PLANNED,))
        why = self._changed(plan, step)
        if why is None:
            try:
                migration = self._moves.migrate_instance(context, step["instance_uuid"],
                                                         host=step["dest_host"], live=True)
            except (MoveRefused, NoValidHost, InstanceNotFound, InvalidRequest) as exc:  # nothing changed
                why = str(exc)
            else:
                self._db.set_rebalance_step(plan["id"], position, rows.PENDING,
                                            {"status": rows.RUNNING, "migration_id": migration["id"]})
                return {"position": position, "migration": migration}
        reason = f"step {position} refused: {why}"
        if not self._db.set_rebalance_step(plan["id"], position, rows.PENDING,
                                           {"status": rows.FAILED, "failure": why}):
            # another apply of the same plan started it meanwhile (hence, perhaps, this refusal)
            raise MoveRefused(f"Step {position} of rebalance plan {plan['id']} was started meanwhile "
                              "by another apply of the plan")
        self._stop(plan["id"], reason)
        LOG.warning("Rebalance plan %s stopped: %s", plan["id"], reason)
        return {"position": position, "refused": why}

    def _changed(self, plan: Mapping[str, Any], step: Mapping[str, Any]) -> str | None:
        """Why the fleet no longer is as the plan saw it for ``step``, or None."""
        uuid, source, dest = step["instance_uuid"], step["source_host"], step["dest_host"]
        instance = self._db.get_instance(uuid)
        if instance is None or instance["state"] != states.ACTIVE or instance["host"] != source:
            where = "gone" if instance is None else f"{instance['state']} on {instance['host'] or 'no host'}"
            return f"instance {uuid} is no longer ACTIVE on {source} as the plan saw it: it is {where}"
        now = self._db.host_generations([source, dest])
        started = [s for s in plan["steps"] if s["migration_id"] is not None]
        for host, seen in ((source, step["source_generation"]), (dest, step["dest_generation"])):
            # each step of this plan started since claimed its destination once
            own = sum(1 for s in started if s["dest_host"] == host)
            if now.get(host, 0) != seen + own:
                return (f"host {host} changed since the plan was made: its generation is {now.get(host, 0)}, "
                        f"the plan expected {seen + own} (something was placed on it or moved to it); "
                        "make a new plan")
        return None

    @rpc.callers(rpc.OPERATOR)
    def stop_rebalance_plan(self, context, plan_id):
        """Start no more steps of the plan; those running end on their own. The plan."""
        plan = self._shown(self._get(_plan_id(plan_id, "stop_rebalance_plan")))
        if plan["state"] in (rows.DONE, rows.STOPPED):
            raise MoveRefused(f"Rebalance plan {plan['id']} is {plan['state']} already: nothing to stop")
        self._stop(plan["id"], "stopped by berth rebalance stop")
        jobs.stop_plan(self._db, plan["id"], "stopped by berth rebalance stop")  # and the job applying it
        return self._shown(self._get(plan["id"]))

    def _stop(self, plan_id: int, reason: str) -> None:
        self._db.set_rebalance_plan_state(plan_id, rows.STOPPING, (rows.PLANNED, rows.APPLYING), reason)

