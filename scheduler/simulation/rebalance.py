"""A periodic rebalance in the simulation: ``every=1h,goal=balance,max=10`` checked, and the goal
it runs on the simulated fleet (scheduler.moves.rebalance).

Keys: ``every`` (a duration: ``90``, ``90s``, ``30m``, ``1h``, ``1d``; required), ``goal`` (a
rebalance goal with no required option: ``balance`` or ``consolidate`` of Berth's; required), and
the keys of the goals' options (scheduler.moves.goals, checked by its check): ``max``
(migrations per rebalance, 1 to 1000; default 10), ``target`` (balance only: the skew it stops
at, at least 1.0; default 1.15) and ``headroom`` (consolidate only: the share of each limit kept
free on destinations, 0 to below 1; default 0). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.moves import goals as rebalance_goals
from scheduler.moves.rebalance import NoPlan, RebalancePlan, Snapshot
from scheduler.simulation.inputs import InputError

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _goals() -> dict[str, type[rebalance_goals.Goal]]:
    """The goals a periodic rebalance can run: those with no required option."""
    return {name: cls for name, cls in rebalance_goals.goals().items() if cls.argument() is None}


def _keys() -> dict[str, rebalance_goals.Option]:
    """{key: option} of the goals' options, each key once, in the order of the goals."""
    found: dict[str, rebalance_goals.Option] = {}
    for cls in _goals().values():
        for option in cls.schema:
            found.setdefault(option.sim_key, option)
    return found


def goals_help() -> str:
    """The goals --rebalance can run, each with its keys: ``balance [max=K, target=SKEW], ...``."""
    return ", ".join(f"{name} [{', '.join(f'{o.sim_key}={o.metavar or o.name.upper()}' for o in cls.schema)}]"
                     if cls.schema else name for name, cls in _goals().items())


@dataclasses.dataclass(frozen=True)
class RebalanceSpec:
    every: float  # seconds
    goal: str
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # checked: every one of the goal's

    @property
    def max_migrations(self) -> int | None:
        return self.options.get("max_migrations")

    @property
    def label(self) -> str:
        most = f", max {self.max_migrations}" if self.max_migrations is not None else ""
        return f"{self.goal} every {_duration(self.every)}{most}"

    def plan(self, snapshot: Snapshot, filters: Sequence[Any]) -> RebalancePlan | NoPlan:
        return rebalance_goals.goals()[self.goal]().plan(snapshot, {**self.options, "filters": filters})


def parse(text: str) -> RebalanceSpec:
    """The spec ``text`` says; InputError naming what is wrong."""
    keys = _keys()
    known = ("every", "goal", *keys)
    pairs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key or not value:
            raise InputError(f"--rebalance: {part.strip()!r} is not key=value "
                             "(e.g. every=1h,goal=balance,max=10)")
        if key not in known:
            raise InputError(f"--rebalance: unknown key {key!r}; known: {', '.join(known)}")
        if key in pairs:
            raise InputError(f"--rebalance: {key} given twice")
        pairs[key] = value
    for key in ("every", "goal"):
        if key not in pairs:
            raise InputError(f"--rebalance: {key}= is required (e.g. every=1h,goal=balance,max=10)")
    goal = pairs["goal"]
    goals = _goals()
    if goal not in goals:
        raise InputError(f"--rebalance: goal must be one of {', '.join(goals)}, got {goal!r}")
    schema = {option.sim_key: option for option in goals[goal].schema}
    for key, option in keys.items():
        if key in pairs and key not in schema:
            what = option.key_help or "is an option of the " + " or ".join(
                rebalance_goals.owners(option.name)) + " goal"
            raise InputError(f"--rebalance: {key}= {what}; goal is {goal}")
    every = _seconds(pairs["every"])
    given = {option.name: _value(option, pairs[key]) for key, option in schema.items() if key in pairs}
    try:
        options = rebalance_goals.check(goal, given)
    except rebalance_goals.OptionError as exc:
        if exc.option is None:
            raise InputError(f"--rebalance: {exc}") from None
        raise _refused(exc.option, pairs[exc.option.sim_key], exc.value) from None
    return RebalanceSpec(every, goal, options)


def _value(option: rebalance_goals.Option, text: str) -> Any:
    """``text`` as the option's type reads it (checked by rebalance_goals.check)."""
    try:
        if option.type == rebalance_goals.INT:
            return int(text)
        if option.type == rebalance_goals.FLOAT:
            return float(text)
    except ValueError:
        raise _refused(option, text) from None
    return text


def _refused(option: rebalance_goals.Option, text: str, value: Any = None) -> InputError:
    """The option's own words, but for a whole number above its maximum: the schema's bounds."""
    above = option.type == rebalance_goals.INT and option.maximum is not None and value is not None \
        and value > option.maximum
    what = option.key_problem if option.key_problem and not above else option.what()
    return InputError(f"--rebalance: {option.sim_key} {what}, got {text!r}")


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

    def record(self, now: float, plan: RebalancePlan | NoPlan, before: float, after: float) -> None:
        self.runs += 1
        self.times.append(now)
        self.skew_before.append(before)
        self.skew_after.append(after)
        if isinstance(plan, NoPlan):
            self.no_plan[plan.reason] = self.no_plan.get(plan.reason, 0) + 1
        elif plan.moves:
            self.plans += 1
            self.migrations += len(plan.moves)

    def summary(self) -> dict[str, Any]:
        return {"every_s": self.spec.every, "goal": self.spec.goal, "max": self.spec.max_migrations,
                "runs": self.runs, "plans": self.plans, "migrations": self.migrations,
                "no_plan": dict(sorted(self.no_plan.items(), key=lambda kv: -kv[1]))}
