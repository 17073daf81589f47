"""A periodic rebalance in the simulation: ``every=1h,goal=balance,max=10`` checked, and the goal
it runs on the simulated fleet (scheduler.policy.rebalance).

Keys: ``every`` (a duration: ``90``, ``90s``, ``30m``, ``1h``, ``1d``; required), ``goal``
(``balance`` or ``consolidate``; required), ``max`` (migrations per rebalance, at least 1;
default 10), ``target`` (balance only: the skew it stops at, at least 1.0; default 1.15) and
``headroom`` (consolidate only: the share of each limit kept free on destinations, 0 to below 1;
default 0). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from scheduler.policy.rebalance import NoPlan, Plan, Snapshot, balance, consolidate
from scheduler.policy.rebalance.balance import TARGET_SKEW
from scheduler.simulation.inputs import InputError

BALANCE, CONSOLIDATE = "balance", "consolidate"
GOALS = (BALANCE, CONSOLIDATE)
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
KEYS = ("every", "goal", "max", "target", "headroom")


@dataclasses.dataclass(frozen=True)
class RebalanceSpec:
    every: float  # seconds
    goal: str
    max_migrations: int = 10
    target: float = TARGET_SKEW
    headroom: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.goal} every {_duration(self.every)}, max {self.max_migrations}"

    def plan(self, snapshot: Snapshot, filters: Sequence[Any]) -> Plan | NoPlan:
        if self.goal == BALANCE:
            return balance(snapshot, filters, self.target, self.max_migrations)
        return consolidate(snapshot, filters, self.max_migrations, self.headroom)


def parse(text: str) -> RebalanceSpec:
    """The spec ``text`` says; InputError naming what is wrong."""
    pairs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key or not value:
            raise InputError(f"--rebalance: {part.strip()!r} is not key=value "
                             "(e.g. every=1h,goal=balance,max=10)")
        if key not in KEYS:
            raise InputError(f"--rebalance: unknown key {key!r}; known: {', '.join(KEYS)}")
        if key in pairs:
            raise InputError(f"--rebalance: {key} given twice")
        pairs[key] = value
    for key in ("every", "goal"):
        if key not in pairs:
            raise InputError(f"--rebalance: {key}= is required (e.g. every=1h,goal=balance,max=10)")
    goal = pairs["goal"]
    if goal not in GOALS:
        raise InputError(f"--rebalance: goal must be one of {', '.join(GOALS)}, got {goal!r}")
    if "target" in pairs and goal != BALANCE:
        raise InputError("--rebalance: target= is the skew the balance goal stops at; goal is " + goal)
    if "headroom" in pairs and goal != CONSOLIDATE:
        raise InputError("--rebalance: headroom= is kept free by the consolidate goal; goal is " + goal)
    spec = RebalanceSpec(_seconds(pairs["every"]), goal)
    if "max" in pairs:
        spec = dataclasses.replace(spec, max_migrations=_count(pairs["max"]))
    if "target" in pairs:
        spec = dataclasses.replace(spec, target=_number(pairs["target"], "target", 1.0, math.inf,
                                                        "a skew (max / mean) of at least 1.0"))
    if "headroom" in pairs:
        spec = dataclasses.replace(spec, headroom=_number(pairs["headroom"], "headroom", 0.0, 1.0,
                                                          "a share from 0 to below 1"))
    return spec


def _seconds(text: str) -> float:
    number, unit = (text[:-1], text[-1]) if text[-1:] in UNITS else (text, "s")
    try:
        value = float(number) * UNITS[unit]
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise InputError(f"--rebalance: every must be a duration above 0 such as 90, 90s, 30m, 1h or 1d, "
                         f"got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError("--rebalance: max is the most migrations per rebalance, a whole number of at "
                         f"least 1, got {text!r}")
    return value


def _number(text: str, key: str, low: float, high: float, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (low <= value and (value < high or high == math.inf)) or value == math.inf:
        raise InputError(f"--rebalance: {key} must be {what}, got {text!r}")
    return value


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@dataclasses.dataclass
class RebalanceResult:
    """What the periodic rebalance did over a run."""

    spec: RebalanceSpec
    runs: int = 0
    plans: int = 0  # runs that found migrations to make
    migrations: int = 0
    no_plan: dict[str, int] = dataclasses.field(default_factory=dict)  # reason -> runs
    times: list[float] = dataclasses.field(default_factory=list)
    skew_before: list[float] = dataclasses.field(default_factory=list)  # at each run, as the goal saw it
    skew_after: list[float] = dataclasses.field(default_factory=list)

    def record(self, now: float, plan: Plan | NoPlan, before: float, after: float) -> None:
        self.runs += 1
        self.times.append(now)
        self.skew_before.append(before)
        self.skew_after.append(after)
        if isinstance(plan, NoPlan):
            self.no_plan[plan.reason] = self.no_plan.get(plan.reason, 0) + 1
        elif plan.migrations:
            self.plans += 1
            self.migrations += len(plan.migrations)

    def summary(self) -> dict[str, Any]:
        return {"every_s": self.spec.every, "goal": self.spec.goal, "max": self.spec.max_migrations,
                "runs": self.runs, "plans": self.plans, "migrations": self.migrations,
                "no_plan": dict(sorted(self.no_plan.items(), key=lambda kv: -kv[1]))}
