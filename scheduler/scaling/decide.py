"""One sync of a scaling group: what each metric proposes, and the count to set.

Kubernetes' reconcileAutoscaler and computeReplicasForMetrics (horizontal.go): a group
whose desired count is 0 while its min is not is paused; a count outside min..max is
brought back in range; otherwise the metrics' largest proposal goes through the
behavior (stabilization, rate limits) and min/max. A metric that cannot be read blocks
a scale-down; when none can be read nothing changes.

Pure: the caller passes the group, its members, the external values and the group's
history; :class:`Decision` says what to set and what to record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from scheduler.scaling import behavior, replicas
from scheduler.scaling.replicas import Members, MetricUnavailable, Tolerances
from scheduler.scaling.spec import (
    DROPPED_STATES,
    EXTERNAL,
    RESOURCE,
    GroupSpec,
    MetricSpec,
    Readiness,
    Recommendation,
    ScaleEvent,
    SettledMembers,
    WhatIf,
)

ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
SUCCEEDED_RESCALE = "SucceededRescale"

_FAILURE_REASONS = {RESOURCE: "FailedGetResourceMetric", EXTERNAL: "FailedGetExternalMetric"}
_PODS_FAILURE = "FailedGetPodsMetric"
#: Why no count is computed while every member is starting (not a failure: a new group's first minutes).
MEMBERS_INITIALIZING = "MembersInitializing"


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True)
class MetricResult:
    """One metric's reading: ``current`` is a resource's utilization in percent (or its
    average with a ``target_average``), an instance metric's average, an external metric's
    value (or its average per member); ``proposal`` is the count it asks for."""

    spec: MetricSpec
    current: Decimal | int | None
    proposal: int | None
    error: str | None = None
    initializing: bool = False


@dataclass(frozen=True)
class Decision:
    desired: int
    metrics: tuple[MetricResult, ...]
    conditions: tuple[Condition, ...]
    #: What held the count back from what the metrics asked, or None.
    limited_by: str | None
    #: The recommendation to record with this sync's time, or None (no metrics were read).
    recommendation: int | None
    #: Whether ``current`` must be recorded first: the group's first sync.
    record_initial: bool
    #: The scale event to record (desired - current) when the count changes, else None.
    scale_event: int | None


def tolerances_of(spec: GroupSpec) -> Tolerances:
    """The group's tolerance, overridden per direction by its behavior (Kubernetes 1.33+)."""
    down = spec.behavior.scale_down.tolerance
    up = spec.behavior.scale_up.tolerance
    return Tolerances(float(spec.tolerance if down is None else down),
                      float(spec.tolerance if up is None else up))


def live_members(members: Members) -> int:
    """Kubernetes' status replicas: members neither failed nor being deleted."""
    if isinstance(members, SettledMembers):
        return members.count
    return sum(1 for m in members if m.state not in DROPPED_STATES)


def _from_milli(value: int) -> Decimal | int:
    return value // 1000 if value % 1000 == 0 else Decimal(value) / 1000


def measure(metric: MetricSpec, current: int, members: Members, external: Mapping[str, Decimal],
            tolerances: Tolerances, readiness: Readiness) -> MetricResult:
    """computeReplicasForMetric for one metric; a failure is a result with ``error``."""
    try:
        if metric.type == RESOURCE and metric.target_utilization is not None:
            proposal, utilization = replicas.resource_replicas(
                current, metric.target_utilization, metric.name, tolerances, members, readiness)
            return MetricResult(metric, utilization, proposal)
        if metric.type != EXTERNAL:
            assert metric.target_average is not None
            proposal, average = replicas.plain_replicas(
                current, replicas.milli(metric.target_average), metric.name,
                metric.name if metric.type == RESOURCE else None, tolerances, members, readiness)
            return MetricResult(metric, _from_milli(average), proposal)
        return _external(metric, current, members, external, tolerances)
    except MetricUnavailable as exc:
        return MetricResult(metric, None, None, str(exc), isinstance(exc, replicas.MembersInitializing))


def _external(metric: MetricSpec, current: int, members: Members,
              external: Mapping[str, Decimal], tolerances: Tolerances) -> MetricResult:
    if metric.name not in external:
        raise MetricUnavailable(f"no value for external metric {metric.name}")
    value = replicas.milli(external[metric.name])
    if metric.target_value is not None:
        proposal = replicas.external_replicas(current, replicas.milli(metric.target_value), value,
                                              tolerances, members)
        return MetricResult(metric, _from_milli(value), proposal)
    assert metric.target_average is not None
    proposal, average = replicas.external_per_member_replicas(
        live_members(members), replicas.milli(metric.target_average), value, tolerances)
    return MetricResult(metric, None if average is None else _from_milli(average), proposal)


def _label(metric: MetricSpec) -> str:
    if metric.type == RESOURCE:
        return f"{metric.name} resource" + (" utilization (percentage of request)"
                                            if metric.target_utilization is not None else "")
    return f"{'external' if metric.type == EXTERNAL else 'instance'} metric {metric.name}"


class _Conditions:
    def __init__(self) -> None:
        self.found: dict[str, Condition] = {}

    def set(self, kind: str, status: bool, reason: str, message: str) -> None:
        self.found[kind] = Condition(kind, status, reason, message)

    def all(self) -> tuple[Condition, ...]:
        return tuple(self.found.values())


