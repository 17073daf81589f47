"""Settled groups: the replica calculator's input summed, for the common case.

Most groups, most of the time, have every member ACTIVE, past its cpu initialization
period, and holding a sample of every metric its group reads per member. For such a
group Kubernetes' groupPods sets nothing aside: every member is ready and has a sample,
so each metric's proposal depends only on the member count and the sums of the samples
and of the requests, in milli-units. :func:`settle` checks the case and sums once;
:mod:`scheduler.scaling.replicas` computes from the sums exactly what it computes from
the members (tests/unit/scaling/test_settled.py compares the two on random groups).
Any other group goes member by member.

No I/O: the rows, the samples and the time come in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler import states
from scheduler.scaling import members as group_members
from scheduler.scaling.replicas import milli
from scheduler.scaling.spec import CPU, EXTERNAL, RESOURCE, GroupSpec, Readiness, SettledMembers

_ONE_MICROSECOND = timedelta(microseconds=1)
#: Samples in milli-units, by the sample's type then its value: a fleet's samples repeat,
#: and 1, 1.0 and Decimal(1) are one key in one dict. Each cleared when full.
_SAMPLE_MILLI: dict[type, dict[Any, int]] = {}
_CACHED = 65536


def sample_milli(value: Any) -> int:
    """A sample in milli-units, as the replica calculator counts it one member at a time."""
    cache = _SAMPLE_MILLI.get(type(value))
    if cache is None:
        cache = _SAMPLE_MILLI[type(value)] = {}
    try:
        return cache[value]
    except KeyError:
        pass
    except TypeError:  # unhashable (a signalling NaN): computed each time
        return milli(group_members.sample_number(value))
    result = milli(group_members.sample_number(value))
    if len(cache) >= _CACHED:
        cache.clear()
    cache[value] = result
    return result


def member_metrics(spec: GroupSpec) -> tuple[str, ...]:
    """The metrics the group reads per member (resource and instance metrics), once each."""
    return tuple(dict.fromkeys(m.name for m in spec.metrics if m.type != EXTERNAL))


def settle(spec: GroupSpec, rows: Sequence[Mapping[str, Any]], usage: Mapping[str, Mapping[str, Any]],
           now: datetime, readiness: Readiness) -> SettledMembers | None:
    """The group's counted member ``rows`` summed, or None when the group is not settled
    (a member not ACTIVE, still initialising while the group reads cpu, without a sample,
    or no member at all): then the members go one by one.

    ``usage``: {member uuid: {metric: last sample}}, as the controller reads it."""
    if not rows:
        return None
    names = member_metrics(spec)
    reads_cpu = any(m.type == RESOURCE and m.name == CPU for m in spec.metrics)
    period = readiness.cpu_initialization_period_s
    # Launched at or before this: past the period, whatever the rounding of period_s.
    surely_past = now - timedelta(seconds=period) - _ONE_MICROSECOND
    running = states.RUNNING
    for row in rows:
        if row["state"] not in running:
            return None
    if reads_cpu:
        for row in rows:
            launched = row.get("launched_at")
            if launched is not None and launched > surely_past and (
                    group_members.seconds_between(launched, now) or 0.0) < period:
                return None
    totals = dict.fromkeys(names, 0)
    samples_of = usage.get
    for name in names:
        total = 0
        for row in rows:
            samples = samples_of(row["uuid"])
            if samples is None:
                return None
            value = samples.get(name)
            if value is None:
                return None
            total += sample_milli(value)
        totals[name] = total
    cpu = memory = 0
    requested: dict[tuple[Any, Any], tuple[int, int]] = {}  # the members' flavors: mostly one
    for row in rows:
        flavor = (row["vcpus"], row["memory_mb"])
        pair = requested.get(flavor)
        if pair is None:
            requests = group_members.requests_of(*flavor)
            pair = requested[flavor] = (milli(requests[CPU]), milli(requests["memory"]))
        cpu += pair[0]
        memory += pair[1]
    return SettledMembers(len(rows), totals, {CPU: cpu, "memory": memory})
