"""The scaling groups' controller: Kubernetes' reconcileAutoscaler and ReplicaSet, for the
groups this scheduler process holds.

Each sync (:meth:`ScalingController.sync_once`) claims the groups whose lease this owner
holds or may take, and for each one reads its members and history, runs the policy
(:func:`scheduler.scaling.decide.decide`), and brings the members to the count decided:
new members' rows are written with the sync (one compare-and-set on the group's version)
and their builds cast after it commits; the members a scale-down removes are marked
DELETING and their deletes cast after it commits. A controller whose lease was taken
over writes nothing and casts nothing.

Whatever a controller that died between its commit and its casts left undone is found
again by the next one: members SCHEDULING without a host, or DELETING, whose row has not
changed for ``cast_grace_s`` get their cast again (the scheduler places a SCHEDULING row
once and deletes a DELETED one never, so a cast sent twice does nothing more).

No threads and no I/O of its own: the database, the casts, the metrics and the clock come in.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from scheduler import states
from scheduler.db.engine import to_db_time
from scheduler.scaling import decide as policy
from scheduler.scaling import members as group_members
from scheduler.scaling.behavior import TOO_FEW_REPLICAS, TOO_MANY_REPLICAS
from scheduler.scaling.members import COUNTED_STATES, TemplateError
from scheduler.scaling.spec import (
    EXTERNAL,
    GroupSpec,
    MetricSpec,
    Readiness,
    Recommendation,
    ScaleEvent,
    SpecError,
    parse_spec,
)

LOG = logging.getLogger(__name__)

#: cast_run_instance(request_spec, filter_properties): SchedulerClient.run_instance's wire dicts.
RunInstanceCast = Callable[[dict[str, Any], dict[str, Any]], None]
#: cast_delete_instance(instance_uuid).
DeleteInstanceCast = Callable[[str], None]

SYNCED = "synced"
PAUSED = "paused"
DELETING = "deleting"
REMOVED = "removed"
LOST = "lost"  # the group was written since it was claimed: nothing written, nothing cast
FAILED = "failed"

#: How many of the last scale events a group's status shows.
EVENTS_SHOWN = 5


class MetricsSource(Protocol):
    """Where the members' samples and the external metrics come from."""

    def member_usage(self, uuids: Sequence[str]) -> Mapping[str, Mapping[str, Decimal | float | int]]:
        """{uuid: {metric: last sample}} of those of ``uuids`` that have samples."""
        ...

    def external(self, name: str) -> Decimal | float | int | None:
        """The external metric ``name``'s value, None when unknown."""
        ...


class InMemoryMetrics:
    """A :class:`MetricsSource` holding what it is told (tests, the what-if of a live group)."""

    def __init__(self) -> None:
        self.usage: dict[str, dict[str, Decimal | float | int]] = {}
        self.values: dict[str, Decimal | float | int] = {}

    def set_usage(self, uuid: str, **metrics: Decimal | float | int) -> None:
        self.usage.setdefault(uuid, {}).update(metrics)

    def set_external(self, name: str, value: Decimal | float | int | None) -> None:
        if value is None:
            self.values.pop(name, None)
        else:
            self.values[name] = value

    def member_usage(self, uuids: Sequence[str]) -> dict[str, dict[str, Decimal | float | int]]:
        return {uuid: dict(self.usage[uuid]) for uuid in uuids if uuid in self.usage}

    def external(self, name: str) -> Decimal | float | int | None:
        return self.values.get(name)


@dataclass(frozen=True)
class ControllerSettings:
    owner: str  # this controller's name in the leases: one per scheduler process
    period_s: float = 15.0  # --horizontal-pod-autoscaler-sync-period; the lease is as long
    max_groups: int = 1000  # groups claimed per sync
    replace_backoff_s: float = 10.0  # the first wait before ERROR members are replaced again
    replace_backoff_max_s: float = 300.0  # the wait doubles up to this
    cast_grace_s: float = 60.0  # a member unchanged this long gets its build/delete cast again
    readiness: Readiness = Readiness()


@dataclass(frozen=True)
class SyncResult:
    uuid: str
    name: str
    outcome: str  # SYNCED, PAUSED, DELETING, REMOVED, LOST or FAILED
    desired: int | None = None
    created: tuple[str, ...] = ()  # members whose build was cast
    deleted: tuple[str, ...] = ()  # members whose delete was cast
    recast: tuple[str, ...] = ()  # members whose earlier cast was sent again
    error: str | None = None


