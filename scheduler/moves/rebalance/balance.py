"""balance: lower the real-load skew (max / mean of measured load, as ``berth simulate`` reports
it) with at most ``max_migrations`` migrations. The DRS / Watcher workload-balance goal.

The mean does not change when instances move, so the skew falls only as the most loaded host's
load does. The heuristic, one migration at a time: on the most loaded host, the instance and
destination whose move leaves the higher of the two hosts' new loads the lowest (ideally half
the gap between them moved), the destination being the least loaded host the filters accept for
it with room for it; the move is taken only if that is below the host's load now. It stops at
``target_skew``, at the limit, or when no move off the most loaded host lowers it. An instance
moves at most once. With one migration this is the best single move (brute force agrees, see
the unit tests); beyond, each step is the best one from where the previous ones left the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from berth_contract.request_spec import Flavor
from scheduler.moves.rebalance import figures
from scheduler.moves.rebalance.greedy import destination
from scheduler.moves.rebalance.judge import Judge
from scheduler.moves.rebalance.planner import GREEDY, NoPlan, RebalancePlan, replayed, with_figures
from scheduler.moves.rebalance.snapshot import PlannedMove, Resident, Snapshot


def balance(snapshot: Snapshot, filters: Sequence[Any], target_skew: float,
            max_migrations: int = 10, flavors: Sequence[Flavor] | None = None) -> RebalancePlan | NoPlan:
    """At most ``max_migrations`` migrations, each to a host ``filters`` accept, after which the
    skew is as low as the heuristic finds (stopping at ``target_skew``); NoPlan saying why when
    no migration lowers it. ``flavors``: for the plan's largest-fit figure (default: in use)."""
    if max_migrations < 1:
        raise ValueError(f"max_migrations must be at least 1, got {max_migrations}")
    if not target_skew >= 1.0:
        raise ValueError(f"the target skew is max / mean, at least 1.0, got {target_skew:g}")
    judge = Judge(filters)
    now = figures.skew(snapshot.load)
    if now != now:
        return NoPlan("no host has measured load: the skew is not defined")
    if now <= target_skew:
        note = f"the skew {now:.3f} is at or below the target {target_skew:g}: nothing to move"
        return with_figures(snapshot, judge, RebalancePlan([], [], GREEDY, True, note), flavors)
    stops: list[str] = []

    def next_step(done: list[PlannedMove]) -> PlannedMove | None:
        if figures.skew(snapshot.load) <= target_skew:
            return None
        step, why = _best_move(snapshot, judge, {m.instance for m in done})
        if step is None:
            stops.append(why)
        return step

    migrations = snapshot.planned(next_step, max_migrations)
    stopped = stops[0] if stops else ""
    if not migrations:
        return NoPlan(f"the skew is {now:.3f} (target {target_skew:g}) and no migration lowers it: {stopped}")
    checked = replayed(snapshot, judge, RebalancePlan(migrations, [], GREEDY, False))
    if isinstance(checked, NoPlan):
        return checked
    plan = with_figures(snapshot, judge, checked, flavors)
    after = plan.after.skew if plan.after is not None else now
    if after > target_skew:
        limit = f"the limit of {max_migrations} migrations reached" if not stopped else stopped
        plan.note = f"the skew {after:.3f} stays above the target {target_skew:g}: {limit}"
    return plan


def _best_move(snapshot: Snapshot, judge: Judge, moved: set[str]) -> tuple[PlannedMove | None, str]:
    """The migration off the most loaded host that lowers its load the most without making another
    host as loaded; (None, why) when there is none."""
    load = snapshot.load
    table = snapshot.table
    hot = int(np.argmax(load))
    name = table.names[hot]
    peak = float(load[hot])
    residents = [r for r in snapshot.on_host.get(hot, [])
                 if r.movable and r.load > 0 and r.uuid not in moved]
    if not residents:
        return None, (f"the most loaded host {name} ({peak:.1f} busy vCPUs) has no instance with measured "
                      "load that may move")
    best: tuple[float, float, Resident, int] | None = None
    tried: set[tuple[Any, ...]] = set()
    for resident in sorted(residents, key=lambda r: (-r.load, r.amounts[1])):
        key = (resident.load, resident.amounts, resident.group)
        if key in tried:  # the same move as one already weighed
            continue
        tried.add(key)
        to = _coolest(snapshot, judge, resident, peak)
        if to is None:
            continue
        higher = max(peak - resident.load, float(load[to]) + resident.load)
        if higher < peak - 1e-9 and (best is None or (higher, resident.amounts[1]) < best[:2]):
            best = (higher, resident.amounts[1], resident, to)
    if best is None:
        return None, (f"none of the {len(residents)} instances with measured load on the most loaded host "
                      f"{name} ({peak:.1f} busy vCPUs) has a host the filters accept where it would be less "
                      "loaded")
    _higher, _memory, resident, to = best
    mean = float(load.mean())
    target = table.names[to]
    reason = (f"{name} is the most loaded host ({peak:.1f} busy vCPUs, {peak / mean:.2f} x the mean): "
              f"{resident.load:.1f} of them go to {target} "
              f"({load[to]:.1f} -> {load[to] + resident.load:.1f})")
    return PlannedMove(resident.uuid, name, target, reason, resident.amounts[1]), ""


def _coolest(snapshot: Snapshot, judge: Judge, resident: Resident, peak: float) -> int | None:
    """The least loaded host the filters accept for ``resident``, with room, where its load would
    stay below ``peak``."""
    excluded = snapshot.load + resident.load >= peak - 1e-9
    return destination(snapshot, judge, resident, excluded, order=snapshot.load)