def _combine(results: Sequence[MetricResult], current: int,
             conditions: _Conditions) -> tuple[int | None, str | None]:
    """computeReplicasForMetrics: the largest proposal, or (None, reason) when the metrics
    that failed forbid scaling (all failed, or the others would scale down)."""
    proposal, label, failed = 0, "", [r for r in results if r.error is not None]
    for result in results:
        if result.proposal is not None and (proposal == 0 or result.proposal > proposal):
            proposal, label = result.proposal, _label(result.spec)
    if len(failed) >= len(results) or (failed and proposal < current):
        first = failed[0]
        reason = (MEMBERS_INITIALIZING if all(r.initializing for r in failed)
                  else _FAILURE_REASONS.get(first.spec.type, _PODS_FAILURE))
        conditions.set(SCALING_ACTIVE, False, reason,
                       f"unable to compute the member count: {first.error}")
        return None, reason
    conditions.set(SCALING_ACTIVE, True, "ValidMetricFound",
                   f"the member count was computed from {label}")
    return proposal, None


def decide(spec: GroupSpec, current: int, members: Members, external: Mapping[str, Decimal],
           recommendations: Sequence[Recommendation] | None, scale_events: Sequence[ScaleEvent],
           readiness: Readiness = Readiness()) -> Decision:
    """One sync of a group whose desired count is ``current`` (reconcileAutoscaler).

    ``members``: one by one, or summed when the group is settled
    (:func:`scheduler.scaling.settled.settle`), with the same decision either way;
    ``recommendations``: the group's recorded recommendations, None if it was never synced;
    ``scale_events``: its recorded count changes. Ages are seconds before this sync."""
    conditions = _Conditions()
    conditions.set(ABLE_TO_SCALE, True, "SucceededGetScale",
                   "the group's current desired count is known")
    history = list(recommendations) if recommendations is not None else [Recommendation(0.0, current)]
    initial = recommendations is None

    def held(desired: int, limited_by: str | None, results: tuple[MetricResult, ...] = ()) -> Decision:
        change = _rescaled(conditions, current, desired)
        return Decision(desired, results, conditions.all(), limited_by, None, initial, change)

    if current == 0 and spec.min != 0:
        conditions.set(SCALING_ACTIVE, False, "ScalingDisabled",
                       "scaling is disabled since the group's desired count is zero")
        return Decision(0, (), conditions.all(), "ScalingDisabled", None, initial, None)
    if current > spec.max:
        return held(spec.max, behavior.TOO_MANY_REPLICAS)
    if current < spec.min:
        return held(spec.min, behavior.TOO_FEW_REPLICAS)

    tolerances = tolerances_of(spec)
    results = tuple(measure(m, current, members, external, tolerances, readiness) for m in spec.metrics)
    proposal, failure = _combine(results, current, conditions)
    if proposal is None:
        return Decision(current, results, conditions.all(), failure, None, initial, None)

    normalized = behavior.normalize(current, proposal, spec.min, spec.max, spec.behavior, history,
                                    scale_events)
    able = normalized.able_to_scale
    conditions.set(ABLE_TO_SCALE, True, able.reason, able.message)
    limited = normalized.scaling_limited
    conditions.set(SCALING_LIMITED, normalized.limited, limited.reason, limited.message)
    limited_by = limited.reason if normalized.limited else (
        able.reason if normalized.stabilized != proposal else None)
    desired = normalized.desired
    change = _rescaled(conditions, current, desired)
    return Decision(desired, results, conditions.all(), limited_by, proposal, initial, change)


def _rescaled(conditions: _Conditions, current: int, desired: int) -> int | None:
    """The scale event of a count that changes, None if it stays; a change sets AbleToScale
    as Kubernetes does once it has updated the scale (the controller writes this status
    with the new count, in one transaction, or writes neither)."""
    if desired == current:
        return None
    conditions.set(ABLE_TO_SCALE, True, SUCCEEDED_RESCALE,
                   f"the scaling controller was able to update the desired count to {desired}")
    return desired - current


def decide_what_if(what_if: WhatIf) -> Decision:
    return decide(what_if.spec, what_if.current, what_if.members, what_if.external,
                  what_if.recommendations, what_if.scale_events, what_if.readiness)


def _number(value: Decimal | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    return int(value) if value == value.to_integral_value() else float(value)


def to_json(decision: Decision) -> dict[str, object]:
    """The what-if output (see the user guide's "Scaling groups")."""
    metrics = []
    for result in decision.metrics:
        entry: dict[str, object] = {"name": result.spec.name, "type": result.spec.type,
                                    "current": _number(result.current), "proposal": result.proposal}
        if result.error is not None:
            entry["error"] = result.error
        if result.initializing:
            entry["initializing"] = True
        metrics.append(entry)
    return {
        "desired": decision.desired,
        "metrics": metrics,
        "limited_by": decision.limited_by,
        "conditions": [{"type": c.type, "status": "True" if c.status else "False", "reason": c.reason,
                        "message": c.message} for c in decision.conditions],
        "record": {"recommendation": decision.recommendation, "scale_event": decision.scale_event},
    }
