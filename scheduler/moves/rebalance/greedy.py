"""The greedy plan: free one target host at a time, with the fewest instances it can find.

For each candidate target (the hosts closest to fitting first), the instances to move off it
are chosen largest-first (by their share of what must be freed) until the flavor's amounts
fit, then each chosen one is swapped for the smallest one left on the host that still frees
enough (best fit: fewer bytes moved for as many migrations). Each is moved, largest first, to
the host the filters accept, not a target, that it fills the most (best fit, keeping large
holes whole). The target needing the fewest migrations (then the least memory) wins; with
``count`` > 1 the next instance is planned the same way on the fleet as that plan leaves it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from berth_contract.request_spec import RequestSpec
from scheduler.moves.rebalance.judge import Judge, one_of
from scheduler.moves.rebalance.snapshot import PlannedMove, Resident, Snapshot, amounts_of


@dataclasses.dataclass
class Draft:
    moves: list[PlannedMove]
    placements: list[str]

    @property
    def cost(self) -> tuple[int, float]:
        return len(self.moves), sum(m.memory_mb for m in self.moves)


def subset_to_free(residents: Sequence[Resident], deficit: NDArray[np.float64]) -> list[Resident] | None:
    """Few residents whose amounts together cover ``deficit`` (per class), or None when all of them
    do not: largest-first by share of the deficit, then each swapped for a smaller one that still covers."""
    need = np.maximum(deficit, 0.0)
    if not (need > 0).any():
        return []
    amounts = {r.uuid: np.array(r.amounts) for r in residents}
    if (sum(amounts.values(), np.zeros(3)) < need - 1e-9).any():
        return None
    scale = np.where(need > 0, need, np.inf)
    chosen: list[Resident] = []
    left = list(residents)
    freed = np.zeros(3)
    while (freed < need - 1e-9).any():
        gap = np.maximum(need - freed, 0.0)
        best = max(left, key=lambda r: (float(np.minimum(amounts[r.uuid], gap).dot(1 / scale)),
                                        -amounts[r.uuid][1]))
        chosen.append(best)
        left.remove(best)
        freed += amounts[best.uuid]
    # best fit: each chosen one replaced by the smallest left that still frees enough
    for index in range(len(chosen)):
        current = chosen[index]
        without = freed - amounts[current.uuid]
        fits = [r for r in left if ((without + amounts[r.uuid]) >= need - 1e-9).all()
                and amounts[r.uuid][1] < amounts[current.uuid][1]]
        if fits:
            smaller = min(fits, key=lambda r: amounts[r.uuid][1])
            chosen[index] = smaller
            left.remove(smaller)
            left.append(current)
            freed = without + amounts[smaller.uuid]
    return chosen


def destination(snapshot: Snapshot, judge: Judge, resident: Resident, excluded: NDArray[np.bool_],
                roomiest: bool = False, order: NDArray[np.float64] | None = None) -> int | None:
    """The row the filters accept for ``resident`` now that it fills the most (``roomiest``: the
    least; ``order``: the lowest of these figures, one per row), outside ``excluded``."""
    mask = judge.destinations(snapshot, resident) & ~excluded
    room = snapshot.room()
    mask &= (room >= np.array(resident.amounts) - 1e-9).all(axis=1)
    rows = np.flatnonzero(mask)
    if not len(rows):
        return None
    # in order of memory room (or of ``order``); confirmed by the filters on the state as it is now
    key = order[rows] if order is not None else -room[rows, 1] if roomiest else room[rows, 1]
    ranked = rows[np.argsort(key, kind="stable")]
    spec = snapshot.spec_of(resident)
    for row in ranked[:32]:
        if judge.accepts(snapshot, int(row), spec):
            return int(row)
    passing = judge.passing(snapshot, ranked[32:], spec)
    return int(passing[0]) if len(passing) else None


def free_target(snapshot: Snapshot, judge: Judge, row: int, request: RequestSpec, index: int,
                targets: NDArray[np.bool_]) -> list[PlannedMove] | None:
    """The migrations, applied to the snapshot, after which instance ``index`` of ``request`` fits
    on ``row``; None (the snapshot unchanged) when the greedy finds none. Should an instance of
    the chosen set find no destination (best fit, then the roomiest hosts), the set is chosen
    again without it."""
    residents = [r for r in snapshot.on_host.get(row, []) if r.movable]
    deficit = amounts_of(request.flavor) - snapshot.room()[row]
    while True:
        chosen = subset_to_free(residents, deficit)
        if chosen is None:
            return None
        stuck = None
        for roomiest in (False, True):
            done, stuck = _place(snapshot, judge, row, request, chosen, targets, roomiest)
            if done is not None:
                if judge.accepts(snapshot, row, one_of(request, index)):
                    return done
                _undo(snapshot, done)
                return None
        residents = [r for r in residents if r is not stuck]


def _place(snapshot: Snapshot, judge: Judge, row: int, request: RequestSpec, chosen: list[Resident],
           targets: NDArray[np.bool_], roomiest: bool) -> tuple[list[PlannedMove] | None, Resident | None]:
    """(the migrations of ``chosen``, largest first, applied; or None and the one that found no host)."""
    done: list[PlannedMove] = []
    for resident in sorted(chosen, key=lambda r: -r.amounts[1]):
        to = destination(snapshot, judge, resident, targets, roomiest)
        if to is None:
            _undo(snapshot, done)
            return None, resident
        name = snapshot.table.names[to]
        done.append(PlannedMove(resident.uuid, resident.host, name,
                              f"frees room on {snapshot.table.names[row]} for {_label(request)}",
                              resident.amounts[1]))
        snapshot.move(resident.uuid, name)
    return done, None


def _undo(snapshot: Snapshot, done: list[PlannedMove]) -> None:
    for migration in reversed(done):
        snapshot.move(migration.instance, migration.source)


def _label(request: RequestSpec) -> str:
    return f"flavor {request.flavor.name}" if request.flavor.name else "the flavor"


def plan(snapshot: Snapshot, judge: Judge, request: RequestSpec, candidates: Sequence[int]) -> Draft | None:
    """The greedy plan for every instance of ``request`` over target rows ``candidates`` (closest
    to fitting first), or None. The snapshot is left as it was."""
    migrations: list[PlannedMove] = []
    placements: list[str] = []
    targets = np.zeros(len(snapshot), dtype=bool)
    placed: list[int] = []
    try:
        for index in range(request.num_instances):
            best: tuple[tuple[int, float], int, list[PlannedMove]] | None = None
            for row in candidates:
                if best is not None and best[0][0] == 0:
                    break  # fits as it is: nothing does better
                targets_with = targets.copy()
                targets_with[row] = True
                done = free_target(snapshot, judge, int(row), request, index, targets_with)
                if done is None:
                    continue
                cost = (len(done), sum(m.memory_mb for m in done))
                for migration in reversed(done):
                    snapshot.move(migration.instance, migration.source)
                if best is None or cost < best[0]:
                    best = (cost, int(row), done)
            if best is None:
                return None
            _cost, row, done = best
            for migration in done:
                snapshot.move(migration.instance, migration.destination)
            migrations.extend(done)
            targets[row] = True
            snapshot.table.shift(row, request.flavor, +1)
            placed.append(row)
            placements.append(snapshot.table.names[row])
        return Draft(migrations, placements)
    finally:
        for row in placed:
            snapshot.table.shift(row, request.flavor, -1)
        for migration in reversed(migrations):
            snapshot.move(migration.instance, migration.source)
