"""Building what-if inputs for the scaling tests, and running them as the command does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler.cmd import scaling_commands

#: When the controller tests' clock starts.
T0 = datetime(2026, 12, 1, 12, 0, 0)


class Clock:
    """The database's clock and the controllers', moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> datetime:
        self.now = T0 + timedelta(seconds=seconds)
        return self.now


#: The readiness periods Kubernetes' replica calculator tests use
#: (defaultTestingCPUInitializationPeriod, defaultTestingDelayOfInitialReadinessStatus).
TESTING_READINESS = {"cpu_initialization_period_s": 120, "initial_readiness_delay_s": 10}
#: hotCPUCreationTime (just started) and coolCPUCreationTime (three minutes ago).
HOT = 0
COOL = 180


def what_if(data: dict[str, Any]) -> dict[str, Any]:
    """The command's output for ``data`` (through JSON, as the command reads it)."""
    result = scaling_commands.what_if(json.dumps(data))
    return json.loads(json.dumps(result))


def member(state: str = "ACTIVE", ready: bool = True, requests: dict[str, float] | None = None,
           usage: dict[str, float] | None = None, started: float | None = None,
           **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"state": state, "ready": ready}
    if requests is not None:
        found["requests"] = requests
    if usage is not None:
        found["usage"] = usage
    if started is not None:
        found["started_s_ago"] = started
    found.update(extra)
    return found


def cpu_members(levels_milli: Sequence[int | None], requests: list[float] | None = None,
                readiness: list[bool] | None = None, states: list[str] | None = None,
                started: list[float | None] | None = None, count: int | None = None) -> list[dict[str, Any]]:
    """Members as Kubernetes' tests build pods: ``levels_milli[i]`` is pod i's cpu use
    (None or absent: no sample), each requesting ``requests[i]`` vCPUs (default 1.0)."""
    total = count if count is not None else max(len(levels_milli), len(requests or []),
                                               len(readiness or []), len(states or []))
    found = []
    for i in range(total):
        level = levels_milli[i] if i < len(levels_milli) else None
        found.append(member(
            state=states[i] if states else "ACTIVE",
            ready=readiness[i] if readiness else True,
            requests={"cpu": requests[i] if requests else 1.0},
            usage={} if level is None else {"cpu": level / 1000},
            started=started[i] if started else None,
        ))
    return found


def plain_members(metric: str, levels: list[float], count: int, readiness: list[bool] | None = None,
                  started: list[float | None] | None = None) -> list[dict[str, Any]]:
    return [member(ready=readiness[i] if readiness else True,
                   usage={metric: levels[i]} if i < len(levels) else {},
                   started=started[i] if started else None) for i in range(count)]


def spec(metric: dict[str, Any], low: int = 1, high: int = 1000, **more: Any) -> dict[str, Any]:
    return {"min": low, "max": high, "metrics": [metric], **more}
