"""balance: the skew of the hosts' measured utilisation (the busiest over the fleet's) down to a
target, with few migrations."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.moves.goals import FLOAT, Goal, Option, max_migrations

if TYPE_CHECKING:
    from scheduler.moves.rebalance import NoPlan, RebalancePlan, Snapshot

#: The target the issue sets: the most loaded host within 15 % of the mean.
TARGET_SKEW = 1.15


class Balance(Goal):
    name = "balance"
    summary = ("lower the skew of the hosts' measured utilisation (the busiest host's over the fleet's) "
               "with at most --max-migrations migrations, down to --target")
    schema = (
        max_migrations(),
        Option("target_skew", FLOAT, TARGET_SKEW,
               "stop at this skew, the busiest host's utilisation over the fleet's "
               f"(default {TARGET_SKEW:g})",
               minimum=1.0, maximum=math.inf, below_maximum=True,
               problem="is the busiest host's utilisation over the fleet's, a number of at least 1.0",
               flag="--target", metavar="SKEW", key="target",
               key_problem="must be a skew of at least 1.0",
               key_help="is the skew the balance goal stops at"),
    )

    def plan(self, snapshot: Snapshot, options: Mapping[str, Any]) -> RebalancePlan | NoPlan:
        from scheduler.moves.rebalance import balance

        return balance(snapshot, options["filters"], target_skew=options["target_skew"],
                       max_migrations=options["max_migrations"])
