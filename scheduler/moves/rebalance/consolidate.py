"""consolidate: empty as many hosts as possible with at most ``max_migrations`` migrations
(Watcher's VM workload consolidation), so that they can be powered off or given other work.

The heuristic: the hosts holding instances, those with the fewest instances first (then the
least memory), are emptied one after the other: each of a host's instances, largest first, goes
to the host in use that the filters accept for it and that it fills the most (best fit), never
to an empty host nor to one already emptied, keeping ``headroom`` of each limit free there. A host
some instance of which finds no such host, or may not move, or that needs more migrations than
are left, or that took instances of a host emptied before it, stays as it is. The filters decide
every destination as they would a build: with ServerGroupAntiAffinityFilter enabled,
anti-affinity members stay on distinct hosts.
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
from scheduler.moves.rebalance.snapshot import PlannedMove, Snapshot


def consolidate(snapshot: Snapshot, filters: Sequence[Any] = (), max_migrations: int = 10,
                headroom: float = 0.0, flavors: Sequence[Flavor] | None = None) -> RebalancePlan | NoPlan:
    """At most ``max_migrations`` migrations, each to a host ``filters`` accept that keeps
    ``headroom`` (a share, 0 to 1) of each of its limits free, after which as many hosts as the
    heuristic finds hold nothing; NoPlan saying why when it empties none."""
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
    kept = snapshot.limits() * headroom
    order = sorted((int(row) for row in np.flatnonzero(in_use)),
                   key=lambda row: (len(snapshot.on_host[row]),
                                    sum(r.amounts[1] for r in snapshot.on_host[row])))
    migrations: list[PlannedMove] = []
    emptied: list[str] = []
    why: dict[str, str] = {}  # host -> why it stays
    receiving: set[str] = set()
    try:
        for row in order:
            name = snapshot.table.names[row]
            done = _empty(snapshot, judge, row, in_use, kept, max_migrations - len(migrations), receiving)
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
        first = next(iter(why.items()), None)
        return NoPlan(f"none of the {len(order)} hosts in use can be emptied"
                      + (f"; {first[0]}, the one with the fewest instances: {first[1]}" if first else ""))
    checked = replayed(snapshot, judge,
                       RebalancePlan(migrations, [], GREEDY, False, f"empties {', '.join(emptied)}"))
    if isinstance(checked, NoPlan):
        return checked
    return with_figures(snapshot, judge, checked, flavors)


def _empty(snapshot: Snapshot, judge: Judge, row: int, in_use: NDArray[np.bool_], kept: NDArray[np.float64],
           left: int, receiving: set[str]) -> list[PlannedMove] | str:
    """The migrations, applied to the snapshot, that empty ``row`` into the other hosts in use; or
    why it stays (the snapshot unchanged)."""
    name = snapshot.table.names[row]
    residents = list(snapshot.on_host[row])
    if name in receiving:
        return "it takes instances of a host emptied before it"
    if any(not r.movable for r in residents):
        return "an instance on it may not be moved"
    if len(residents) > left:
        return f"its {len(residents)} instances need more migrations than the {left} left"
    closed = ~in_use
    closed[row] = True
    done: list[PlannedMove] = []
    for resident in sorted(residents, key=lambda r: -r.amounts[1]):
        roomy = (snapshot.room() - kept >= np.array(resident.amounts) - 1e-9).all(axis=1)
        to = destination(snapshot, judge, resident, closed | ~roomy)
        if to is None:
            for migration in reversed(done):
                snapshot.move(migration.instance, migration.source)
            return (f"instance {resident.uuid} finds no other host in use that the filters accept with room "
                    f"for it{' and the headroom' if kept.any() else ''}")
        reason = f"empties {name} ({len(residents)} instances): best fit on a host in use"
        done.append(PlannedMove(resident.uuid, name, snapshot.table.names[to], reason, resident.amounts[1]))
        snapshot.move(resident.uuid, snapshot.table.names[to])
    return done
