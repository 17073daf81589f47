"""The replica calculator: how many members one metric asks for.

A faithful translation of Kubernetes' HorizontalPodAutoscaler replica calculator
(pkg/controller/podautoscaler/replica_calculator.go and metrics/utilization.go),
pods read as members: a pod's cpu and memory requests are the flavor's vCPUs and RAM,
Pending is SCHEDULING/SCHEDULED/BUILDING, Failed or being deleted is ERROR/DELETING.

Values are counted as Kubernetes counts them, in whole milli-units (0.3 vCPU is 300),
utilization in whole percent. No I/O and no clock: member ages come in the input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from scheduler import states
from scheduler.scaling.spec import (
    CPU,
    DROPPED_STATES,
    PENDING_STATES,
    POWER_STATES,
    Member,
    Readiness,
    SettledMembers,
)

#: A group's members one by one, or summed when the group is settled (scheduler/scaling/settled.py).
Members = Sequence[Member] | SettledMembers

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1


class MetricUnavailable(Exception):
    """The metric cannot be computed this time (Kubernetes returns an error)."""


class MembersInitializing(MetricUnavailable):
    """No sample counts yet because every member is still starting: booting, within the cpu
    initialization period, or started within it without a sample yet. Kubernetes says
    FailedGetResourceMetric here too; Berth tells a new group's normal first minutes apart."""


@dataclass(frozen=True)
class Tolerances:
    """How far from 1 the usage ratio may be with no change, each way."""

    scale_down: float
    scale_up: float

    def is_within(self, ratio: float) -> bool:
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


@dataclass(frozen=True)
class Grouped:
    """Members sorted for one metric (Kubernetes' groupPods)."""

    ready_count: int
    unready: frozenset[int]  # pending, or cpu not trustworthy yet: set aside
    missing: frozenset[int]  # running without a sample of the metric
    ignored: frozenset[int]  # failed or being deleted: dropped


#: milli() of the quantities seen already: a fleet's samples and requests repeat.
_MILLI: dict[Decimal, int] = {}
_MILLI_CACHED = 65536


def milli(value: Decimal) -> int:
    """A quantity in milli-units, rounded up as Kubernetes' Quantity.MilliValue does."""
    try:
        return _MILLI[value]
    except (KeyError, TypeError):  # TypeError: a signalling NaN, which cannot be hashed
        pass
    # Saturates as MilliValue does: a sample of 1e300 must not overflow the ratios' floats.
    result = min(int((value * 1000).to_integral_value(rounding=ROUND_CEILING)), MAX_INT64)
    if len(_MILLI) >= _MILLI_CACHED:
        _MILLI.clear()
    _MILLI[value] = result
    return result


def _ceil(value: float) -> int:
    """A proposed count: at most what a group's count may hold (Kubernetes' int32)."""
    return MAX_INT32 if value >= MAX_INT32 else math.ceil(value)


def _cpu_unready(member: Member, readiness: Readiness) -> bool:
    """Whether a running member's cpu sample is set aside (groupPods' cpu readiness rules)."""
    started = member.started_s_ago
    since = member.ready_since_s_ago if member.ready_since_s_ago is not None else started
    if started is not None and started < readiness.cpu_initialization_period_s:
        # Still initialising: ignore an unready member, or a sample that does not cover a
        # whole window since the last readiness change.
        assert since is not None
        return not member.ready or since - member.sample_s_ago < member.sample_window_s
    if member.ready:
        return False
    # Ignore an unready member that has never been ready: its readiness last changed
    # within the initial readiness delay after it started.
    changed_after_start = 0.0 if started is None and since is None else (
        math.inf if started is None or since is None else started - since)
    return changed_after_start < readiness.initial_readiness_delay_s


def _started_within(member: Member, seconds: float) -> bool:
    return member.started_s_ago is not None and member.started_s_ago < seconds


