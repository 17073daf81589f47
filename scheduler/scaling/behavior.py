"""Scaling behavior: stabilization windows and rate limits, between the metrics and the group.

A translation of Kubernetes' HorizontalPodAutoscaler controller (horizontal.go:
stabilizeRecommendationWithBehaviors, convertDesiredReplicasWithBehaviorRate,
calculateScaleUpLimitWithScalingRules, calculateScaleDownLimitWithBehaviors,
getReplicasChangePerPeriod). Time comes in as ages, in seconds before this sync.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.scaling.spec import (
    INSTANCES,
    PERCENT,
    SELECT_DISABLED,
    SELECT_MIN,
    Behavior,
    GroupSpec,
    Recommendation,
    ScaleEvent,
    ScalingRules,
)

MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)

SCALE_UP_STABILIZED = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
READY_FOR_NEW_SCALE = "ReadyForNewScale"
SCALE_UP_LIMIT = "ScaleUpLimit"
SCALE_DOWN_LIMIT = "ScaleDownLimit"
TOO_MANY_REPLICAS = "TooManyReplicas"
TOO_FEW_REPLICAS = "TooFewReplicas"
DESIRED_WITHIN_RANGE = "DesiredWithinRange"


@dataclass(frozen=True)
class Outcome:
    """A reason and its message, as Kubernetes words its conditions."""

    reason: str
    message: str


@dataclass(frozen=True)
class Normalized:
    """normalizeDesiredReplicasWithBehaviors' result."""

    desired: int
    stabilized: int
    able_to_scale: Outcome  # ReadyForNewScale, ScaleUpStabilized or ScaleDownStabilized
    limited: bool  # the rate or min/max changed the stabilized recommendation
    scaling_limited: Outcome


def stabilize(current: int, desired: int, recommendations: Sequence[Recommendation],
              up_window_s: int, down_window_s: int) -> tuple[int, Outcome]:
    """stabilizeRecommendationWithBehaviors: the count kept between the lowest recommendation
    of the scale-up window and the highest of the scale-down window, both including
    ``desired``."""
    up = down = desired
    for rec in recommendations:
        if rec.age_s < up_window_s:
            up = min(rec.replicas, up)
        if rec.age_s < down_window_s:
            down = max(rec.replicas, down)
    recommendation = current
    if recommendation < up:
        recommendation = up
    if recommendation > down:
        recommendation = down
    if desired >= current:
        outcome = Outcome(SCALE_UP_STABILIZED, "recent recommendations were lower than current one, "
                          "applying the lowest recent recommendation")
    else:
        outcome = Outcome(SCALE_DOWN_STABILIZED, "recent recommendations were higher than current one, "
                          "applying the highest recent recommendation")
    return recommendation, outcome


def replicas_change_in_period(period_s: int, changes: Sequence[tuple[float, int]]) -> int:
    """getReplicasChangePerPeriod: the sum of the changes younger than ``period_s``."""
    return sum(change for age_s, change in changes if age_s < period_s)


def split_events(events: Sequence[ScaleEvent]) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """The scale-up and scale-down events as (age, count added) and (age, count removed)."""
    up = [(e.age_s, e.change) for e in events if e.change > 0]
    down = [(e.age_s, -e.change) for e in events if e.change < 0]
    return up, down


def _period_start(current: int, period_s: int, up: Sequence[tuple[float, int]],
                  down: Sequence[tuple[float, int]]) -> int:
    return current - replicas_change_in_period(period_s, up) + replicas_change_in_period(period_s, down)


def scale_up_limit(current: int, up: Sequence[tuple[float, int]], down: Sequence[tuple[float, int]],
                   rules: ScalingRules) -> int:
    """calculateScaleUpLimitWithScalingRules: the most members the policies allow."""
    if rules.select_policy == SELECT_DISABLED:
        return current
    pick, result = (min, MAX_INT32) if rules.select_policy == SELECT_MIN else (max, MIN_INT32)
    for policy in rules.policies:
        start = _period_start(current, policy.period_s, up, down)
        if policy.type == INSTANCES:
            proposed = start + policy.value
        else:
            # Rounded up, or a small group could never grow by a percentage.
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        result = pick(result, proposed)
    return result


