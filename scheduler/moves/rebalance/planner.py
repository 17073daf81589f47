"""make_room: the fewest migrations after which ``count`` instances of a flavor fit.

A plan moves instances off target hosts (where the new instances go) onto hosts that are not
targets, each to a host the filters accept for it, in an order where no host goes over its
limits; it never moves an instance twice, nor into a host it frees. Among such plans it
minimises the number of migrations, then the memory they move. The targets considered are the
hosts closest to fitting (the least to free) whose filters accept the flavor once emptied.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.moves.rebalance import exact, greedy
from scheduler.moves.rebalance.figures import Figures, before_after, flavors_in_use
from scheduler.moves.rebalance.judge import Judge, replay, request_for
from scheduler.moves.rebalance.snapshot import CLASSES, PlannedMove, Snapshot, amounts_of

#: Candidate targets for the first instance of a request, and more for each further one.
TARGETS = 12
AUTO, EXACT, GREEDY = "auto", "exact", "greedy"


@dataclasses.dataclass
class RebalancePlan:
    moves: list[PlannedMove]
    #: The host of each new instance, in order.
    placements: list[str]
    method: str  # "exact" or "greedy"
    #: Proven the fewest migrations (then least memory) over the candidate targets.
    optimal: bool
    note: str = ""
    #: The fleet's figures before and after the migrations (scheduler.moves.rebalance.figures).
    before: Figures | None = None
    after: Figures | None = None
    #: {host: why} of the hosts the plan could not help toward its goal.
    left: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def memory_mb(self) -> float:
        return sum(m.memory_mb for m in self.moves)

    @property
    def migrations(self) -> list[PlannedMove]:
        """``moves``, by the name it had before."""
        return self.moves

    def __bool__(self) -> bool:
        return True


@dataclasses.dataclass
class NoPlan:
    reason: str

    def __bool__(self) -> bool:
        return False


def make_room(snapshot: Snapshot, flavor: Flavor, count: int = 1, filters: Sequence[Any] = (),
              time_limit: float = 1.0, method: str = AUTO, targets: int | None = None,
              zone: str | None = None) -> RebalancePlan | NoPlan:
    """The plan after which ``count`` instances of ``flavor`` fit (in availability ``zone``), each
    on a host ``filters`` accept, or NoPlan saying why. ``method``: ``exact`` (the integer program, within
    ``time_limit`` seconds), ``greedy``, or ``auto``: the greedy plan, then the exact one where it
    is within size and time (falling back to the greedy plan, said in ``note``). A plan carries
    the fleet's figures before and after its migrations, ``flavor`` among those it tries to fit."""
    if count < 1:
        raise ValueError("count must be at least 1")
    if method not in (AUTO, EXACT, GREEDY):
        raise ValueError(f"method must be one of {AUTO}, {EXACT}, {GREEDY}")
    judge = Judge(filters)
    found = _make_room(snapshot, judge, flavor, count, time_limit, method, targets, zone)
    if isinstance(found, NoPlan):
        return found
    return with_figures(snapshot, judge, found, [*flavors_in_use(snapshot), flavor])


def _make_room(snapshot: Snapshot, judge: Judge, flavor: Flavor, count: int, time_limit: float, method: str,
               targets: int | None, zone: str | None) -> RebalancePlan | NoPlan:
    started = time.monotonic()  # the solver's time limit is wall time
    request = request_for(flavor, count, zone)
    wanted = amounts_of(flavor)
    label = f"flavor {flavor.name}" if flavor.name else "the flavor"
    refused = _lacking(snapshot, wanted, count, label)
    if refused is not None:
        return NoPlan(refused)
    candidates, why = candidate_targets(snapshot, judge, flavor, (targets or TARGETS) + 2 * (count - 1),
                                        zone)
    if not candidates:
        return NoPlan(why)
    draft = greedy.plan(snapshot, judge, request, candidates) if method != EXACT else None
    if draft is not None and not draft.moves:
        return RebalancePlan([], draft.placements, "greedy", True, f"{label} fits without migrations")
    if method == GREEDY:
        if draft is None:
            return NoPlan(f"the greedy planner found no migrations off the {len(candidates)} hosts "
                          f"closest to fitting that make room for {count} x {label}")
        return _checked(snapshot, judge, request, RebalancePlan(draft.moves, draft.placements, GREEDY, False))
    solved = _exact(snapshot, judge, request, candidates, time_limit - (time.monotonic() - started), draft)
    if solved.draft is not None:
        plan = RebalancePlan(solved.draft.moves, solved.draft.placements, EXACT, solved.optimal,
                    "" if solved.optimal else f"best found within {time_limit:g} s ({solved.status})")
        checked = _checked(snapshot, judge, request, plan)
        if checked or draft is None:
            return checked
        note = f"the exact plan failed its replay ({checked.reason}): greedy plan"  # type: ignore[union-attr]
        greedy_plan = RebalancePlan(draft.moves, draft.placements, GREEDY, False, note)
        return _checked(snapshot, judge, request, greedy_plan)
    if draft is not None:
        note = (f"proved the fewest migrations over the candidate targets ({solved.status})"
                if solved.optimal else f"the exact solver found nothing better ({solved.status})")
        return _checked(snapshot, judge, request, RebalancePlan(draft.moves, draft.placements, GREEDY,
                                                       solved.optimal, note))
    if solved.optimal:
        return NoPlan(f"no migrations off the {len(candidates)} hosts closest to fitting (each to a host "
                      f"the filters accept) make room for {count} x {label}")
    return NoPlan(f"the exact solver found no plan within its limits ({time_limit:g} s): {solved.status}")


