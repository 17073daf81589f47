"""Rebalance goals as plugins: each goal a class, one a module, with its name, a one-line summary,
the schema of its options and ``plan(snapshot, options)``; and the one registry and the one check
of options that the scheduler (``plan_rebalance``), ``berth rebalance plan`` and
``berth simulate --rebalance`` all read.

A goal is a subclass of :class:`Goal`: one of Berth's, in a module of this package, or one another
distribution installs under the entry point group ``berth.rebalance.goals``
(``my_goal = my_package.my_goal:MyGoal``); either way it is known by its ``name``. A goal's
module does no I/O (the policy layer) and imports the planner (scipy) only inside ``plan``: the
command line reads the goals' schemas to build its flags, and must not pay for the planner.

``plan`` gets the options checked against the schema (every option present, defaults filled,
as saved with the plan) plus ``filters`` (the enabled filters, which decide every destination)
and ``time_limit`` (seconds; every goal takes it). A goal with a required option (no default)
is offered by ``berth rebalance plan`` as a flag that takes that option's value
(``--make-room FLAVOR``), and not by ``berth simulate --rebalance``, which has none to give.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.policy import plugins

if TYPE_CHECKING:
    from scheduler.moves.rebalance import NoPlan, RebalancePlan, Snapshot

LOG = logging.getLogger(__name__)

GROUP = "berth.rebalance.goals"
#: The types of options: a whole number, a number, one of ``choices``, a name, a flavor (its wire form).
INT, FLOAT, CHOICE, NAME, FLAVOR = "int", "float", "choice", "name", "flavor"
REQUIRED: Any = object()
#: The longest a planner may be given, in seconds.
MAX_TIME_LIMIT = 600.0
TIME_LIMIT = 1.0
#: The most instances room may be asked for at once, and the most migrations of one plan.
MAX_COUNT = 1000


class OptionError(ValueError):
    """An option that does not fit its goal's schema: ``str()`` says why, without the caller's prefix."""

    def __init__(self, message: str, option: Option | None = None, value: Any = None):
        super().__init__(message)
        self.option = option
        self.value = value


@dataclass(frozen=True)
class Option:
    """One option of a goal, as its schema declares it.

    ``problem`` is what the error says after the name when a value does not fit ("must be ...");
    whole numbers, choices and names have one derived from their bounds. ``help`` is the help of
    ``berth rebalance plan``'s flag (``flag``, ``--`` and the name with dashes unless given),
    which says first which goal(s) it goes with. ``key`` is the option's key in
    ``berth simulate --rebalance`` (the name unless given), ``key_problem`` and ``key_help``
    what that command says when its value does not fit and when another goal is given with it.
    """

    name: str
    type: str
    default: Any = REQUIRED
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    below_maximum: bool = False  # the maximum itself is out (a share below 1)
    choices: tuple[str, ...] = ()
    problem: str = ""
    flag: str = ""
    metavar: str | None = None
    key: str = ""
    key_problem: str = ""
    key_help: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def sim_key(self) -> str:
        return self.key or self.name

    def what(self) -> str:
        """What a value must be, after the option's name."""
        if self.problem:
            return self.problem
        if self.type == INT:
            return f"must be a whole number from {self.minimum:g} to {self.maximum:g}"
        if self.type == CHOICE:
            return f"must be one of {', '.join(self.choices)}"
        if self.type == NAME:
            return f"must be a {self.name}'s name"
        low = f" from {self.minimum:g}" if self.minimum is not None else ""
        high = "" if self.maximum is None else f" to {'below ' if self.below_maximum else ''}{self.maximum:g}"
        return f"must be a number{low}{high}"

    def check(self, value: Any) -> Any:
        """``value`` as the goal takes it; OptionError when it does not fit."""
        if self.type == FLAVOR:
            from berth_contract.request_spec import Flavor
            from scheduler.exception import InvalidRequest
            try:
                return Flavor.from_wire(value, self.name).to_wire()
            except InvalidRequest as exc:
                raise OptionError(str(exc), self, value) from None
        if self.type == NAME:
            if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 255):
                raise OptionError(f"{self.name} {self.what()}", self, value)
            return value
        if self.type == CHOICE:
            if value not in self.choices:
                raise self.error(value)
            return value
        number = isinstance(value, int) if self.type == INT else isinstance(value, int | float)
        if isinstance(value, bool) or not number or not math.isfinite(value) or not self._within(value):
            raise self.error(value)
        return value if self.type == INT else float(value)

    def _within(self, value: float) -> bool:
        if self.minimum is not None and value < self.minimum:
            return False
        if self.maximum is None:
            return True
        return value < self.maximum if self.below_maximum else value <= self.maximum

    def error(self, value: Any) -> OptionError:
        return OptionError(f"{self.name} {self.what()}, got {str(value)[:60]!r}", self, value)


