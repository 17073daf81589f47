"""The rebalance_plans and rebalance_steps tables: plans of migrations saved with an id, their
steps started, refused and stopped by compare-and-set."""

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from scheduler.db.engine import DatabaseEngine, _retry
from scheduler.db.models import instances, rebalance_plans, rebalance_steps
from scheduler.db.rows import _row_dict

PLANNED, APPLYING, STOPPING, STOPPED, DONE = "planned", "applying", "stopping", "stopped", "done"
#: Every state of a plan.
PLAN_STATES = (PLANNED, APPLYING, STOPPING, STOPPED, DONE)
PENDING, RUNNING, STEP_DONE, FAILED = "pending", "running", "done", "failed"
#: list_rebalance_plans answers with at most this many, the newest.
MAX_LISTED = 1000


#: What a plan reads of each instance on a host (scheduler.moves.fleet_snapshot).
PLANNED_COLUMNS = ("uuid", "host", "state", "flavor_name", "memory_mb", "root_gb", "ephemeral_gb", "vcpus",
                   "request_spec", "filter_properties")
#: Of PLANNED_COLUMNS, those read as the JSON text they hold.
AS_TEXT = ("request_spec", "filter_properties")


class RebalancePlanQueries(DatabaseEngine):
    """Plans saved, read, listed; their states and steps compared-and-set."""

    @_retry
    def instances_to_plan(self, states: Sequence[str]) -> list[dict[str, Any]]:
        """The PLANNED_COLUMNS of every instance on a host in one of ``states``: the fleet's
        instances read in one pass, without the rest of their rows. Their AS_TEXT columns are the
        JSON text stored (None for SQL NULL), for the caller to decode once for many instances."""
        statement = (sa.select(*(sa.cast(instances.c[name], sa.Text) if name in AS_TEXT else instances.c[name]
                                 for name in PLANNED_COLUMNS))
                     .where(instances.c.state.in_(list(states)), instances.c.host.is_not(None)))
        with self._transaction() as connection:
            return [dict(zip(PLANNED_COLUMNS, row, strict=True)) for row in connection.execute(statement)]

    @_retry
    def create_rebalance_plan(self, goal: str, options: Mapping[str, Any], summary: Mapping[str, Any],
                              steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Save a plan (state planned) and its steps in order (each {instance_uuid, source_host,
        dest_host, source_generation, dest_generation, memory_mb, reason}); the plan with its id."""
        now = self.now()
        with self._transaction(write=True) as connection:
            (plan_id,) = connection.execute(rebalance_plans.insert().values(
                goal=goal, options=dict(options), state=PLANNED, summary=dict(summary), created_at=now,
                updated_at=now)).inserted_primary_key or (None,)
            if steps:
                connection.execute(rebalance_steps.insert(), [
                    {**step, "plan_id": plan_id, "position": position, "status": PENDING}
                    for position, step in enumerate(steps, 1)])
        found = self.get_rebalance_plan(plan_id)
        assert found is not None
        return found

    @_retry
    def get_rebalance_plan(self, plan_id: int) -> dict[str, Any] | None:
        """The plan with its ``steps`` in order, or None."""
        with self._transaction() as connection:
            row = connection.execute(sa.select(rebalance_plans).where(rebalance_plans.c.id == plan_id)
                                     ).mappings().first()
            if row is None:
                return None
            steps = connection.execute(sa.select(rebalance_steps).where(rebalance_steps.c.plan_id == plan_id)
                                       .order_by(rebalance_steps.c.position)).mappings().all()
        return {**_row_dict(row), "steps": [_row_dict(s) for s in steps]}

    @_retry
    def list_rebalance_plans(self, limit: int = MAX_LISTED) -> list[dict[str, Any]]:
        """Plans newest first, without their steps but with ``step_count``."""
        counts = (sa.select(rebalance_steps.c.plan_id, sa.func.count().label("step_count"))
                  .group_by(rebalance_steps.c.plan_id).subquery())
        statement = (sa.select(rebalance_plans, sa.func.coalesce(counts.c.step_count, 0).label("step_count"))
                     .outerjoin(counts, counts.c.plan_id == rebalance_plans.c.id)
                     .order_by(rebalance_plans.c.id.desc()).limit(limit))
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def set_rebalance_plan_state(self, plan_id: int, state: str, expected: Sequence[str],
                                 reason: str | None = None) -> bool:
        """Compare-and-set: the plan goes to ``state`` (with ``reason``) if it is in one of ``expected``."""
        if state not in PLAN_STATES:
            raise ValueError(f"plan state must be one of {', '.join(PLAN_STATES)}, got {state!r}")
        values: dict[str, Any] = {"state": state, "updated_at": self.now()}
        if reason is not None:
            values["reason"] = reason
        statement = (sa.update(rebalance_plans).where(rebalance_plans.c.id == plan_id,
                                                      rebalance_plans.c.state.in_(list(expected)))
                     .values(values))
        with self._transaction(write=True) as connection:
            return bool(connection.execute(statement).rowcount == 1)

    @_retry
    def set_rebalance_step(self, plan_id: int, position: int, expected_status: str,
                           values: Mapping[str, Any]) -> bool:
        """Compare-and-set: the step takes ``values`` (status, migration_id, failure) if its status
        is ``expected_status``."""
        allowed = {"status", "migration_id", "failure"}
        if set(values) - allowed:
            raise ValueError(f"not rebalance step columns: {', '.join(sorted(set(values) - allowed))}")
        statement = (sa.update(rebalance_steps)
                     .where(rebalance_steps.c.plan_id == plan_id, rebalance_steps.c.position == position,
                            rebalance_steps.c.status == expected_status)
                     .values(dict(values)))
        with self._transaction(write=True) as connection:
            return bool(connection.execute(statement).rowcount == 1)
