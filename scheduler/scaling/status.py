"""What a sync leaves for people to read: the group's status (``berth scaling group show``)
and the reason of each scale event, worded like Kubernetes' SuccessfulRescale event
("scaled from 3 to 5: cpu utilization 90% of requests above target 50%"). No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from scheduler.scaling.behavior import TOO_FEW_REPLICAS, TOO_MANY_REPLICAS
from scheduler.scaling.decide import ABLE_TO_SCALE, Decision, MetricResult
from scheduler.scaling.spec import EXTERNAL, RESOURCE, MetricSpec

#: How many of the last scale events a group's status shows.
EVENTS_SHOWN = 5


@functools.lru_cache(maxsize=64)  # a sync writes its own time into every group's status
def iso(value: datetime | None) -> str | None:
    """A naive UTC time as the database's rows show it: '2026-12-01T12:00:00.000000Z'."""
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def json_number(value: Decimal | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    return int(value) if value == value.to_integral_value() else float(value)


def _shown(value: Decimal | int) -> str:
    """90, 0.25, 1500: no exponent, no trailing zeros."""
    if isinstance(value, int):
        return str(value)
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _target(metric: MetricSpec) -> dict[str, float | int | None]:
    if metric.target_utilization is not None:
        return {"utilization": metric.target_utilization}
    if metric.target_average is not None:
        return {"average": json_number(metric.target_average)}
    return {"value": json_number(metric.target_value)}


def _above(result: MetricResult) -> str:
    """Why ``result``'s metric asks for more members: its reading against its target."""
    spec, current = result.spec, result.current
    if current is None:
        return f"{spec.name} above target"
    if spec.type == RESOURCE and spec.target_utilization is not None:
        return (f"{spec.name} utilization {_shown(current)}% of requests above target "
                f"{spec.target_utilization}%")
    if spec.target_value is not None:
        return f"{spec.name} value {_shown(current)} above target {_shown(spec.target_value)}"
    assert spec.target_average is not None
    per_member = " per member" if spec.type == EXTERNAL else ""
    return f"{spec.name} average {_shown(current)}{per_member} above target {_shown(spec.target_average)}"


def event_reason(current: int, decision: Decision) -> str:
    """Why the count went from ``current`` to ``decision.desired``: the metric that asked
    for the most members, all metrics below target, or the count brought within min..max."""
    prefix = f"scaled from {current} to {decision.desired}"
    asked = max((r.proposal for r in decision.metrics if r.proposal is not None), default=None)
    # Brought within min..max, not moved by a metric (none asked to go that way).
    up, down = decision.desired > current, decision.desired < current
    if up and decision.limited_by == TOO_FEW_REPLICAS and (asked is None or asked <= current):
        return f"{prefix}: the desired count was below min"
    if down and decision.limited_by == TOO_MANY_REPLICAS and (asked is None or asked >= current):
        return f"{prefix}: the desired count was above max"
    if decision.desired < current:
        return f"{prefix}: all metrics below target"
    above = max((r for r in decision.metrics if r.proposal is not None), key=lambda r: r.proposal or 0,
                default=None)
    return f"{prefix}: {_above(above)}" if above is not None else prefix


def conditions(decision: Decision) -> list[dict[str, str]]:
    return [{"type": c.type, "status": "True" if c.status else "False", "reason": c.reason,
             "message": c.message} for c in decision.conditions]


def member_counts(members: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """{state: members in it}, by state name."""
    counts: dict[str, int] = {}
    for member in members:
        state = member["state"]
        counts[state] = counts.get(state, 0) + 1
    return counts if len(counts) < 2 else dict(sorted(counts.items()))


def group_status(members: Sequence[Mapping[str, Any]], decision: Decision,
                 events: Sequence[Mapping[str, Any]], now: datetime, new_event: str | None,
                 replace_failures: int, replace_after: datetime | None,
                 template_error: str | None, pending: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What ``show`` prints: the sync's metrics (current, target, proposal), conditions,
    what limited the count, the members by state, the last scale events (``events``
    recorded, {at, change, reason}, then this sync's with ``new_event`` as its reason) and
    the replacement back-off; ``pending``: the members still to create, and why not now."""
    metrics = []
    for result in decision.metrics:
        entry: dict[str, Any] = {"name": result.spec.name, "type": result.spec.type,
                                 "current": json_number(result.current), "target": _target(result.spec),
                                 "proposal": result.proposal}
        if result.error is not None:
            entry["error"] = result.error
        if result.initializing:
            entry["initializing"] = True
        metrics.append(entry)
    shown = list(events)
    if decision.scale_event is not None:
        shown.append({"at": iso(now), "change": decision.scale_event, "reason": new_event})
    status: dict[str, Any] = {
        "synced_at": iso(now), "desired": decision.desired, "members": member_counts(members),
        "metrics": metrics, "conditions": conditions(decision), "limited_by": decision.limited_by,
        "events": shown[-EVENTS_SHOWN:],
        "replacing": {"failures": replace_failures, "next_at": iso(replace_after)},
    }
    if template_error is not None:
        status["template_error"] = template_error
    if pending is not None:
        status["pending"] = dict(pending)
    return status


def paused_status(members: Sequence[Mapping[str, Any]], desired: int, now: datetime,
                  decision: Decision | None) -> dict[str, Any]:
    """A paused group's status: paused by hand (no ``decision``), or by a desired count of 0."""
    status: dict[str, Any] = {"synced_at": iso(now), "paused": True, "desired": desired,
                              "members": member_counts(members)}
    if decision is None:
        status["conditions"] = [{"type": ABLE_TO_SCALE, "status": "False", "reason": "Paused",
                                 "message": "the group is paused: its members are left as they are"}]
        status["limited_by"] = "Paused"
    else:
        status.update(conditions=conditions(decision), limited_by=decision.limited_by)
    return status
