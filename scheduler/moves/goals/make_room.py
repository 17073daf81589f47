"""make_room: room for ``count`` instances of a flavor (in a zone), with the fewest migrations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.moves.goals import CHOICE, FLAVOR, INT, MAX_COUNT, NAME, Goal, Option

if TYPE_CHECKING:
    from scheduler.moves.rebalance import NoPlan, RebalancePlan, Snapshot

#: The planner's methods (scheduler.moves.rebalance.planner: AUTO, GREEDY, EXACT).
METHODS = ("auto", "greedy", "exact")


class MakeRoom(Goal):
    name = "make_room"
    summary = "room for --count instances of FLAVOR (a flavor the scheduler keeps)"
    schema = (
        Option("flavor", FLAVOR, metavar="FLAVOR"),
        Option("count", INT, 1, "N instances (default 1)", minimum=1, maximum=MAX_COUNT, metavar="N"),
        Option("zone", NAME, None, "the instances' availability zone", metavar="Z"),
        Option("method", CHOICE, METHODS[0], "auto (default): the greedy plan, then the exact one within "
               "the time limit", choices=METHODS),
    )

    @classmethod
    def describe(cls, options: Mapping[str, Any]) -> str:
        flavor = (options.get("flavor") or {}).get("name") or "the flavor"
        zone = f" in zone {options['zone']}" if options.get("zone") else ""
        return f"room for {options.get('count', 1)} x {flavor}{zone}"

    def plan(self, snapshot: Snapshot, options: Mapping[str, Any]) -> RebalancePlan | NoPlan:
        from berth_contract.request_spec import Flavor
        from scheduler.moves.rebalance import make_room

        return make_room(snapshot, Flavor.from_wire(options["flavor"]), options["count"], options["filters"],
                         time_limit=options["time_limit"], method=options["method"], zone=options["zone"])
