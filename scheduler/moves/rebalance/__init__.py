"""Rebalancing: make room for a flavor, balance real load, consolidate (pure policy, no I/O).

A plan's moves are ``PlannedMove``s; a migration is the record of a move once it is under way
(scheduler.db.moves). ``Plan`` and ``Migration`` are the names these had before: kept for
rebalance goals written against them.
"""

from scheduler.moves.rebalance.balance import balance
from scheduler.moves.rebalance.consolidate import consolidate
from scheduler.moves.rebalance.figures import Figures
from scheduler.moves.rebalance.planner import NoPlan, RebalancePlan, make_room
from scheduler.moves.rebalance.snapshot import PlannedMove, Resident, Snapshot

Plan = RebalancePlan
Migration = PlannedMove

__all__ = ["Figures", "Migration", "NoPlan", "Plan", "PlannedMove", "RebalancePlan", "Resident", "Snapshot",
           "balance", "consolidate", "make_room"]