def _exact(snapshot: Snapshot, judge: Judge, request: RequestSpec, candidates: list[int], time_limit: float,
           draft: greedy.Draft | None) -> exact.Solved:
    """The integer program: over all candidates at once for several instances; for one, target by
    target (the targets whose lower bound cannot beat the best plan so far skipped)."""
    started = time.monotonic()
    bounds = {t: lower_bound(snapshot, t, request) for t in candidates}
    usable = [t for t in candidates if bounds[t] is not None]
    best = draft
    if request.num_instances > 1:
        floor = spread_bound(snapshot, usable, request)
        if best is not None and floor is not None and floor >= best.cost:
            return exact.Solved(None, True, "the lower bound of the targets meets it", 0)
        if best is not None:
            usable = [t for t in usable if bounds[t][0] <= len(best.moves)]  # type: ignore[index]
        return exact.solve(snapshot, judge, request, usable, time_limit, best)
    optimal, status, variables = True, "optimal", 0
    for t in sorted(usable, key=lambda t: bounds[t]):  # type: ignore[arg-type,return-value]
        if best is not None and bounds[t] >= best.cost:  # type: ignore[operator]
            continue
        left = time_limit - (time.monotonic() - started)
        if left <= 0:
            optimal, status = False, "time limit reached"
            break
        solved = exact.solve(snapshot, judge, request, [t], left, best)
        variables = max(variables, solved.variables)
        if solved.draft is not None and (best is None or solved.draft.cost < best.cost):
            best = solved.draft
        if not solved.optimal:  # the time limit: what it found, if anything, is not proven the best
            optimal, status = False, solved.status
    found = best if best is not draft or draft is None else None
    if not variables and optimal:
        status = "no target's lower bound beats it"
    return exact.Solved(found, optimal, status, variables)


#: Covers of up to this many instances are enumerated for the lower bound of a target.
ENUMERATED = 3


def spread_bound(snapshot: Snapshot, rows: Sequence[int], request: RequestSpec) -> tuple[int, float] | None:
    """(migrations, memory) no plan placing every instance of ``request`` on ``rows`` can beat: the
    cheapest way to share them among the rows, each row's share at its own lower bound."""
    count = request.num_instances
    inf = (10**9, 0.0)
    best = [(0, 0.0)] + [inf] * count  # best[j]: j instances placed on the rows seen so far
    for row in rows:
        costs = [(0, 0.0)] + [lower_bound(snapshot, row, request, j) or inf for j in range(1, count + 1)]
        best = [min((best[j - k][0] + costs[k][0], best[j - k][1] + costs[k][1]) for k in range(j + 1))
                for j in range(count + 1)]
    return None if best[count][0] >= inf[0] else best[count]


def lower_bound(snapshot: Snapshot, row: int, request: RequestSpec,
                copies: int = 1) -> tuple[int, float] | None:
    """(migrations, memory) no plan freeing ``row`` for ``copies`` instances of ``request`` can beat,
    where they go left aside: the cheapest set of its movable instances that frees enough, enumerated
    up to ENUMERATED instances, else counted per class largest first; None when all of them do not."""
    need = copies * amounts_of(request.flavor) - snapshot.room()[row]
    amounts = np.array([r.amounts for r in snapshot.on_host.get(row, []) if r.movable]).reshape(-1, 3)
    if (need <= 1e-9).all():
        return 0, 0.0
    if (amounts.sum(axis=0) < need - 1e-9).any():
        return None
    for k in range(1, min(ENUMERATED, len(amounts)) + 1):
        sets = np.array(list(itertools.combinations(range(len(amounts)), k)))
        freed = amounts[sets].sum(axis=1)
        covers = (freed >= need - 1e-9).all(axis=1)
        if covers.any():
            return k, float(freed[covers, 1].min())
    fewest = ENUMERATED + 1
    for c in range(len(CLASSES)):
        if need[c] > 1e-9:
            sizes = np.sort(amounts[:, c])[::-1]
            fewest = max(fewest, int(np.searchsorted(np.cumsum(sizes), need[c] - 1e-9) + 1))
    return fewest, max(float(need[1]), float(np.sort(amounts[:, 1])[:fewest].sum()))


