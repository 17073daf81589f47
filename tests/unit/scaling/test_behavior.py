"""Kubernetes' controller tests (horizontal_test.go), through the what-if input.

TestScalingWithRules and TestNormalizeDesiredReplicasWithBehavior test one step of the
controller with a given "prenormalized" count; here that count comes from an external
metric with a target average of 1 per member (its value is the count it asks for), and
the group has ``current`` live members, so the whole sync runs as the command runs it.
Each case keeps its Kubernetes name as the pytest id.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.scaling import behavior
from scheduler.scaling.spec import Behavior, Recommendation, ScaleEvent
from tests.unit.scaling.helpers import cpu_members, member, what_if

ASKS = {"type": "external", "name": "asks", "target_average": 1}


def rules(pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0,
          window: int = 0) -> dict[str, Any]:
    """generateScalingRules: select max, the policies given (0: none), the window."""
    policies = []
    if pods:
        policies.append({"type": "instances", "value": pods, "period_s": pods_period})
    if percent:
        policies.append({"type": "percent", "value": percent, "period_s": percent_period})
    found: dict[str, Any] = {"stabilization_window_s": window, "select_policy": "max"}
    if policies:
        found["policies"] = policies
    return found


def uniform(changes: list[int], period_s: int, sign: int) -> list[dict[str, Any]]:
    """generateEventsUniformDistribution: each event in the middle of its share of the period."""
    segment = period_s / len(changes)
    return [{"age_s": int(period_s - segment * (i + 1) + segment / 2), "change": sign * change}
            for i, change in enumerate(changes)]


def sync(current: int, asked: int, low: int, high: int, up: dict[str, Any] | None = None,
         down: dict[str, Any] | None = None, ups: list[int] | None = None, downs: list[int] | None = None,
         events_period: int = 120, recommendations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    wanted: dict[str, Any] = {}
    if up is not None:
        wanted["scale_up"] = up
    if down is not None:
        wanted["scale_down"] = down
    events = uniform(ups, events_period, 1) if ups else []
    events += uniform(downs, events_period, -1) if downs else []
    return {
        "spec": {"min": low, "max": high, "metrics": [ASKS], "behavior": wanted},
        "current": current,
        "members": [member()] * current,
        "external": {"asks": asked},
        "recommendations": recommendations or [],
        "scale_events": events,
    }


RULES = [
    # TestScalingWithRules: (name, input, expected count, expected condition)
    ("prenormalized desired replicas within range", sync(5, 7, 3, 8), 7, "DesiredWithinRange"),
    ("prenormalized desired replicas < minReplicas", sync(3, 1, 2, 8), 2, "TooFewReplicas"),
    ("prenormalized desired replicas within range when minReplicas is 0", sync(1, 0, 0, 10), 0,
     "DesiredWithinRange"),
    ("maxReplicas is the limit because maxReplicas < scaleUpLimit", sync(20, 1000, 1, 10), 10,
     "TooManyReplicas"),
    ("desired replica count is more than the maximum replica count", sync(100, 1000, 100, 150), 150,
     "TooManyReplicas"),
    ("scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
     sync(3, 1000, 1, 2000, up=rules(0, 0, 1, 60)), 4, "ScaleUpLimit"),
    ("scaleUp with default behavior", sync(10, 50, 1, 1000), 20, "ScaleUpLimit"),
    ("scaleUp with pods policy larger than percent policy",
     sync(10, 500, 1, 1000, up=rules(100, 60, 100, 60)), 110, "ScaleUpLimit"),
    ("scaleUp with percent policy larger than pods policy",
     sync(10, 500, 1, 1000, up=rules(2, 60, 100, 60)), 20, "ScaleUpLimit"),
    ("scaleUp with spec MaxReplicas limitation with large pod policy",
     sync(10, 50, 1, 1000, up=rules(100, 60)), 50, "DesiredWithinRange"),
    ("scaleUp with spec MaxReplicas limitation with large percent policy",
     sync(10, 50, 1, 1000, up=rules(10000, 60)), 50, "DesiredWithinRange"),
    ("scaleUp with pod policy limitation", sync(10, 50, 1, 1000, up=rules(30, 60)), 40, "ScaleUpLimit"),
    ("scaleUp with percent policy limitation", sync(10, 50, 1, 1000, up=rules(0, 0, 200, 60)), 30,
     "ScaleUpLimit"),
    ("scaleDown with percent policy larger than pod policy",
     sync(100, 2, 1, 1000, down=rules(20, 60, 1, 60, 300)), 80, "ScaleDownLimit"),
    ("scaleDown with pod policy larger than percent policy",
     sync(100, 2, 1, 1000, down=rules(2, 60, 1, 60, 300)), 98, "ScaleDownLimit"),
    ("scaleDown with spec MinReplicas=nil limitation with large pod policy",
     sync(10, 0, 1, 1000, down=rules(100, 60, 0, 0, 300)), 1, "TooFewReplicas"),
    ("scaleDown with spec MinReplicas limitation with large percent policy",
     sync(10, 2, 5, 1000, down=rules(0, 0, 100, 60, 300)), 5, "TooFewReplicas"),
    ("scaleDown with pod policy limitation", sync(10, 2, 1, 1000, down=rules(5, 60, 0, 0, 300)), 5,
     "ScaleDownLimit"),
    ("scaleDown with percent policy limitation", sync(10, 5, 1, 1000, down=rules(0, 0, 50, 60, 300)), 5,
     "DesiredWithinRange"),
    ("scaleUp with spec MaxReplicas limitation with large pod policy and events",
     sync(100, 500, 1, 200, up=rules(300, 60), ups=[1, 5, 9]), 200, "TooManyReplicas"),
    ("scaleUp with spec MaxReplicas limitation with large percent policy and events",
     sync(100, 500, 1, 200, up=rules(0, 0, 10000, 60), ups=[1, 5, 9]), 200, "TooManyReplicas"),
    ("scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
     sync(100, 500, 1, 1000, up=rules(5, 120), ups=[1, 5, 9]), 100, "ScaleUpLimit"),
    ("scaleUp with pod policy and previous scale up events",
     sync(100, 500, 1, 1000, up=rules(150, 120), ups=[1, 5, 9]), 235, "ScaleUpLimit"),
    ("scaleUp with percent policy and previous scale up events",
     sync(100, 500, 1, 1000, up=rules(0, 0, 200, 120), ups=[1, 5, 9]), 255, "ScaleUpLimit"),
    ("scaleUp with percent policy and previous scale up and down events",
     sync(6, 24, 1, 1000, up=rules(0, 0, 300, 300), ups=[4], downs=[2]), 16, "ScaleUpLimit"),
    ("scaleDown with default policy and previous events",
     sync(10, 5, 1, 1000, downs=[1, 5, 9]), 5, "DesiredWithinRange"),
    ("scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
     sync(100, 0, 1, 1000, down=rules(115, 120, 0, 0, 300), downs=[1, 5, 9]), 1, "TooFewReplicas"),
    ("scaleDown with spec MinReplicas limitation with large pod policy and previous events",
     sync(100, 0, 5, 1000, down=rules(130, 120, 0, 0, 300), downs=[1, 5, 9]), 5, "TooFewReplicas"),
    ("scaleDown with spec MinReplicas limitation with large percent policy and previous events",
     sync(100, 2, 5, 1000, down=rules(0, 0, 100, 120, 300), downs=[1, 5, 9]), 5, "TooFewReplicas"),
    ("scaleDown with pod policy limitation and previous events",
     sync(100, 2, 1, 1000, down=rules(5, 120, 0, 0, 300), downs=[1, 5, 9]), 100, "ScaleDownLimit"),
    ("scaleDown with percent policy limitation and previous events",
     sync(100, 0, 1, 1000, down=rules(0, 0, 50, 120, 300), downs=[2, 4, 6]), 56, "ScaleDownLimit"),
    ("scaleDown with percent policy and previous scale up and down events",
     sync(10, 1, 1, 1000, down=rules(0, 0, 50, 180, 0), ups=[2], downs=[4]), 6, "ScaleDownLimit"),
    ("scaleDown with previous events preventing further scale down",
     sync(100, 0, 1, 1000, down=rules(0, 0, 10, 120, 300), downs=[10, 10, 10]), 100, "ScaleDownLimit"),
    ("scaleDown with with previous events still allowing more scale down",
     sync(10, 5, 1, 1000, down=rules(0, 0, 1000, 120, 300), downs=[10, 10, 10]), 5, "DesiredWithinRange"),
    ("check 'outdated' flag for events for one behavior for up",
     sync(100, 200, 1, 1000, up=rules(1000, 60), ups=[8, 12, 9, 11]), 200, "DesiredWithinRange"),
    ("check that events were not marked 'outdated' for two different policies in the behavior for up",
     sync(100, 200, 1, 1000, up=rules(1000, 120, 100, 60), ups=[8, 12, 9, 11]), 200, "DesiredWithinRange"),
    ("check that events were marked 'outdated' for two different policies in the behavior for up",
     sync(100, 200, 1, 1000, up=rules(1000, 30, 100, 60), ups=[8, 12, 9, 11]), 200, "DesiredWithinRange"),
    ("check 'outdated' flag for events for one behavior for down",
     sync(100, 5, 1, 1000, down=rules(1000, 60, 0, 0, 300), downs=[8, 12, 9, 11]), 5, "DesiredWithinRange"),
    ("check that events were not marked 'outdated' for two different policies in the behavior for down",
     sync(100, 5, 1, 1000, down=rules(1000, 120, 100, 60, 300), downs=[8, 12, 9, 11]), 5,
     "DesiredWithinRange"),
    ("check that events were marked 'outdated' for two different policies in the behavior for down",
     sync(100, 5, 1, 1000, down=rules(1000, 30, 100, 60, 300), downs=[8, 12, 9, 11]), 5,
     "DesiredWithinRange"),
]


@pytest.mark.parametrize("data,desired,reason", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_kubernetes_scaling_with_rules(data: dict[str, Any], desired: int, reason: str) -> None:
    found = what_if(data)
    assert found["desired"] == desired
    assert (found["limited_by"] or "DesiredWithinRange") == reason
    # A current count above max is brought to max before any metric is read.
    above_max = data["current"] > data["spec"]["max"]
    assert [m["proposal"] for m in found["metrics"]] == ([] if above_max else [data["external"]["asks"]])


def _ago(pairs: list[tuple[int, float]]) -> list[dict[str, Any]]:
    return [{"age_s": age, "replicas": replicas} for replicas, age in pairs]


#: Policies that never limit, so that only the stabilization shows.
OPEN_UP = [{"type": "instances", "value": 1000, "period_s": 15}]

STABILIZE = [
    # TestNormalizeDesiredReplicasWithBehavior:
    # (name, recommendations as (count, age), current, asked, expected, up window, down window)
    ("empty recommendations for scaling down", [], 100, 5, 5, 0, 0),
    ("simple scale down stabilization", [(4, 120), (5, 60)], 100, 3, 5, 0, 180),
    ("simple scale up stabilization", [(4, 120), (5, 60)], 1, 7, 4, 300, 0),
    ("no scale down stabilization", [(1, 120), (2, 60)], 100, 3, 3, 300, 0),
    ("no scale up stabilization", [(4, 120), (5, 60)], 1, 3, 3, 0, 300),
    ("no scale down stabilization, reuse recommendation element", [(10, 600), (9, 540)], 100, 3, 3, 0, 0),
    ("no scale up stabilization, reuse recommendation element", [(10, 600), (9, 540)], 1, 100, 100, 0, 0),
    ("scale down stabilization, reuse one of obsolete recommendation element",
     [(10, 600), (4, 60), (5, 120), (9, 540)], 100, 3, 5, 0, 180),
    ("scale up stabilization, reuse one of obsolete recommendation element",
     [(10, 6000), (6, 60), (5, 120), (9, 180)], 1, 100, 5, 300, 0),
    ("scale up and down stabilization, do not scale up when prenormalized rec goes down",
     [(2, 6000), (3, 180)], 2, 1, 2, 300, 300),
    ("scale up and down stabilization, do not scale down when prenormalized rec goes up",
     [(2, 6000), (1, 180)], 2, 3, 2, 300, 300),
]


@pytest.mark.parametrize("recs,current,asked,expected,up_window,down_window", [s[1:] for s in STABILIZE],
                         ids=[s[0] for s in STABILIZE])
def test_kubernetes_normalize_desired_replicas_with_behavior(
        recs: list[tuple[int, float]], current: int, asked: int, expected: int, up_window: int,
        down_window: int) -> None:
    data = sync(current, asked, 1, 1000, recommendations=_ago(recs),
                up={"stabilization_window_s": up_window, "policies": OPEN_UP},
                down={"stabilization_window_s": down_window})
    found = what_if(data)
    assert found["desired"] == expected
    assert found["record"]["recommendation"] == asked
    stabilized = expected != asked
    assert found["limited_by"] == (("ScaleUpStabilized" if asked >= current else "ScaleDownStabilized")
                                   if stabilized else None)


def _cpu_sync(current: int, low: int, high: int, levels: list[int], requests: list[float], target: int,
              **more: Any) -> dict[str, Any]:
    metrics = [{"type": "resource", "name": "cpu", "target_utilization": target}] + more.pop("metrics", [])
    return {"spec": {"min": low, "max": high, "metrics": metrics}, "current": current,
            "members": cpu_members(levels, requests=requests, count=max(current, len(levels))), **more}


def test_kubernetes_zero_replicas() -> None:
    """TestZeroReplicas: a desired count of 0 with min 3: paused, scaling disabled."""
    found = what_if(_cpu_sync(0, 3, 5, [], [], 90))
    assert found["desired"] == 0 and found["limited_by"] == "ScalingDisabled"
    assert [(c["type"], c["status"], c["reason"]) for c in found["conditions"]] == [
        ("AbleToScale", "True", "SucceededGetScale"), ("ScalingActive", "False", "ScalingDisabled")]
    assert found["record"] == {"recommendation": None, "scale_event": None}


def test_kubernetes_too_few_replicas() -> None:
    """TestTooFewReplicas: below min: brought to min, no metric read."""
    found = what_if(_cpu_sync(2, 3, 5, [], [], 90))
    assert (found["desired"], found["limited_by"], found["metrics"]) == (3, "TooFewReplicas", [])
    assert found["record"] == {"recommendation": None, "scale_event": 1}


def test_kubernetes_too_many_replicas() -> None:
    """TestTooManyReplicas: above max: brought to max."""
    found = what_if(_cpu_sync(10, 3, 5, [], [], 90))
    assert (found["desired"], found["limited_by"]) == (5, "TooManyReplicas")
    assert found["record"] == {"recommendation": None, "scale_event": -5}
    assert found["conditions"][0] == {
        "type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
        "message": "the scaling controller was able to update the desired count to 5"}


def test_a_rescale_says_so_and_a_count_kept_says_why() -> None:
    """reconcileAutoscaler: once the scale is updated AbleToScale is SucceededRescale;
    a count the metrics would keep is ReadyForNewScale, one a window holds is Stabilized."""
    up = what_if(_cpu_sync(3, 1, 10, [900, 900, 900], [1.0, 1.0, 1.0], 50))
    assert (up["desired"], up["conditions"][0]["reason"]) == (6, "SucceededRescale")
    kept = what_if(_cpu_sync(3, 1, 10, [500, 500, 500], [1.0, 1.0, 1.0], 50))
    assert (kept["desired"], kept["conditions"][0]["reason"], kept["conditions"][0]["message"]) == (
        3, "ReadyForNewScale", "recommended size matches current size")
    held = what_if(_cpu_sync(3, 1, 10, [100, 100, 100], [1.0, 1.0, 1.0], 50,
                             recommendations=[{"age_s": 60, "replicas": 3}]))
    assert (held["desired"], held["conditions"][0]["reason"]) == (3, "ScaleDownStabilized")


def test_kubernetes_min_replicas() -> None:
    """TestMinReplicas: the metric asks for 1, min is 2."""
    found = what_if(_cpu_sync(3, 2, 5, [10, 95, 10], [0.9, 1.0, 1.1], 90, recommendations=[]))
    assert (found["desired"], found["limited_by"]) == (2, "TooFewReplicas")
    assert found["metrics"][0]["current"] == 3 and found["metrics"][0]["proposal"] == 1


def test_kubernetes_max_replicas() -> None:
    """TestMaxReplicas: the metric asks for 21, max is 5."""
    found = what_if(_cpu_sync(3, 2, 5, [8000, 9500, 1000], [0.9, 1.0, 1.1], 90))
    assert (found["desired"], found["limited_by"]) == (5, "TooManyReplicas")
    assert found["metrics"][0]["proposal"] == 21


QPS_TARGET = {"type": "external", "name": "qps", "target_value": 0.1}


def test_kubernetes_scale_up_one_metric_empty() -> None:
    """TestScaleUpOneMetricEmpty: the external metric cannot be read; cpu scales up anyway."""
    found = what_if(_cpu_sync(3, 2, 6, [300, 400, 500], [1.0] * 3, 30, metrics=[QPS_TARGET]))
    assert found["desired"] == 4
    assert found["metrics"][1]["proposal"] is None
    assert found["metrics"][1]["error"] == "no value for external metric qps"


def test_kubernetes_no_scale_down_one_metric_empty() -> None:
    """TestNoScaleDownOneMetricEmpty: cpu asks for fewer, the external metric cannot be read:
    no scale-down, ScalingActive false with the failed metric's reason."""
    found = what_if(_cpu_sync(5, 2, 6, [100, 300, 500, 250, 250], [1.0] * 5, 50, metrics=[QPS_TARGET],
                              recommendations=[]))
    assert (found["desired"], found["limited_by"]) == (5, "FailedGetExternalMetric")
    assert found["metrics"][0]["proposal"] == 3
    active = [c for c in found["conditions"] if c["type"] == "ScalingActive"]
    assert [(c["status"], c["reason"]) for c in active] == [("False", "FailedGetExternalMetric")]
    assert found["record"] == {"recommendation": None, "scale_event": None}


