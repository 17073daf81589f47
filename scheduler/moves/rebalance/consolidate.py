"""consolidate: empty as many hosts as possible with at most ``max_migrations`` migrations
(Watcher's VM workload consolidation), so that they can be powered off or given other work.

The heuristic: the hosts that may be emptied (in use, every instance free to move) are taken in
the order that empties the most hosts with the fewest migrations: those with the fewest instances
first (then the least memory). Each of a host's instances goes to another host in use that the
filters accept for it, anti-affinity members first (they have the fewest hosts to go to), then
the largest. Destinations are the hosts that stay in use whatever happens (one of their instances
may not move) first, then the hosts last in the order (the least likely to be emptied), the one
it fills the most among equals; never an empty host nor one emptied before. A destination keeps
``headroom`` of each allocation limit free, and its measured use (the instances' own, moved with
them, and its background) at most ``1 - headroom`` of its vCPUs and of its memory, so that no
host ends past its cores. A host some instance of which finds no such host, or that needs more
migrations than are left, or that took instances of a host emptied before it (an instance moves
once), stays as it is; the plan says which and why. It never ends with more hosts in use than
it started with. The filters decide every destination as they would a build: with
ServerGroupAntiAffinityFilter enabled, anti-affinity members stay on distinct hosts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from berth_contract.request_spec import Flavor
from scheduler.moves.rebalance.greedy import destination
from scheduler.moves.rebalance.judge import Judge
from scheduler.moves.rebalance.planner import GREEDY, NoPlan, RebalancePlan, replayed, with_figures
from scheduler.moves.rebalance.snapshot import PlannedMove, Resident, Snapshot


def consolidate(snapshot: Snapshot, filters: Sequence[Any] = (), max_migrations: int = 10,
                headroom: float = 0.0, flavors: Sequence[Flavor] | None = None) -> RebalancePlan | NoPlan:
    """At most ``max_migrations`` migrations, each to a host ``filters`` accept that keeps
    ``headroom`` (a share, 0 to 1) of each of its limits free and its measured use within
    ``1 - headroom`` of its vCPUs and memory, after which as many hosts as the heuristic finds
    hold nothing; NoPlan saying why when it empties none."""
    if max_migrations < 1:
        raise ValueError(f"max_migrations must be at least 1, got {max_migrations}")
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom is the share of each limit kept free, from 0 to below 1, "
                         f"got {headroom:g}")
    judge = Judge(filters)
    in_use = np.zeros(len(snapshot), dtype=bool)
    for row, residents in snapshot.on_host.items():
        in_use[row] = bool(residents)
    if in_use.sum() <= 1:
        return NoPlan(f"{int(in_use.sum())} host holds instances: there is no host to empty into another")
    ceilings = _Ceilings(snapshot, headroom)
    staying = {int(row) for row in np.flatnonzero(in_use)
               if any(not r.movable for r in snapshot.on_host[int(row)])}
    order = sorted((int(row) for row in np.flatnonzero(in_use) if row not in staying),
                   key=lambda row: (len(snapshot.on_host[row]),
                                    sum(r.amounts[1] for r in snapshot.on_host[row])))
    # destinations first: the hosts that stay in use whatever happens, then those last in the order
    preference = np.full(len(snapshot), float(len(order) + 1))
    preference[list(staying)] = 0.0
    for position, row in enumerate(order):
        preference[row] = float(len(order) - position)
    migrations: list[PlannedMove] = []
    emptied: list[str] = []
    why: dict[str, str] = {snapshot.table.names[row]: "an instance on it may not be moved" for row in staying}
    receiving: set[str] = set()
    try:
        for row in order:
            name = snapshot.table.names[row]
            done = _empty(snapshot, judge, row, in_use, ceilings, preference,
                          max_migrations - len(migrations), receiving)
            if isinstance(done, str):
                why[name] = done
                continue
            migrations.extend(done)
            receiving.update(m.destination for m in done)
            emptied.append(name)
            in_use[row] = False
    finally:
        for migration in reversed(migrations):
            snapshot.move(migration.instance, migration.source)
    if not migrations:
        first = next((item for item in why.items() if item[0] not in
                      {snapshot.table.names[row] for row in staying}), None)
        return NoPlan(f"none of the {int((in_use).sum())} hosts in use can be emptied"
                      + (f"; {first[0]}, the one with the fewest instances: {first[1]}" if first else
                         ": every one holds an instance that may not be moved"))
    note = f"empties {', '.join(emptied)}; {ceilings.said()}"
    checked = replayed(snapshot, judge, RebalancePlan(migrations, [], GREEDY, False, note))
    if isinstance(checked, NoPlan):
        return checked
    plan = with_figures(snapshot, judge, checked, flavors)
    plan.left = why
    if plan.before is not None and plan.after is not None and plan.after.hosts_used > plan.before.hosts_used:
        return NoPlan(f"the plan would leave {plan.after.hosts_used} hosts in use, more than the "
                      f"{plan.before.hosts_used} now")  # cannot happen: destinations are in use
    if snapshot.estimated:
        plan.note = f"{plan.note}; {snapshot.estimated}"
    return plan


class _Ceilings:
    """What a destination keeps free: ``headroom`` of each allocation limit, and of its vCPUs and
    memory in measured use."""

    def __init__(self, snapshot: Snapshot, headroom: float) -> None:
        self.headroom = headroom
        self.kept = snapshot.limits() * headroom
        self.cpu = snapshot.capacity() * (1.0 - headroom)
        self.memory = snapshot.memory() * (1.0 - headroom)

    def room(self, snapshot: Snapshot, resident: Resident) -> NDArray[np.bool_]:
        """Boolean column over every row: where ``resident`` fits within the ceilings."""
        allocated = (snapshot.room() - self.kept >= np.array(resident.amounts) - 1e-9).all(axis=1)
        cpu = snapshot.load + resident.load <= self.cpu + 1e-9
        memory = snapshot.memory_load + resident.memory_load <= self.memory + 1e-9
        return allocated & cpu & memory

    def said(self) -> str:
        if not self.headroom:
            return "no destination past its allocation limits, nor its vCPUs or memory in measured use"
        return (f"each destination keeps {self.headroom:.0%} of its allocation limits free, and of its "
                "vCPUs and memory in measured use")


def _empty(snapshot: Snapshot, judge: Judge, row: int, in_use: NDArray[np.bool_], ceilings: _Ceilings,
           preference: NDArray[np.float64], left: int, receiving: set[str]) -> list[PlannedMove] | str:
    """The migrations, applied to the snapshot, that empty ``row`` into the other hosts in use; or
    why it stays (the snapshot unchanged)."""
    name = snapshot.table.names[row]
    residents = list(snapshot.on_host[row])
    if name in receiving:
        return "it takes instances of a host emptied before it (an instance moves once)"
    if len(residents) > left:
        return f"its {len(residents)} instances need more migrations than the {left} left"
    closed = ~in_use
    closed[row] = True
    done: list[PlannedMove] = []
    for resident in sorted(residents, key=lambda r: (r.group is None, -r.amounts[1])):
        fits = ceilings.room(snapshot, resident)
        # the preferred hosts first; among equals, the one it fills the most
        room = snapshot.room()[:, 1]
        order = preference + room / (np.abs(room).max() + 1.0) * 0.5
        to = destination(snapshot, judge, resident, closed | ~fits, order=order)
        if to is None:
            for migration in reversed(done):
                snapshot.move(migration.instance, migration.source)
            return (f"instance {resident.uuid} finds no other host in use that the filters accept with room "
                    f"for it ({ceilings.said()})")
        reason = f"empties {name} ({len(residents)} instances) into a host that stays in use"
        done.append(PlannedMove(resident.uuid, name, snapshot.table.names[to], reason, resident.amounts[1]))
        snapshot.move(resident.uuid, snapshot.table.names[to])
    return done
