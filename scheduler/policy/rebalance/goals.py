"""The goals a rebalance plan can be made for: name -> function(snapshot, options) -> Plan | NoPlan.

``options`` always holds ``filters`` (the enabled filters, which decide every destination) and
``time_limit``; each goal reads its own options besides. A goal written elsewhere in this package
is wired in with one line of GOALS, and ``berth rebalance plan`` offers it from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.policy.rebalance.planner import NoPlan, Plan, make_room
from scheduler.policy.rebalance.snapshot import Snapshot

Goal = Callable[[Snapshot, Mapping[str, Any]], Plan | NoPlan]
MAKE_ROOM = "make_room"


def _make_room(snapshot: Snapshot, options: Mapping[str, Any]) -> Plan | NoPlan:
    """Room for ``count`` instances of ``flavor`` (in ``zone``): the fewest migrations."""
    return make_room(snapshot, options["flavor"], options.get("count", 1), options["filters"],
                     time_limit=options["time_limit"], method=options.get("method", "auto"),
                     zone=options.get("zone"))


GOALS: dict[str, Goal] = {
    MAKE_ROOM: _make_room,
}