def scale_down_limit(current: int, up: Sequence[tuple[float, int]], down: Sequence[tuple[float, int]],
                     rules: ScalingRules) -> int:
    """calculateScaleDownLimitWithBehaviors: the fewest members the policies allow."""
    if rules.select_policy == SELECT_DISABLED:
        return current
    pick, result = (max, MIN_INT32) if rules.select_policy == SELECT_MIN else (min, MAX_INT32)
    for policy in rules.policies:
        start = _period_start(current, policy.period_s, up, down)
        if policy.type == INSTANCES:
            proposed = start - policy.value
        else:
            assert policy.type == PERCENT
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = pick(result, proposed)
    return result


def convert_with_rate(current: int, desired: int, low: int, high: int, behavior: Behavior,
                      events: Sequence[ScaleEvent]) -> tuple[int, Outcome]:
    """convertDesiredReplicasWithBehaviorRate: ``desired`` within the rate limits and min/max."""
    up, down = split_events(events)
    if desired > current:
        limit = max(scale_up_limit(current, up, down, behavior.scale_up), current)
        if high > limit:
            allowed, outcome = limit, Outcome(
                SCALE_UP_LIMIT, "the desired member count is increasing faster than the maximum scale rate")
        else:
            allowed, outcome = high, Outcome(
                TOO_MANY_REPLICAS, "the desired member count is more than the maximum member count")
        if desired > allowed:
            return allowed, outcome
    elif desired < current:
        limit = min(scale_down_limit(current, up, down, behavior.scale_down), current)
        if low < limit:
            allowed, outcome = limit, Outcome(
                SCALE_DOWN_LIMIT, "the desired member count is decreasing faster than the maximum scale rate")
        else:
            allowed, outcome = low, Outcome(
                TOO_FEW_REPLICAS, "the desired member count is less than the minimum member count")
        if desired < allowed:
            return allowed, outcome
    return desired, Outcome(DESIRED_WITHIN_RANGE, "the desired count is within the acceptable range")


def normalize(current: int, desired: int, low: int, high: int, behavior: Behavior,
              recommendations: Sequence[Recommendation], events: Sequence[ScaleEvent]) -> Normalized:
    """normalizeDesiredReplicasWithBehaviors: stabilize, then apply the rate and min/max."""
    stabilized, outcome = stabilize(current, desired, recommendations,
                                    behavior.scale_up.stabilization_window_s,
                                    behavior.scale_down.stabilization_window_s)
    if stabilized == desired:
        outcome = Outcome(READY_FOR_NEW_SCALE, "recommended size matches current size")
    final, limited = convert_with_rate(current, stabilized, low, high, behavior, events)
    return Normalized(final, stabilized, outcome, final != stabilized, limited)


def kept_recommendations(recommendations: Sequence[Recommendation], behavior: Behavior,
                         ) -> list[Recommendation]:
    """The recommendations some window still covers (older ones never count again)."""
    horizon = max(behavior.scale_up.stabilization_window_s, behavior.scale_down.stabilization_window_s)
    return [r for r in recommendations if r.age_s < horizon]


def kept_scale_events(events: Sequence[ScaleEvent], behavior: Behavior) -> list[ScaleEvent]:
    """The scale events some policy period still covers, per direction."""
    up = behavior.scale_up.longest_period_s
    down = behavior.scale_down.longest_period_s
    return [e for e in events if e.age_s < (up if e.change > 0 else down)]


def history_horizon_s(spec: GroupSpec) -> float:
    """How far back a group's history is read: its longest stabilization window plus its
    longest policy period; older records are pruned."""
    rules = (spec.behavior.scale_up, spec.behavior.scale_down)
    return max(r.stabilization_window_s for r in rules) + max(r.longest_period_s for r in rules)