def max_migrations(default: int = 10) -> Option:
    """The ``max_migrations`` option, as the goals that take it declare it."""
    return Option("max_migrations", INT, default, f"at most K migrations (default {default})", minimum=1,
                  maximum=MAX_COUNT, metavar="K", key="max",
                  key_problem="is the most migrations per rebalance, a whole number of at least 1")


class Goal:
    """A rebalance goal: subclass it, set ``name``, ``summary`` and ``schema``, and write ``plan``.

    ``summary`` is one line, the help of the goal's flag in ``berth rebalance plan``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    schema: ClassVar[tuple[Option, ...]] = ()

    @classmethod
    def get_schema(cls) -> tuple[Option, ...]:
        """The goal's options (Watcher's strategies' get_schema)."""
        return cls.schema

    @classmethod
    def argument(cls) -> Option | None:
        """The goal's required option, which its command-line flag takes as its value, if any."""
        return next((o for o in cls.schema if o.required), None)

    @classmethod
    def describe(cls, options: Mapping[str, Any]) -> str:
        """What a plan toward this goal with ``options`` (as saved with it) is for, in a few words:
        the head line of ``berth rebalance show``. By default the goal's name."""
        return cls.name

    def plan(self, snapshot: Snapshot, options: Mapping[str, Any]) -> RebalancePlan | NoPlan:
        raise NotImplementedError


@functools.cache
def goals() -> dict[str, type[Goal]]:
    """{name: goal class} of every installed goal: Berth's in name order, then those of other
    distributions in name order. PluginError naming both when two goals share a name; an entry
    point that cannot be used is left out with a warning."""
    from scheduler.moves import goals as rebalance_goals

    found: dict[str, type[Goal]] = {}
    origin: dict[str, str] = {}
    for cls in sorted(plugins.builtin(rebalance_goals, Goal), key=lambda c: c.name):
        found[cls.name], origin[cls.name] = cls, f"{cls.__module__}.{cls.__qualname__} (built in)"
    added: list[tuple[type[Goal], EntryPoint]] = []
    for ep in entry_points(group=GROUP):
        loaded = plugins.load_class(ep, Goal)
        if isinstance(loaded, str):
            LOG.warning("Leaving out %s: %s", plugins.describe(ep), loaded)
        elif found.get(loaded.name) is not loaded:  # Berth's own are declared too
            added.append((loaded, ep))
    for cls, ep in sorted(added, key=lambda pair: pair[0].name):
        if cls.name in found and found[cls.name] is not cls:
            raise plugins.PluginError(f"two rebalance goals are named {cls.name}: {origin[cls.name]} and "
                                      f"{plugins.describe(ep)}; uninstall one of them")
        found[cls.name], origin[cls.name] = cls, plugins.describe(ep)
    return found


def goal(name: Any) -> type[Goal] | None:
    """The installed goal ``name``, or None."""
    return goals().get(name) if isinstance(name, str) else None


def owners(option: str) -> list[str]:
    """The goals that take ``option``, in the order of goals()."""
    return [name for name, cls in goals().items() if any(o.name == option for o in cls.schema)]


def check(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of goal ``name`` checked against its schema: ``time_limit`` then each option of
    the schema, in its order, its default filled in. OptionError saying what is wrong."""
    cls = goals()[name]
    limit = options.get("time_limit", TIME_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0 < limit <= MAX_TIME_LIMIT \
            or not math.isfinite(limit):
        raise OptionError(f"time_limit must be a number of seconds in (0, {MAX_TIME_LIMIT:g}], "
                          f"got {str(limit)[:60]!r}")
    unknown = sorted(set(options) - {o.name for o in cls.schema} - {"time_limit"}, key=str)
    if unknown:
        raise OptionError(f"unknown option(s) of {name}: {', '.join(map(str, unknown))}")
    checked: dict[str, Any] = {"time_limit": float(limit)}
    for option in cls.schema:
        value = options.get(option.name, None if option.required else option.default)
        checked[option.name] = option.check(value)
    return checked
