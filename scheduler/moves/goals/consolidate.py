"""consolidate: as many hosts emptied as the migrations allow, each destination keeping headroom of
its allocation limits and of its measured CPU and memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.moves.goals import FLOAT, Goal, Option, max_migrations

if TYPE_CHECKING:
    from scheduler.moves.rebalance import NoPlan, RebalancePlan, Snapshot


class Consolidate(Goal):
    name = "consolidate"
    summary = ("empty as many hosts as --max-migrations migrations allow, each destination keeping "
               "--headroom of its limits and of its measured CPU and memory free")
    schema = (
        max_migrations(),
        Option("headroom", FLOAT, 0.0, "the share of each allocation limit, and of its vCPUs and memory in "
               "measured use, a destination keeps free (0 to below 1, default 0)",
               minimum=0.0, maximum=1.0, below_maximum=True,
               problem="is the share of each limit a destination keeps free, from 0 to below 1",
               metavar="SHARE", key_problem="must be a share from 0 to below 1",
               key_help="is kept free by the consolidate goal"),
    )

    def plan(self, snapshot: Snapshot, options: Mapping[str, Any]) -> RebalancePlan | NoPlan:
        from scheduler.moves.rebalance import consolidate

        return consolidate(snapshot, options["filters"], max_migrations=options["max_migrations"],
                           headroom=options["headroom"])