def test_first_sync_records_the_current_count_before_scaling_down() -> None:
    """A group never synced (no "recommendations") counts its current size as a
    recommendation of now, so the 300 s scale-down window holds it (recordInitialRecommendation)."""
    data = _cpu_sync(5, 1, 10, [100, 300, 500, 250, 250], [1.0] * 5, 50)
    found = what_if(data)
    assert (found["desired"], found["limited_by"]) == (5, "ScaleDownStabilized")
    assert found["record"] == {"recommendation": 3, "scale_event": None}
    data["recommendations"] = []
    assert what_if(data)["desired"] == 3


def test_select_policy_min_takes_the_smaller_change() -> None:
    """select min: the policy allowing the smallest change wins, both ways."""
    up = {"select_policy": "min", "policies": [{"type": "instances", "value": 4, "period_s": 15},
                                                {"type": "percent", "value": 100, "period_s": 15}]}
    assert what_if(sync(10, 50, 1, 1000, up=up))["desired"] == 14
    down = {"stabilization_window_s": 0, "select_policy": "min",
            "policies": [{"type": "instances", "value": 4, "period_s": 15},
                         {"type": "percent", "value": 50, "period_s": 15}]}
    assert what_if(sync(10, 1, 1, 1000, down=down))["desired"] == 6


