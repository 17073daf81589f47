"""The goals a rebalance plan can be made for: name -> function(snapshot, options) -> Plan | NoPlan.

``options`` always holds ``filters`` (the enabled filters, which decide every destination) and
``time_limit``; each goal reads its own options besides. A goal written elsewhere in this package
is wired in with one line of GOALS, and with its flag in scheduler.cmd.rebalance_commands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.policy.rebalance.balance import TARGET_SKEW, balance
from scheduler.policy.rebalance.consolidate import consolidate
from scheduler.policy.rebalance.planner import NoPlan, Plan, make_room
from scheduler.policy.rebalance.snapshot import Snapshot

Goal = Callable[[Snapshot, Mapping[str, Any]], Plan | NoPlan]
MAKE_ROOM, BALANCE, CONSOLIDATE = "make_room", "balance", "consolidate"
MAX_MIGRATIONS = 10


def _make_room(snapshot: Snapshot, options: Mapping[str, Any]) -> Plan | NoPlan:
    """Room for ``count`` instances of ``flavor`` (in ``zone``): the fewest migrations."""
    return make_room(snapshot, options["flavor"], options.get("count", 1), options["filters"],
                     time_limit=options["time_limit"], method=options.get("method", "auto"),
                     zone=options.get("zone"))


def _balance(snapshot: Snapshot, options: Mapping[str, Any]) -> Plan | NoPlan:
    """Real-load skew down to ``target_skew``, with at most ``max_migrations``."""
    return balance(snapshot, options["filters"], target_skew=options.get("target_skew", TARGET_SKEW),
                   max_migrations=options.get("max_migrations", MAX_MIGRATIONS))


def _consolidate(snapshot: Snapshot, options: Mapping[str, Any]) -> Plan | NoPlan:
    """As many hosts emptied as ``max_migrations`` allow, each destination keeping ``headroom``."""
    return consolidate(snapshot, options["filters"],
                       max_migrations=options.get("max_migrations", MAX_MIGRATIONS),
                       headroom=options.get("headroom", 0.0))


GOALS: dict[str, Goal] = {
    MAKE_ROOM: _make_room,
    BALANCE: _balance,
    CONSOLIDATE: _consolidate,
}
