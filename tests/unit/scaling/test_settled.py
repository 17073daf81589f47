"""A settled group's members summed decide exactly what they decide one by one."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from scheduler import states
from scheduler.scaling import members as group_members
from scheduler.scaling import settled
from scheduler.scaling.decide import decide
from scheduler.scaling.spec import Readiness, Recommendation, ScaleEvent, SettledMembers, parse_spec

NOW = datetime(2026, 12, 1, 12, 0, 0)
READINESS = Readiness(cpu_initialization_period_s=300, initial_readiness_delay_s=30)
METRICS = (
    {"type": "resource", "name": "cpu", "target_utilization": 50},
    {"type": "resource", "name": "cpu", "target_average": 0.4},
    {"type": "resource", "name": "memory", "target_utilization": 70},
    {"type": "resource", "name": "memory", "target_average": 900},
    {"type": "instance", "name": "rps", "target_average": 100},
    {"type": "external", "name": "queue:jobs", "target_value": 30},
    {"type": "external", "name": "queue:jobs", "target_average": 5},
)


def _row(index: int, rng: random.Random, state: str = states.ACTIVE, launched_s_ago: float | None = 3600,
         vcpus: int = 2) -> dict[str, Any]:
    return {"uuid": f"member-{index}", "display_name": f"g-{index}", "state": state, "host": "h",
            "vcpus": vcpus, "memory_mb": rng.choice((512, 2048, 4096)),
            "launched_at": None if launched_s_ago is None else NOW - timedelta(seconds=launched_s_ago),
            "updated_at": NOW - timedelta(days=1)}


def _sample(rng: random.Random) -> Any:
    return rng.choice((rng.uniform(0, 4), Decimal(rng.randrange(0, 5000)) / 1000, rng.randrange(0, 3000),
                       rng.uniform(0, 1e6), 1e300))


def _random_group(rng: random.Random) -> tuple[Any, int, list[dict[str, Any]], dict[str, dict[str, Any]]]:
    metrics = rng.sample(METRICS, rng.randint(1, 3))
    spec = parse_spec({"min": 1, "max": 50, "metrics": metrics, "tolerance": rng.choice((0, 0.1, 0.3))})
    count = rng.randint(1, 12)
    rows = [_row(i, rng, launched_s_ago=rng.choice((None, 299.9999996, 300, 300.0000004, 301, 86400)),
                 vcpus=rng.choice((1, 2, 4, 0) if rng.random() < 0.1 else (1, 2, 4)))
            for i in range(count)]
    usage = {row["uuid"]: {"cpu": _sample(rng), "memory": _sample(rng), "rps": _sample(rng)} for row in rows}
    return spec, rng.randint(1, 20), rows, usage


def _both(spec: Any, current: int, rows: list[dict[str, Any]], usage: dict[str, dict[str, Any]],
          readiness: Readiness = READINESS) -> tuple[Any, Any, SettledMembers | None]:
    summed = settled.settle(spec, rows, usage, NOW, readiness)
    one_by_one = [group_members.to_member(row, usage.get(row["uuid"], {}), NOW) for row in rows]
    history = [Recommendation(30.0, current), Recommendation(120.0, current + 1)]
    events = [ScaleEvent(40.0, 1)]
    external = {"queue:jobs": Decimal(137)}
    expected = decide(spec, current, one_by_one, external, history, events, readiness)
    got = decide(spec, current, summed, external, history, events, readiness) if summed is not None else None
    return expected, got, summed


def test_random_settled_groups_decide_as_their_members_do() -> None:
    rng = random.Random(20261201)
    compared = 0
    for _ in range(3000):
        spec, current, rows, usage = _random_group(rng)
        expected, got, summed = _both(spec, current, rows, usage)
        if summed is None:
            continue
        compared += 1
        assert got == expected, (spec, current, rows, usage)
    assert compared > 1500  # most random groups are settled: the comparison is not vacuous


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"state": states.BUILDING}, "a member still building is set aside"),
        ({"state": states.ERROR}, "an ERROR member is dropped"),
        ({"launched_at": NOW - timedelta(seconds=299)}, "a member within its cpu initialization period"),
        ({"uuid": "no-samples"}, "a member without samples"),
    ],
)
def test_a_group_with_a_member_the_calculator_sets_aside_goes_one_by_one(change: dict[str, Any],
                                                                         why: str) -> None:
    rng = random.Random(7)
    spec = parse_spec({"min": 1, "max": 50, "metrics": [METRICS[0]]})
    rows = [_row(i, rng) for i in range(4)]
    usage = {row["uuid"]: {"cpu": 1.5} for row in rows}
    assert settled.settle(spec, rows, usage, NOW, READINESS) is not None
    rows[2].update(change)
    assert settled.settle(spec, rows, usage, NOW, READINESS) is None, why


def test_a_period_finer_than_the_clock_is_compared_exactly() -> None:
    rng = random.Random(11)
    spec = parse_spec({"min": 1, "max": 50, "metrics": [METRICS[0]]})
    rows = [_row(i, rng, launched_s_ago=300) for i in range(2)]
    usage = {row["uuid"]: {"cpu": 1.5} for row in rows}
    assert settled.settle(spec, rows, usage, NOW, READINESS) is not None
    finer = Readiness(cpu_initialization_period_s=300.0000004, initial_readiness_delay_s=30)
    assert settled.settle(spec, rows, usage, NOW, finer) is None  # 300 s < 300.0000004 s: initialising


def test_a_missing_metric_and_no_members_go_one_by_one() -> None:
    rng = random.Random(8)
    spec = parse_spec({"min": 1, "max": 50, "metrics": [METRICS[0], METRICS[4]]})
    rows = [_row(i, rng) for i in range(3)]
    usage = {row["uuid"]: {"cpu": 1.5, "rps": 20} for row in rows}
    assert settled.settle(spec, rows, usage, NOW, READINESS) is not None
    del usage[rows[1]["uuid"]]["rps"]
    assert settled.settle(spec, rows, usage, NOW, READINESS) is None
    assert settled.settle(spec, [], {}, NOW, READINESS) is None


def test_memory_reads_no_cpu_readiness_so_a_new_member_is_settled() -> None:
    rng = random.Random(9)
    spec = parse_spec({"min": 1, "max": 50, "metrics": [METRICS[2]]})
    rows = [_row(i, rng, launched_s_ago=5) for i in range(3)]
    usage = {row["uuid"]: {"memory": 3000} for row in rows}
    expected, got, summed = _both(spec, 3, rows, usage)
    assert summed is not None and summed.count == 3
    assert got == expected and expected.desired > 3


def test_the_sums_are_milli_units_of_samples_and_requests() -> None:
    rng = random.Random(10)
    spec = parse_spec({"min": 1, "max": 50, "metrics": [METRICS[0], METRICS[4]]})
    rows = [_row(i, rng, vcpus=v) for i, v in enumerate((1, 2, 4))]
    usage = {row["uuid"]: {"cpu": 0.3, "rps": Decimal("0.0001")} for row in rows}
    summed = settled.settle(spec, rows, usage, NOW, READINESS)
    assert summed is not None
    assert summed.count == 3
    assert summed.totals == {"cpu": 900, "rps": 3}  # 0.1 milli rounds up to 1, as MilliValue does
    assert summed.requested["cpu"] == 7000