@dataclass
class _Plan:
    """What a sync does to the members."""

    new_rows: list[dict[str, Any]] = field(default_factory=list)
    victims: list[Mapping[str, Any]] = field(default_factory=list)
    replace_after: datetime | None = None
    replace_failures: int = 0
    template_error: str | None = None


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _json_number(value: Decimal | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    return int(value) if value == value.to_integral_value() else float(value)


def _target(metric: MetricSpec) -> dict[str, float | int | None]:
    if metric.target_utilization is not None:
        return {"utilization": metric.target_utilization}
    if metric.target_average is not None:
        return {"average": _json_number(metric.target_average)}
    return {"value": _json_number(metric.target_value)}


def _conditions(decision: policy.Decision) -> list[dict[str, str]]:
    return [{"type": c.type, "status": "True" if c.status else "False", "reason": c.reason,
             "message": c.message} for c in decision.conditions]


def _event_reason(decision: policy.Decision) -> str:
    """Why the count changed, as Kubernetes' SuccessfulRescale event says it."""
    if not decision.metrics:  # brought back within min..max without reading a metric
        if decision.limited_by == TOO_FEW_REPLICAS:
            return "the desired count was below min"
        if decision.limited_by == TOO_MANY_REPLICAS:
            return "the desired count was above max"
    if decision.scale_event is not None and decision.scale_event < 0:
        return "all metrics below target"
    above = max((r for r in decision.metrics if r.proposal is not None), key=lambda r: r.proposal or 0,
                default=None)
    return f"{above.spec.type} metric {above.spec.name} above target" if above else "rescale"


def history_horizon_s(spec: GroupSpec) -> float:
    """How far back a group's history is read: its longest stabilization window plus its
    longest policy period; older records are pruned."""
    rules = (spec.behavior.scale_up, spec.behavior.scale_down)
    return max(r.stabilization_window_s for r in rules) + max(r.longest_period_s for r in rules)


class ScalingController:
    """Syncs the scaling groups this owner holds; see the module's docstring."""

    def __init__(self, settings: ControllerSettings, database: Any, cast_run_instance: RunInstanceCast,
                 cast_delete_instance: DeleteInstanceCast, metrics_source: MetricsSource,
                 clock: Callable[[], datetime] | None = None) -> None:
        """``database``: a scheduler.db.api.Database; ``clock``: the database's time
        (``database.now``) unless given."""
        self.settings = settings
        self._db = database
        self._run_instance = cast_run_instance
        self._delete_instance = cast_delete_instance
        self._metrics = metrics_source
        self._clock = clock or database.now

    def sync_once(self, now: datetime | None = None) -> list[SyncResult]:
        """Claim this owner's groups for one period and sync each; one result per group."""
        at = to_db_time(now) if now is not None else self._clock()
        groups = self._db.claim_scaling_groups(self.settings.owner, at, self.settings.period_s,
                                               self.settings.max_groups)
        results = []
        for group in groups:
            try:
                results.append(self.sync_group(group, at))
            except Exception as exc:  # one group's trouble must not stop the others
                LOG.exception("Scaling group %s (%s): sync failed", group["name"], group["uuid"])
                results.append(SyncResult(group["uuid"], group["name"], FAILED, error=str(exc)))
        return results

    def release(self) -> int:
        """Give up this owner's leases (when the process stops): how many."""
        return int(self._db.release_scaling_groups(self.settings.owner))

    def sync_group(self, group: Mapping[str, Any], now: datetime) -> SyncResult:
        """Sync ``group`` as claimed (its version is the one to write with) at ``now``."""
        members = self._db.list_scaling_group_members(group["uuid"])
        if group["deleted_at"] is not None:
            return self._sync_deleting(group, members, now)
        try:
            spec = parse_spec(group["spec"])
        except SpecError as exc:
            status = {"synced_at": _iso(now), "error": str(exc)}
            written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
            return SyncResult(group["uuid"], group["name"], FAILED if written else LOST, error=str(exc))
        if group["paused"]:
            return self._sync_paused(group, members, now, None)
        decision, history = self._decide(group, spec, members, now)
        if group["desired"] == 0 and spec.min > 0:
            return self._sync_paused(group, members, now, decision)
        plan = self._plan(group, members, decision.desired, now)
        status = self._status(members, decision, plan, history, now)
        recommendations = [group["desired"]] if decision.record_initial else []
        if decision.recommendation is not None:
            recommendations.append(decision.recommendation)
        event = None if decision.scale_event is None else (decision.scale_event, _event_reason(decision))
        values = {"desired": decision.desired, "status": status, "replace_after": plan.replace_after,
                  "replace_failures": plan.replace_failures}
        written = self._db.record_scaling_sync(group["uuid"], group["version"], now, values, recommendations,
                                               event, plan.new_rows)
        if written is None:
            LOG.info("Scaling group %s: written since it was claimed; nothing done", group["name"])
            return SyncResult(group["uuid"], group["name"], LOST)
        if event is not None:
            LOG.info("Scaling group %s: %d -> %d members (%s)", group["name"], group["desired"],
                     decision.desired, event[1])
        deleted = self._delete(plan.victims)
        for row in plan.new_rows:
            self._run_instance(row["request_spec"], row["filter_properties"])
        gone = {row["uuid"] for row in plan.victims}
        recast = self._recast([m for m in members if m["uuid"] not in gone], now)
        self._db.prune_scaling_history(now - timedelta(seconds=history_horizon_s(spec)), group["uuid"])
        return SyncResult(group["uuid"], group["name"], SYNCED, decision.desired,
                          tuple(row["uuid"] for row in plan.new_rows), deleted, recast)

    # -- a sync's parts ------------------------------------------------------------------

    def _decide(self, group: Mapping[str, Any], spec: GroupSpec, members: Sequence[Mapping[str, Any]],
                now: datetime) -> tuple[policy.Decision, list[dict[str, Any]]]:
        """The policy's decision, and the scale events recorded within the history's horizon."""
        counted = [m for m in members if m["state"] in COUNTED_STATES]
        usage = self._metrics.member_usage([m["uuid"] for m in counted])
        seen = [group_members.to_member(m, usage.get(m["uuid"], {}), now) for m in counted]
        external: dict[str, Decimal] = {}
        for metric in spec.metrics:
            if metric.type == EXTERNAL:
                value = self._metrics.external(metric.name)
                if value is not None:
                    external[metric.name] = value if isinstance(value, Decimal) else Decimal(str(value))
        cutoff = now - timedelta(seconds=history_horizon_s(spec))
        history = self._db.scaling_group_history(group["uuid"], since=cutoff)
        recommendations = None
        if group["last_synced_at"] is not None:
            recommendations = [Recommendation(group_members.seconds_between(r["recorded_at"], now) or 0.0,
                                              r["replicas"]) for r in history["recommendations"]]
        events = [ScaleEvent(group_members.seconds_between(e["recorded_at"], now) or 0.0, e["change"])
                  for e in history["scale_events"]]
        decision = policy.decide(spec, group["desired"], seen, external, recommendations, events,
                                 self.settings.readiness)
        return decision, history["scale_events"]

    def _plan(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]], desired: int,
              now: datetime) -> _Plan:
        """ReplicaSet's part: ERROR members replaced (with the back-off), members created or
        chosen for deletion so that the counted ones come to ``desired``."""
        plan = _Plan(replace_after=to_db_time(group["replace_after"]),
                     replace_failures=group["replace_failures"])
        counted = [m for m in members if m["state"] in COUNTED_STATES]
        try:
            group_members.member_request(group, str(uuidlib.uuid4()), None)
        except TemplateError as exc:
            plan.template_error = str(exc)
        errors = [m for m in counted if m["state"] == states.ERROR]
        replacing: list[Mapping[str, Any]] = []
        due = plan.replace_after is None or plan.replace_after <= now
        if errors and plan.template_error is None and due:
            replacing = errors
            delay = group_members.replace_delay(plan.replace_failures, self.settings.replace_backoff_s,
                                                self.settings.replace_backoff_max_s)
            plan.replace_failures += 1
            plan.replace_after = now + timedelta(seconds=delay)
        elif not errors and all(m["state"] == states.ACTIVE for m in counted):
            plan.replace_failures, plan.replace_after = 0, None
        kept = [m for m in counted if m not in replacing]
        plan.victims = list(replacing) + group_members.victims(kept, len(kept) - desired)
        missing = desired - len(kept)
        if missing > 0 and plan.template_error is None:
            names = group_members.new_names(group["name"], [m for m in members if m not in replacing],
                                            missing)
            plan.new_rows = [group_members.member_row(group, str(uuidlib.uuid4()), name) for name in names]
        return plan

    def _delete(self, victims: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Mark ``victims`` DELETING (those not deleted meanwhile) and cast their deletes."""
        marked = self._db.update_instances_if(
            [(m["uuid"], {"state": states.DELETING}, {"state": COUNTED_STATES}) for m in victims])
        done = tuple(m["uuid"] for m in victims if m["uuid"] in marked)
        for uuid in done:
            self._delete_instance(uuid)
        return done

    def _recast(self, members: Sequence[Mapping[str, Any]], now: datetime) -> tuple[str, ...]:
        """Cast again the builds of members SCHEDULING without a host, and the deletes of
        members DELETING, whose rows have not changed for the grace period; each row is
        touched first, so that it waits a grace period again."""
        grace = self.settings.cast_grace_s
        stale = [m for m in members
                 if m["state"] in (states.SCHEDULING, states.DELETING)
                 and (m["state"] == states.DELETING or not m["host"])
                 and (group_members.seconds_between(m["updated_at"] or m["created_at"], now) or 0.0) >= grace]
        if not stale:
            return ()
        touched = self._db.update_instances_if(
            [(m["uuid"], {}, {"state": m["state"], "host": m["host"]}) for m in stale])
        recast = []
        for member in stale:
            if member["uuid"] not in touched:
                continue
            recast.append(member["uuid"])
            if member["state"] == states.DELETING:
                self._delete_instance(member["uuid"])
            else:
                request_spec, filter_properties = self._request_of(member)
                self._run_instance(request_spec, filter_properties)
        if recast:
            LOG.info("Cast again (no news for %g s): %s", grace, ", ".join(recast))
        return tuple(recast)

    def _request_of(self, member: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        if member.get("request_spec") and member.get("filter_properties") is not None:
            return member["request_spec"], member["filter_properties"]
        group = self._db.get_scaling_group(member["scaling_group_uuid"])
        return group_members.member_request(group, member["uuid"], member.get("display_name"))

    def _sync_paused(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]], now: datetime,
                     decision: policy.Decision | None) -> SyncResult:
        """A paused group: its status written, nothing else (not even its last sync time, so
        that it starts again as a group never synced)."""
        status: dict[str, Any] = {"synced_at": _iso(now), "paused": True, "desired": group["desired"],
                                  "members": self._counts(members)}
        if decision is None:
            status["conditions"] = [{"type": policy.ABLE_TO_SCALE, "status": "False", "reason": "Paused",
                                     "message": "the group is paused: its members are left as they are"}]
            status["limited_by"] = "Paused"
        else:
            status.update(conditions=_conditions(decision), limited_by=decision.limited_by)
        written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
        return SyncResult(group["uuid"], group["name"], PAUSED if written else LOST, group["desired"])

    def _sync_deleting(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]],
                       now: datetime) -> SyncResult:
        """A group being deleted: its members deleted, then the group removed."""
        if not members:
            removed = self._db.remove_scaling_group_if(group["uuid"], group["version"])
            return SyncResult(group["uuid"], group["name"], REMOVED if removed else LOST, 0)
        status = {"synced_at": _iso(now), "deleting": True, "members": self._counts(members)}
        written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
        if written is None:
            return SyncResult(group["uuid"], group["name"], LOST)
        deleted = self._delete([m for m in members if m["state"] in COUNTED_STATES])
        recast = self._recast([m for m in members if m["state"] == states.DELETING], now)
        if not self._db.list_scaling_group_members(group["uuid"]) and self._db.remove_scaling_group_if(
                group["uuid"], written["version"]):
            return SyncResult(group["uuid"], group["name"], REMOVED, 0, deleted=deleted, recast=recast)
        return SyncResult(group["uuid"], group["name"], DELETING, 0, deleted=deleted, recast=recast)

    # -- the status ----------------------------------------------------------------------

    @staticmethod
    def _counts(members: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        return dict(sorted(Counter(m["state"] for m in members).items()))

    def _status(self, members: Sequence[Mapping[str, Any]], decision: policy.Decision, plan: _Plan,
                history: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
        """What ``show`` prints: the sync's metrics (current, target, proposal), conditions,
        what limited the count, the members by state, the last scale events and the
        replacement back-off."""
        metrics = []
        for result in decision.metrics:
            entry: dict[str, Any] = {"name": result.spec.name, "type": result.spec.type,
                                     "current": _json_number(result.current), "target": _target(result.spec),
                                     "proposal": result.proposal}
            if result.error is not None:
                entry["error"] = result.error
            metrics.append(entry)
        events = [{"at": e["recorded_at"], "change": e["change"], "reason": e["reason"]} for e in history]
        if decision.scale_event is not None:
            events.append({"at": _iso(now), "change": decision.scale_event,
                           "reason": _event_reason(decision)})
        status: dict[str, Any] = {
            "synced_at": _iso(now), "desired": decision.desired, "members": self._counts(members),
            "metrics": metrics, "conditions": _conditions(decision), "limited_by": decision.limited_by,
            "events": events[-EVENTS_SHOWN:],
            "replacing": {"failures": plan.replace_failures, "next_at": _iso(plan.replace_after)},
        }
        if plan.template_error is not None:
            status["template_error"] = plan.template_error
        return status