def group_members(members: Sequence[Member], samples: Mapping[int, int], resource: str | None,
                  readiness: Readiness) -> Grouped:
    """Kubernetes' groupPods: ``samples`` are the members' values by index."""
    ready_count = 0
    unready, missing, ignored = set(), set(), set()
    for index, member in enumerate(members):
        if member.state in DROPPED_STATES:
            ignored.add(index)
        elif member.state in PENDING_STATES or member.state in POWER_STATES:
            unready.add(index)
        elif index not in samples:
            missing.add(index)
        elif resource == CPU and _cpu_unready(member, readiness):
            unready.add(index)
        else:
            ready_count += 1
    return Grouped(ready_count, frozenset(unready), frozenset(missing), frozenset(ignored))


def samples_of(members: Sequence[Member], name: str) -> dict[int, int]:
    """Each member's sample of metric ``name``, in milli-units, by index."""
    return {i: milli(m.usage[name]) for i, m in enumerate(members) if name in m.usage}


def _requests(members: Sequence[Member], resource: str) -> dict[int, int]:
    """calculateRequests: every member's request, or the metric cannot be computed."""
    found = {}
    for index, member in enumerate(members):
        if resource not in member.requests:
            label = member.name or f"members[{index}]"
            raise MetricUnavailable(f"missing request for {resource} on member {label}")
        found[index] = milli(member.requests[resource])
    return found


