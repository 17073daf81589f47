"""Making room: the fewest migrations after which a flavor fits (pure policy, no I/O)."""

from scheduler.policy.rebalance.planner import NoPlan, Plan, make_room
from scheduler.policy.rebalance.snapshot import Migration, Resident, Snapshot

__all__ = ["Migration", "NoPlan", "Plan", "Resident", "Snapshot", "make_room"]
