"""Rebalancing goals: make room for a flavor, balance real load, consolidate (pure policy, no I/O)."""

from scheduler.policy.rebalance.balance import balance
from scheduler.policy.rebalance.consolidate import consolidate
from scheduler.policy.rebalance.figures import Figures
from scheduler.policy.rebalance.planner import NoPlan, Plan, make_room
from scheduler.policy.rebalance.snapshot import Migration, Resident, Snapshot

__all__ = ["Figures", "Migration", "NoPlan", "Plan", "Resident", "Snapshot", "balance", "consolidate",
           "make_room"]