def resource_utilization_ratio(samples: Mapping[int, int], requests: Mapping[int, int],
                               target_utilization: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (usage ratio, utilization %, raw average in milli)."""
    total = requested = entries = 0
    for index, value in samples.items():
        if index not in requests:
            continue
        total += value
        requested += requests[index]
        entries += 1
    return _utilization_ratio(total, requested, entries, target_utilization)


def _utilization_ratio(total: int, requested: int, entries: int,
                       target_utilization: int) -> tuple[float, int, int]:
    if requested == 0:
        raise MetricUnavailable("no metrics returned matched known members")
    utilization = total * 100 // requested
    return utilization / target_utilization, utilization, total // entries


def metric_usage_ratio(samples: Mapping[int, int], target: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (usage ratio, average in milli)."""
    return _usage_ratio(sum(samples.values()), len(samples), target)


def _usage_ratio(total: int, entries: int, target: int) -> tuple[float, int]:
    average = total // entries
    return average / target, average


def _ready_proposal(current: int, ratio: float, ready: int, tolerances: Tolerances) -> int:
    """The proposal when no member is set aside or missing: ``current`` within tolerance."""
    if tolerances.is_within(ratio):
        return current
    return _ceil(ratio * ready)


def _direction_flips(ratio: float, new_ratio: float) -> bool:
    return (ratio < 1.0 and new_ratio > 1.0) or (ratio > 1.0 and new_ratio < 1.0)


def _readied(members: Sequence[Member], name: str, resource: str | None,
             readiness: Readiness) -> tuple[dict[int, int], Grouped]:
    samples = samples_of(members, name)
    if not members:
        raise MetricUnavailable("the group has no members")
    grouped = group_members(members, samples, resource, readiness)
    for index in grouped.ignored | grouped.unready:
        samples.pop(index, None)
    if not samples:
        period = readiness.cpu_initialization_period_s
        live = [m for i, m in enumerate(members) if i not in grouped.ignored]
        if live and all(m.state in PENDING_STATES or _started_within(m, period) for m in live):
            raise MembersInitializing(
                f"every member is within its initialization period (booting, or started less than "
                f"{period:g} s ago, [scaling] cpu_initialization_period): no sample counts yet")
        raise MetricUnavailable("did not receive metrics for targeted members (members might be unready)")
    return samples, grouped


def resource_replicas(current: int, target_utilization: int, resource: str, tolerances: Tolerances,
                      members: Members, readiness: Readiness) -> tuple[int, int]:
    """GetResourceReplicas: (proposed count, utilization % of the requests)."""
    if isinstance(members, SettledMembers):
        ratio, utilization, _ = _utilization_ratio(members.totals[resource], members.requested[resource],
                                                   members.count, target_utilization)
        return _ready_proposal(current, ratio, members.count, tolerances), utilization
    samples, grouped = _readied(members, resource, resource, readiness)
    requests = _requests(members, resource)
    ratio, utilization, _ = resource_utilization_ratio(samples, requests, target_utilization)

    scale_up_with_unready = bool(grouped.unready) and ratio > 1.0
    if not scale_up_with_unready and not grouped.missing:
        return _ready_proposal(current, ratio, grouped.ready_count, tolerances), utilization

    # On a scale-down a member without a sample counts as using all of its request
    # (or the target, for targets above 100 %).
    fallback = max(100, target_utilization)
    _assume_the_worst(samples, grouped, ratio, scale_up_with_unready,
                      lambda index: requests[index] * fallback // 100)

    new_ratio, _, _ = resource_utilization_ratio(samples, requests, target_utilization)
    return _rebalanced(current, ratio, new_ratio, len(samples), tolerances), utilization


def _assume_the_worst(samples: dict[int, int], grouped: Grouped, ratio: float, scale_up_with_unready: bool,
                      when_scaling_down: Callable[[int], int]) -> None:
    """Fill in the samples the rebalancing assumes: a missing member at
    ``when_scaling_down(index)`` on a scale-down and at 0 on a scale-up; an unready member
    at 0 when scaling up."""
    if grouped.missing and ratio != 1.0:
        for index in grouped.missing:
            samples[index] = when_scaling_down(index) if ratio < 1.0 else 0
    if scale_up_with_unready:
        for index in grouped.unready:
            samples[index] = 0


def _rebalanced(current: int, ratio: float, new_ratio: float, counted: int, tolerances: Tolerances) -> int:
    if tolerances.is_within(new_ratio) or _direction_flips(ratio, new_ratio):
        return current
    proposal = _ceil(new_ratio * counted)
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def plain_replicas(current: int, target: int, name: str, resource: str | None, tolerances: Tolerances,
                   members: Members, readiness: Readiness) -> tuple[int, int]:
    """calcPlainMetricReplicas (GetMetricReplicas, GetRawResourceReplicas): a target average
    value per member, in milli-units; returns (proposed count, average in milli)."""
    if isinstance(members, SettledMembers):
        ratio, average = _usage_ratio(members.totals[name], members.count, target)
        return _ready_proposal(current, ratio, members.count, tolerances), average
    samples, grouped = _readied(members, name, resource, readiness)
    ratio, average = metric_usage_ratio(samples, target)

    scale_up_with_unready = bool(grouped.unready) and ratio > 1.0
    if not scale_up_with_unready and not grouped.missing:
        return _ready_proposal(current, ratio, grouped.ready_count, tolerances), average

    _assume_the_worst(samples, grouped, ratio, scale_up_with_unready, lambda index: target)

    new_ratio, _ = metric_usage_ratio(samples, target)
    return _rebalanced(current, ratio, new_ratio, len(samples), tolerances), average


def ready_count(members: Members) -> int:
    """getReadyPodsCount: members running and ready."""
    if isinstance(members, SettledMembers):
        return members.count
    if not members:
        raise MetricUnavailable("the group has no members")
    return sum(1 for m in members if m.state == states.ACTIVE and m.ready)


def external_replicas(current: int, target: int, value: int, tolerances: Tolerances,
                      members: Members) -> int:
    """GetExternalMetricReplicas: a target value for the whole group (milli-units)."""
    ratio = value / target
    if current == 0:
        return _ceil(ratio)
    if tolerances.is_within(ratio):
        return current
    proposal = ratio * ready_count(members)
    return MAX_INT32 if proposal > MAX_INT32 else _ceil(proposal)


def external_per_member_replicas(live: int, target: int, value: int,
                                 tolerances: Tolerances) -> tuple[int, int | None]:
    """GetExternalPerPodMetricReplicas: a target average per member; ``live`` members
    (Kubernetes' status replicas). Returns (proposed count, average in milli, None when
    there is no live member to divide by)."""
    proposal = live
    ratio = value / (target * live) if live else math.inf if value else math.nan
    if not tolerances.is_within(ratio):
        wanted = math.ceil(value / target)
        proposal = MAX_INT32 if wanted > MAX_INT32 else wanted
    average = min(math.ceil(value / live), MAX_INT64) if live else None
    return proposal, average
