"""balance: lower the skew of measured utilisation (the busiest host's busy vCPUs over its vCPUs,
over the fleet's: ``berth simulate`` reports it the same way) with at most ``max_migrations``
migrations. The DRS / Watcher workload-balance goal, for hosts of any size.

The fleet's utilisation (total load over total vCPUs) does not change when instances move, so
the skew falls only as the busiest host's utilisation does. The heuristic, one migration at a
time: on the busiest host that may still be helped, the instance and destination whose move
leaves the higher of the two hosts' new utilisations the lowest, the destination being the host
the filters accept for it, with room for it, that would be the least utilised once it holds it;
the move is taken only if that is at least MIN_GAIN below the host's utilisation now. A host none of whose
instances can go anywhere that helps (its load is its background, or pinned, or no host takes
it) is said in the plan and passed over: the next busiest is helped instead. It stops when
every host that may be helped is within ``target_skew`` of the fleet's utilisation, at the
limit, or when no move helps. An instance moves at most once. With one migration this is the
best single move off the busiest host (brute force agrees, see the unit tests); beyond, each
step is the best one from where the previous ones left the fleet.
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

#: The least a migration must lower the busiest host's utilisation by (a share of its vCPUs) to
#: be planned: a move of an idle instance, whose gain rounds to nothing, is a migration for naught.
MIN_GAIN = 0.01


def balance(snapshot: Snapshot, filters: Sequence[Any], target_skew: float,
            max_migrations: int = 10, flavors: Sequence[Flavor] | None = None) -> RebalancePlan | NoPlan:
    """At most ``max_migrations`` migrations, each to a host ``filters`` accept, after which the
    skew is as low as the heuristic finds (stopping at ``target_skew``); NoPlan saying why when
    no migration lowers it. ``flavors``: for the plan's largest-fit figure (default: in use)."""
    if max_migrations < 1:
        raise ValueError(f"max_migrations must be at least 1, got {max_migrations}")
    if not target_skew >= 1.0:
        raise ValueError("the target skew is the busiest host's utilisation over the fleet's, at least 1.0, "
                         f"got {target_skew:g}")
    judge = Judge(filters)
    capacity = snapshot.capacity()
    now = figures.skew(snapshot.load, capacity)
    if now != now:
        return NoPlan("no host has measured load: the skew is not defined")
    if now <= target_skew:
        note = f"the skew {now:.3f} is at or below the target {target_skew:g}: nothing to move"
        return with_figures(snapshot, judge, _noted(RebalancePlan([], [], GREEDY, True, note), snapshot),
                            flavors)
    mean = float(snapshot.load.sum() / capacity[capacity > 0].sum())
    stuck: dict[int, str] = {}  # row -> why no move helps it

    def next_step(done: list[PlannedMove]) -> PlannedMove | None:
        moved = {m.instance for m in done}
        while True:
            hot = _busiest(snapshot, stuck, target_skew * mean)
            if hot is None:
                return None
            step, why = _best_move(snapshot, judge, hot, moved, mean)
            if step is not None:
                return step
            stuck[hot] = why

    migrations = snapshot.planned(next_step, max_migrations)
    left = {snapshot.table.names[row]: why for row, why in stuck.items()}
    if not migrations:
        return NoPlan(f"the skew is {now:.3f} (target {target_skew:g}) and no migration lowers it: "
                      + "; ".join(f"{host}: {why}" for host, why in left.items()))
    checked = replayed(snapshot, judge, RebalancePlan(migrations, [], GREEDY, False))
    if isinstance(checked, NoPlan):
        return checked
    plan = with_figures(snapshot, judge, checked, flavors)
    plan.left = left
    after = plan.after.skew if plan.after is not None else now
    if after > target_skew:
        limit = (f"the limit of {max_migrations} migrations reached" if len(migrations) == max_migrations
                 else f"{len(left)} host(s) could not be helped")
        plan.note = f"the skew {after:.3f} stays above the target {target_skew:g}: {limit}"
    return _noted(plan, snapshot)


def _noted(plan: RebalancePlan, snapshot: Snapshot) -> RebalancePlan:
    """``plan`` with how the instances' load was had, when not all measured, in its note."""
    if snapshot.estimated:
        plan.note = "; ".join(n for n in (plan.note, snapshot.estimated) if n)
    return plan


def _busiest(snapshot: Snapshot, stuck: dict[int, str], ceiling: float) -> int | None:
    """The most utilised host, not among ``stuck``, above ``ceiling``; None when there is none."""
    utilisation = snapshot.utilisation()
    if stuck:
        utilisation = utilisation.copy()
        utilisation[list(stuck)] = -np.inf
    hot = int(np.argmax(utilisation))
    return hot if utilisation[hot] > ceiling + 1e-9 else None


def _best_move(snapshot: Snapshot, judge: Judge, hot: int, moved: set[str],
               mean: float) -> tuple[PlannedMove | None, str]:
    """The migration off host ``hot`` that lowers its utilisation the most without making another
    host as utilised; (None, why) when there is none."""
    load, capacity = snapshot.load, snapshot.capacity()
    utilisation = snapshot.utilisation()
    table = snapshot.table
    name = table.names[hot]
    peak = float(utilisation[hot])
    busy = f"{peak:.0%} of its {capacity[hot]:g} vCPUs busy"
    residents = [r for r in snapshot.on_host.get(hot, [])
                 if r.movable and r.load > 0 and r.uuid not in moved]
    if not residents:
        instances = snapshot.on_host.get(hot, [])
        what = ("its load is none of its instances'" if not any(r.load > 0 for r in instances)
                else "none of its instances with measured load may move")
        return None, f"{busy}: {what}"
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
        higher = max((load[hot] - resident.load) / capacity[hot], (load[to] + resident.load) / capacity[to])
        if higher <= peak - MIN_GAIN + 1e-9 and (best is None or (higher, resident.amounts[1]) < best[:2]):
            best = (higher, resident.amounts[1], resident, to)
    if best is None:
        return None, (f"{busy}: none of its {len(residents)} instances with measured load has a host the "
                      f"filters accept with room where moving it lowers the busiest of the two by "
                      f"{MIN_GAIN:.0%} of its vCPUs or more")
    _higher, _memory, resident, to = best
    target = table.names[to]
    reason = (f"{name} is the busiest host that can be helped ({peak:.0%} of {capacity[hot]:g} vCPUs, "
              f"{peak / mean:.2f} x the fleet's): an instance busy on {resident.load:.2g} vCPUs goes to "
              f"{target} ({utilisation[to]:.0%} -> {(load[to] + resident.load) / capacity[to]:.0%}); "
              f"{name} {peak:.0%} -> {(load[hot] - resident.load) / capacity[hot]:.0%}")
    return PlannedMove(resident.uuid, name, target, reason, resident.amounts[1]), ""


def _coolest(snapshot: Snapshot, judge: Judge, resident: Resident, peak: float) -> int | None:
    """The host the filters accept for ``resident``, with room, that would be the least utilised
    once it holds it (on hosts of mixed sizes not always the least utilised now), below ``peak``."""
    capacity = snapshot.capacity()
    with np.errstate(divide="ignore", invalid="ignore"):
        after = np.where(capacity > 0, (snapshot.load + resident.load) / capacity, np.inf)
    return destination(snapshot, judge, resident, after >= peak - 1e-9, order=after)