def test_select_policy_disabled_stops_that_direction() -> None:
    disabled = {"select_policy": "disabled"}
    found = what_if(sync(10, 50, 1, 1000, up=disabled))
    assert (found["desired"], found["limited_by"]) == (10, "ScaleUpLimit")
    found = what_if(sync(10, 2, 1, 1000, down={**disabled, "stabilization_window_s": 0}))
    assert (found["desired"], found["limited_by"]) == (10, "ScaleDownLimit")
    assert found["record"] == {"recommendation": 2, "scale_event": None}


def test_a_percent_scale_down_limit_is_truncated_as_kubernetes_does() -> None:
    """10 x (1 - 70/100) is 3.0000000000000004 in floating point: the limit is 3, not 4."""
    down = {"stabilization_window_s": 0, "policies": [{"type": "percent", "value": 70, "period_s": 15}]}
    found = what_if(sync(10, 1, 1, 1000, down=down))
    assert (found["desired"], found["limited_by"]) == (3, "ScaleDownLimit")


def test_history_kept_is_what_some_window_or_period_still_covers() -> None:
    """What the controller keeps: recommendations younger than the longer window, scale
    events younger than their direction's longest policy period."""
    recs = [Recommendation(299, 4), Recommendation(300, 5), Recommendation(10, 6)]
    assert behavior.kept_recommendations(recs, Behavior()) == [recs[0], recs[2]]
    events = [ScaleEvent(14, 2), ScaleEvent(15, 3), ScaleEvent(14.5, -1), ScaleEvent(20, -2)]
    assert behavior.kept_scale_events(events, Behavior()) == [events[0], events[2]]