def with_figures(snapshot: Snapshot, judge: Judge, plan: RebalancePlan,
                 flavors: Sequence[Flavor] | None = None) -> RebalancePlan:
    """``plan`` with the fleet's figures before and after its migrations."""
    plan.before, plan.after = before_after(snapshot, judge, plan.moves, flavors)
    return plan


def replayed(snapshot: Snapshot, judge: Judge, plan: RebalancePlan) -> RebalancePlan | NoPlan:
    """``plan`` (migrations alone, no new instance) once replayed step by step, or NoPlan (why)."""
    return _checked(snapshot, judge, None, plan)


def _checked(snapshot: Snapshot, judge: Judge, request: Any, plan: RebalancePlan) -> RebalancePlan | NoPlan:
    """``plan`` once replayed step by step; NoPlan (why) should a step fail."""
    wrong = replay(snapshot, judge, plan.moves, request, plan.placements)
    return plan if wrong is None else NoPlan(f"the {plan.method} plan fails its replay: {wrong}")


def _lacking(snapshot: Snapshot, wanted: np.ndarray, count: int, label: str) -> str | None:
    """Why no migrations can ever make room, if the fleet's figures alone say so."""
    usable = ~snapshot.table.disabled
    limits = snapshot.limits()
    big_enough = usable & (limits >= wanted).all(axis=1) & (snapshot.totals() >= wanted).all(axis=1)
    if not big_enough.any():
        return (f"no host can ever take {label} ({_figures(wanted)}): none has the limits for it "
                "even empty")
    free = np.maximum(snapshot.room()[usable], 0.0).sum(axis=0)
    for c, name in enumerate(CLASSES):
        if free[c] < count * wanted[c]:
            return (f"the fleet's total free {name} ({free[c]:g}) is less than the {count} x "
                    f"{wanted[c]:g} that {count} x {label} take: migrations move room, they make none")
    return None


def _figures(wanted: np.ndarray) -> str:
    return ", ".join(f"{v:g} {name}" for name, v in zip(CLASSES, wanted, strict=True))


def candidate_targets(snapshot: Snapshot, judge: Judge, flavor: Flavor,
                      how_many: int, zone: str | None = None) -> tuple[list[int], str]:
    """(the rows closest to fitting ``flavor`` that the filters accept once their movable instances
    are gone, closest first, at most ``how_many``; why there are none, when there are none)."""
    table = snapshot.table
    wanted = amounts_of(flavor)
    room = snapshot.room()
    movable = np.zeros_like(room)
    for row, residents in snapshot.on_host.items():
        for resident in residents:
            if resident.movable:
                movable[row] += resident.amounts
    usable = ~table.disabled & (snapshot.totals() >= wanted).all(axis=1)
    possible = np.flatnonzero(usable & ((room + movable) >= wanted - 1e-9).all(axis=1))
    if not len(possible):
        return [], (f"no host could take {_name(flavor)} even with every instance that may move gone "
                    f"({_figures(wanted)} asked)")
    need = np.maximum(wanted - room[possible], 0.0)
    share = (need / np.where(wanted > 0, wanted, 1.0)).sum(axis=1)
    order = possible[np.lexsort((need[:, 1], share))]
    request = request_for(flavor, 1, zone)
    found: list[int] = []
    reasons: list[str] = []
    for start in range(0, len(order), max(how_many, 1) * 4):
        chunk = order[start:start + max(how_many, 1) * 4]
        emptied = [(int(row), r) for row in chunk for r in snapshot.on_host.get(int(row), []) if r.movable]
        for row, resident in emptied:
            table.shift(row, resident.flavor, -1)
        try:
            passing = set(int(r) for r in judge.passing(snapshot, chunk, request))
            if not passing and not reasons:
                reasons.append(judge.why_not(snapshot, chunk, request) or "")
        finally:
            for row, resident in emptied:
                table.shift(row, resident.flavor, +1)
        found.extend(int(r) for r in chunk if int(r) in passing)
        if len(found) >= how_many:
            break
    if not found:
        return [], (f"no host passes the filters for {_name(flavor)} even emptied of the instances that "
                    f"may move: {reasons[0] if reasons else 'none left'}")
    return found[:how_many], ""


def _name(flavor: Flavor) -> str:
    return f"flavor {flavor.name}" if flavor.name else "the flavor"
