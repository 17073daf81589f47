"""Kubernetes' replica calculator tests (replica_calculator_test.go), through the what-if input.

Each case keeps its Kubernetes test name as the pytest id. Pods are members; a pod's
cpu request is the flavor's vCPUs; levels are in millicores as in Kubernetes.
The cases about containers, object metrics and superfluous metrics have no member
counterpart and are left out.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.unit.scaling.helpers import (
    COOL,
    HOT,
    TESTING_READINESS,
    cpu_members,
    plain_members,
    spec,
    what_if,
)

CPU30 = {"type": "resource", "name": "cpu", "target_utilization": 30}
CPU50 = {"type": "resource", "name": "cpu", "target_utilization": 50}
CPU100 = {"type": "resource", "name": "cpu", "target_utilization": 100}


def qps(target: float) -> dict[str, Any]:
    return {"type": "instance", "name": "qps", "target_average": target}


def external(target_value: float | None = None, target_average: float | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "external", "name": "qps"}
    if target_value is not None:
        found["target_value"] = target_value
    if target_average is not None:
        found["target_average"] = target_average
    return found


def case(current: int, metric: dict[str, Any], members: list[dict[str, Any]],
         external_value: float | None = None) -> dict[str, Any]:
    data = {"spec": spec(metric), "current": current, "members": members, "recommendations": [],
            **TESTING_READINESS}
    if external_value is not None:
        data["external"] = {"qps": external_value}
    return data


F, T = False, True

CASES = [
    # (Kubernetes test name, input, expected proposal, expected current)
    ("TestReplicaCalcScaleUp",
     case(3, CPU30, cpu_members([300, 500, 700])), 5, 50),
    ("TestReplicaCalcScaleUpUnreadyLessScale",
     case(3, CPU30, cpu_members([300, 500, 700], readiness=[F, T, T])), 4, 60),
    ("TestReplicaCalcScaleUpHotCpuLessScale",
     case(3, CPU30, cpu_members([300, 500, 700], started=[HOT, COOL, COOL])), 4, 60),
    ("TestReplicaCalcScaleUpUnreadyNoScale",
     case(3, CPU30, cpu_members([400, 500, 700], readiness=[T, F, F])), 3, 40),
    ("TestReplicaCalcScaleHotCpuNoScale",
     case(3, CPU30, cpu_members([400, 500, 700], readiness=[T, F, F], started=[COOL, HOT, HOT])), 3, 40),
    ("TestReplicaCalcScaleUpIgnoresFailedPods",
     case(2, CPU30, cpu_members([500, 700], readiness=[T, T, F, F],
                                states=["ACTIVE", "ACTIVE", "ERROR", "ERROR"])), 4, 60),
    ("TestReplicaCalcScaleUpIgnoresDeletionPods",
     case(2, CPU30, cpu_members([500, 700], readiness=[T, T, F, F],
                                states=["ACTIVE", "ACTIVE", "DELETING", "DELETING"])), 4, 60),
    ("TestReplicaCalcScaleUpCM",
     case(3, qps(15), plain_members("qps", [20, 10, 30], 3)), 4, 20),
    ("TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
     case(3, qps(15), plain_members("qps", [50, 10, 30], 3, readiness=[T, T, F], started=[COOL, COOL, HOT])),
     6, 30),
    ("TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
     case(3, qps(15), plain_members("qps", [50, 15, 30], 3, readiness=[F, T, F], started=[HOT, COOL, HOT])),
     7, 31.666),
    ("TestReplicaCalcScaleUpCMExternal",
     case(1, qps(4.4), plain_members("qps", [8.6], 1)), 2, 8.6),
    ("TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods",
     case(3, external(target_value=4.4), cpu_members([], readiness=[F, T, F]), 8.6), 2, 8.6),
    ("TestReplicaCalcScaleUpPerPodCMExternal",
     case(3, external(target_average=2.15), cpu_members([], count=3), 8.6), 4, 2.867),
    ("TestReplicaCalcScaleDown",
     case(5, CPU50, cpu_members([100, 300, 500, 250, 250])), 3, 28),
    ("TestReplicaCalcScaleDownCM",
     case(5, qps(20), plain_members("qps", [12] * 5, 5)), 3, 12),
    ("TestReplicaCalcScaleDownCMExternal",
     case(5, external(target_value=14.334), cpu_members([], count=5), 8.6), 3, 8.6),
    ("TestReplicaCalcScaleDownPerPodCMExternal",
     case(5, external(target_average=2.867), cpu_members([], count=5), 8.6), 3, 1.72),
    ("TestReplicaCalcScaleDownExcludeUnreadyPods",
     case(5, CPU50, cpu_members([100, 300, 500, 250, 250], readiness=[T, T, T, F, F])), 2, 30),
    ("TestReplicaCalcScaleDownExcludeUnscheduledPods",
     case(5, CPU50, cpu_members([100], readiness=[T, F, F, F, F],
                                states=["ACTIVE", "SCHEDULING", "SCHEDULED", "BUILDING", "BUILDING"])),
     1, 10),
    ("TestReplicaCalcScaleDownIgnoreHotCpuPods",
     case(5, CPU50, cpu_members([100, 300, 500, 250, 250], started=[COOL, COOL, COOL, HOT, HOT])), 2, 30),
    ("TestReplicaCalcScaleDownIgnoresFailedPods",
     case(5, CPU50, cpu_members([100, 300, 500, 250, 250], readiness=[T, T, T, T, T, F, F],
                                states=["ACTIVE"] * 5 + ["ERROR"] * 2)), 3, 28),
    ("TestReplicaCalcScaleDownIgnoresDeletionPods",
     case(5, CPU50, cpu_members([100, 300, 500, 250, 250], readiness=[T, T, T, T, T, F, F],
                                states=["ACTIVE"] * 5 + ["DELETING"] * 2)), 3, 28),
    ("TestReplicaCalcTolerance",
     case(3, CPU100, cpu_members([1010, 1030, 1020], requests=[0.9, 1.0, 1.1])), 3, 102),
    ("TestReplicaCalcToleranceCM",
     case(3, qps(20), plain_members("qps", [20, 21, 21], 3)), 3, 20.666),
    ("TestReplicaCalcToleranceCMExternal",
     case(3, external(target_value=8.888), cpu_members([], count=3), 8.6), 3, 8.6),
    ("TestReplicaCalcTolerancePerPodCMExternal",
     case(3, external(target_average=2.9), cpu_members([], count=3), 8.6), 3, 2.867),
    ("TestReplicaCalcMissingMetrics",
     case(4, CPU100, cpu_members([400, 95], count=4)), 3, 24),
    ("TestPlainMetricReplicaCalcMissingMetricsNoChangeEq",
     case(5, qps(20), plain_members("qps", [20, 19, 21], 5)), 5, 20),
    ("TestReplicaCalcMissingMetricsNoChangeEq",
     case(2, CPU100, cpu_members([1000], count=2)), 2, 100),
    ("TestReplicaCalcMissingMetricsNoChangeGt",
     case(2, CPU100, cpu_members([1900], count=2)), 2, 190),
    ("TestReplicaCalcMissingMetricsNoChangeLt",
     case(2, CPU100, cpu_members([600], count=2)), 2, 60),
    ("TestReplicaCalcMissingMetricsUnreadyChange",
     case(3, CPU50, cpu_members([100, 450], readiness=[F, T, T])), 3, 45),
    ("TestReplicaCalcMissingMetricsHotCpuNoChange",
     case(3, CPU50, cpu_members([100, 450], started=[HOT, COOL, COOL])), 3, 45),
    ("TestReplicaCalcMissingMetricsUnreadyScaleUp",
     case(3, CPU50, cpu_members([100, 2000], readiness=[F, T, T])), 4, 200),
    ("TestReplicaCalcMissingMetricsHotCpuScaleUp",
     case(3, CPU50, cpu_members([100, 2000], readiness=[F, T, T], started=[HOT, COOL, COOL])), 4, 200),
    ("TestReplicaCalcMissingMetricsUnreadyScaleDown",
     case(4, CPU50, cpu_members([100, 100, 100], readiness=[F, T, T, T])), 3, 10),
    ("TestReplicaCalcMissingMetricsScaleDownTargetOver100",
     case(4, {"type": "resource", "name": "cpu", "target_utilization": 300},
          cpu_members([200, 100, 100], readiness=[F, T, T, T], requests=[1.0, 1.0, 2.0, 2.0])), 2, 6),
    ("TestReplicaCalcDuringRollingUpdateWithMaxSurge",
     case(2, CPU50, cpu_members([100, 100], count=3)), 2, 10),
    ("TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM",
     case(2, qps(17), plain_members("qps", [10, 10], 3)), 2, 10),
]


@pytest.mark.parametrize("data,proposal,current", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kubernetes_replica_calculator(data: dict[str, Any], proposal: int, current: float) -> None:
    found = what_if(data)["metrics"][0]
    assert (found["proposal"], found["current"]) == (proposal, current)


def _computed_tolerance_case(margin: float) -> tuple[dict[str, Any], int]:
    """TestReplicaCalcComputedToleranceAlgImplementation's arithmetic, as Kubernetes does it."""
    start_pods = 10
    used = start_pods * 150
    requested = 2 * used
    requested_to_used = float(requested // used)
    per_pod = requested // start_pods
    target = abs(1 / (requested_to_used * (1 - 0.1))) + margin
    percent = int(target * 100)
    final_pods = math.ceil(used / (requested * target) * start_pods)
    requests = [per_pod + d for d in (100, -100, 10, -10, 2, -2, 1, -1, 0, 0)]
    members = cpu_members([used // 10] * 10, requests=[r / 1000 for r in requests])
    metric = {"type": "resource", "name": "cpu", "target_utilization": percent}
    return case(start_pods, metric, members), final_pods


def test_kubernetes_computed_tolerance_scales_past_the_tolerance() -> None:
    """TestReplicaCalcComputedToleranceAlgImplementation, first half: just past the tolerance."""
    data, final_pods = _computed_tolerance_case(0.01)
    found = what_if(data)["metrics"][0]
    assert (found["proposal"], found["current"]) == (final_pods, 50)
    assert final_pods == 9


def test_kubernetes_computed_tolerance_keeps_within_the_tolerance() -> None:
    """TestReplicaCalcComputedToleranceAlgImplementation, second half: just within it."""
    data, _ = _computed_tolerance_case(0.004)
    assert what_if(data)["metrics"][0]["proposal"] == 10


def test_kubernetes_empty_cpu_request() -> None:
    """TestReplicaCalcEmptyCPURequest: a member without a cpu request: the metric fails."""
    data = case(1, CPU100, [{"state": "ACTIVE", "usage": {"cpu": 0.2}}])
    found = what_if(data)["metrics"][0]
    assert found["proposal"] is None and "missing request for cpu" in found["error"]


# TestGroupPods, one member each: counted in (the metric is read) or set aside (it is not).
GROUP = [
    ("count in a ready pod with fresh metrics during initialization period - CPU",
     {"started_s_ago": 60, "ready_since_s_ago": 30, "sample_window_s": 30}, True),
    ("unready a ready pod without fresh metrics during initialization period - CPU",
     {"started_s_ago": 60, "ready_since_s_ago": 30, "sample_window_s": 60}, False),
    ("unready an unready pod during initialization period - CPU",
     {"ready": False, "started_s_ago": 60, "ready_since_s_ago": 50}, False),
    ("count in a ready pod without fresh metrics after initialization period - CPU",
     {"started_s_ago": 180, "ready_since_s_ago": 180, "sample_s_ago": 120}, True),
    ("count in an unready pod that was ready after initialization period - CPU",
     {"ready": False, "started_s_ago": 600, "ready_since_s_ago": 540}, True),
    ("unready pod that has never been ready after initialization period - CPU",
     {"ready": False, "started_s_ago": 600, "ready_since_s_ago": 594}, False),
    ("pending pods are unreadied", {"state": "BUILDING"}, False),
    ("ignore pods with deletion timestamps", {"state": "DELETING"}, False),
    ("ignore pods in a failed state", {"state": "ERROR"}, False),
    ("stopped members are unready (a Pod not Ready)", {"state": "SHUTOFF", "started_s_ago": 600}, False),
    ("members whose power changes are unready", {"state": "POWERING_ON", "started_s_ago": 600}, False),
]


@pytest.mark.parametrize("fields,counted", [g[1:] for g in GROUP], ids=[g[0] for g in GROUP])
def test_kubernetes_group_pods(fields: dict[str, Any], counted: bool) -> None:
    one = {"state": "ACTIVE", "requests": {"cpu": 1}, "usage": {"cpu": 0.5}, **fields}
    result = what_if(case(1, CPU50, [one]))
    found = result["metrics"][0]
    assert (found["proposal"] is not None) == counted
    if not counted:
        # Berth tells a member still starting (booting, or started within the 300 s cpu
        # initialization period) from one whose samples are missing: Kubernetes says
        # FailedGetResourceMetric for both.
        starting = one["state"] == "BUILDING" or one.get("started_s_ago", 1e9) < 300
        [active] = [c for c in result["conditions"] if c["type"] == "ScalingActive"]
        if starting:
            assert found["error"].startswith("every member is within its initialization period")
            assert (found.get("initializing"), active["reason"]) == (True, "MembersInitializing")
        else:
            assert "did not receive metrics" in found["error"]
            assert ("initializing" not in found, active["reason"]) == (True, "FailedGetResourceMetric")


def test_kubernetes_group_pods_a_missing_pod() -> None:
    """TestGroupPods "a missing pod": running, no sample: no metric to read."""
    found = what_if(case(1, CPU50, cpu_members([None], count=1)))["metrics"][0]
    assert found["proposal"] is None and "did not receive metrics" in found["error"]


def test_memory_utilization_scales_like_cpu() -> None:
    """Memory: the flavor's RAM in MB is the request; no cpu readiness rules apply."""
    members = [{"state": "ACTIVE", "ready": False, "started_s_ago": 0, "requests": {"memory": 2048},
                "usage": {"memory": use}} for use in (1536, 1024, 2048)]
    found = what_if(case(3, {"type": "resource", "name": "memory", "target_utilization": 50}, members))
    assert found["metrics"][0] == {"name": "memory", "type": "resource", "current": 75, "proposal": 5}


def test_scale_up_tolerance_applies_only_upward() -> None:
    """behavior.scale_up.tolerance (Kubernetes 1.33+): a ratio of 1.15 is within a 0.2 upward
    tolerance, not within the 0.1 default; a direction's tolerance overrides the group's."""
    data = case(4, CPU100, cpu_members([1150] * 4))
    assert what_if(data)["metrics"][0]["proposal"] == 5
    data["spec"]["behavior"] = {"scale_up": {"tolerance": 0.2}}
    assert what_if(data)["metrics"][0]["proposal"] == 4
    data["spec"]["behavior"] = {"scale_down": {"tolerance": 0.2}}
    assert what_if(data)["metrics"][0]["proposal"] == 5
    data["spec"]["tolerance"] = 0.2
    assert what_if(data)["metrics"][0]["proposal"] == 4
    data["spec"]["behavior"] = {"scale_up": {"tolerance": 0}}
    assert what_if(data)["metrics"][0]["proposal"] == 5


def test_scale_down_tolerance_applies_only_downward() -> None:
    """A ratio of 0.7: within a 0.35 downward tolerance, past the 0.1 default."""
    data = case(4, CPU100, cpu_members([700] * 4))
    data["spec"]["behavior"] = {"scale_down": {"tolerance": 0.35}}
    assert what_if(data)["metrics"][0]["proposal"] == 4
    data["spec"]["behavior"] = {"scale_up": {"tolerance": 0.35}}
    assert what_if(data)["metrics"][0]["proposal"] == 3


def test_a_member_row_is_the_member_the_policy_would_be_given():
    from datetime import datetime, timedelta
    from decimal import Decimal

    from scheduler.scaling import members as group_members
    from scheduler.scaling.spec import Member

    now = datetime(2026, 12, 1, 12, 0, 0)
    row = {"state": "ACTIVE", "vcpus": 2, "memory_mb": 512, "launched_at": now - timedelta(seconds=30),
           "display_name": "web-1"}
    made = group_members.to_member(row, {"cpu": 0.25}, now)
    assert made == Member(state="ACTIVE", ready=True, requests={"cpu": Decimal(2), "memory": Decimal(512)},
                          usage={"cpu": Decimal("0.25")}, started_s_ago=30.0, name="web-1")
    assert repr(made) == repr(Member(state="ACTIVE", ready=True,
                                     requests={"cpu": Decimal(2), "memory": Decimal(512)},
                                     usage={"cpu": Decimal("0.25")}, started_s_ago=30.0, name="web-1"))
    assert group_members.to_member(dict(row, state="BUILDING", vcpus=None), {}, now).requests == {
        "cpu": Decimal(0), "memory": Decimal(512)}


def test_a_stopped_member_row_is_a_member_not_ready_in_its_own_state():
    from datetime import datetime

    from scheduler.scaling import members as group_members

    now = datetime(2026, 12, 1, 12, 0, 0)
    for state in ("SHUTOFF", "POWERING_OFF", "POWERING_ON", "REBOOTING"):
        made = group_members.to_member({"state": state, "vcpus": 1, "memory_mb": 512}, {}, now)
        assert (made.state, made.ready) == (state, False)
