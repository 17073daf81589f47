"""Whether a refused request failed only through fragmentation, and what the refusal can say of it.

A request fails through fragmentation when the hosts its other constraints allow (every filter
passes it there but for room) have room for it in total but none has it alone, and moving
instances off some of them would give it room. The hosts are examined closest to fitting first,
each with the greedy planner (the instances to move chosen on the host, each sent where the
filters accept it), until all are examined or the time limit runs out; what is said is only what
was found or proven: a count or "at least", the fewest migrations or "at most".

No I/O: the instances on the hosts come from ``residents_of``, asked for a few hosts at a time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.exception import NoValidHost
from scheduler.moves.rebalance import greedy
from scheduler.moves.rebalance.judge import Judge
from scheduler.moves.rebalance.planner import lower_bound
from scheduler.moves.rebalance.snapshot import CLASSES, Resident, Snapshot, amounts_of
from scheduler.policy.selection import candidates

#: Hosts whose instances are asked for at once (not cut short by the time limit).
CHUNK = 2

#: The instances on the named hosts that may be moved.
ResidentsOf = Callable[[Sequence[str]], Iterable[Resident]]


@dataclasses.dataclass(frozen=True)
class Hint:
    """Hosts found that would take the request once instances move off them."""

    hosts: int
    #: Every other host the request's constraints allow was proven unable to take it.
    all_counted: bool
    examined: int
    possible: int  # hosts the request's constraints allow that are large enough
    migrations: int  # of the cheapest plan found
    memory_mb: float
    #: No plan off any host moves fewer instances (nor, with as many, less memory).
    fewest: bool
    fewest_migrations: bool

    def text(self, flavor: Flavor, zone: str | None = None, command: bool = True) -> str:
        """The words a refusal ends with."""
        many = self.hosts != 1
        hosts = f"{'' if self.all_counted else 'at least '}{self.hosts} host{'s' if many else ''}"
        said = f"{hosts} would have room after moving instances off {'them' if many else 'it'}"
        plural = "s" if self.migrations != 1 else ""
        if self.fewest:
            cost = f"fewest: {self.migrations} migration{plural}, {memory(self.memory_mb)}"
        elif self.fewest_migrations:
            cost = f"fewest: {self.migrations} migration{plural}, at most {memory(self.memory_mb)}"
        else:
            cost = (f"fewest: at most {self.migrations} migration{plural}; the plan found moves "
                    f"{memory(self.memory_mb)}")
        if self.examined < self.possible:
            cost += f"; {self.examined} of {self.possible} hosts examined within the time limit"
        said = f"fragmentation: {said} ({cost})"
        if command and flavor.name:
            said += f"; `berth rebalance plan --make-room {flavor.name}{f' --zone {zone}' if zone else ''}`"
        return said


@dataclasses.dataclass(frozen=True)
class NoHint:
    """Why no hint is given."""

    reason: str
    #: The time limit ran out (else: the request does not fail through fragmentation alone).
    timed_out: bool = False

    def __bool__(self) -> bool:
        return False


def memory(memory_mb: float) -> str:
    gb = memory_mb / 1024
    return f"{gb:g} GB" if gb == round(gb, 2) else f"{memory_mb:g} MB"


def fragmentation(snapshot: Snapshot, spec: RequestSpec, filters: Sequence[Any], residents_of: ResidentsOf,
                  time_limit: float, clock: Callable[[], float] = time.monotonic) -> Hint | NoHint:
    """Whether ``spec`` (one instance, refused) fails only through fragmentation on ``snapshot``
    (whose residents are added as they are read) with ``filters`` enabled, examining hosts for at
    most about ``time_limit`` seconds (checked between hosts). The table is left as it was."""
    deadline = clock() + time_limit
    if spec.num_instances != 1:
        return NoHint("a request of several instances (the hint is for one)")
    table = snapshot.table
    try:
        rows, forced = candidates(table, np.arange(len(table), dtype=np.intp), spec)
    except NoValidHost as exc:
        return NoHint(str(exc))
    if forced:
        return NoHint("the request names its host")
    judge = Judge(filters)
    # The hosts its other constraints allow: the filters with the classic amounts left out.
    unsized = dataclasses.replace(spec, flavor=dataclasses.replace(
        spec.flavor, memory_mb=0, root_gb=0, ephemeral_gb=0, vcpus=0))
    allowed = judge.passing(snapshot, rows, unsized)
    if not len(allowed):
        return NoHint(f"no host passes the filters whatever its room "
                      f"({judge.why_not(snapshot, rows, unsized)})")
    wanted = amounts_of(spec.flavor)
    large = allowed[(snapshot.limits()[allowed] >= wanted - 1e-9).all(axis=1)]
    if not len(large):
        return NoHint("no host it may use is large enough even empty")
    room = snapshot.room()
    free = np.maximum(room[allowed], 0.0).sum(axis=0)
    for c, name in enumerate(CLASSES):
        if free[c] < wanted[c]:
            return NoHint(f"the hosts it may use have {free[c]:g} {name} free in total, less than its "
                          f"{wanted[c]:g}: migrations move room, they make none")
    need = np.maximum(wanted - room[large], 0.0)
    share = (need / np.where(wanted > 0, wanted, 1.0)).sum(axis=1)
    order = large[np.lexsort((need[:, 1], share))]
    return _count(snapshot, judge, spec, order, residents_of, deadline, clock)


def _count(snapshot: Snapshot, judge: Judge, spec: RequestSpec, order: np.ndarray, residents_of: ResidentsOf,
           deadline: float, clock: Callable[[], float]) -> Hint | NoHint:
    """Free each host of ``order`` in turn (greedy), until all are done or ``deadline``."""
    names = snapshot.table.names
    found = 0
    unproven = False  # a host where no plan was found but none was proven impossible
    best: tuple[int, float] | None = None
    floor: tuple[int, float] | None = None  # the lowest lower bound of the hosts examined
    examined = 0
    target = np.zeros(len(snapshot), dtype=bool)
    for position, row in enumerate(int(r) for r in order):
        if clock() >= deadline:
            break
        if position % CHUNK == 0:
            chunk = [names[int(r)] for r in order[position:position + CHUNK]]
            snapshot.add(r for r in residents_of(chunk) if r.uuid not in snapshot.residents)
        examined += 1
        bound = lower_bound(snapshot, row, spec)
        if bound is None:
            continue  # all its movable instances gone, it still has no room
        floor = bound if floor is None else min(floor, bound)
        target[row] = True
        done = greedy.free_target(snapshot, judge, row, spec, 0, target)
        target[row] = False
        if done is None:
            unproven = True
            continue
        for migration in reversed(done):
            snapshot.move(migration.instance, migration.source)
        if not done:
            return NoHint(f"{names[row]} takes it as it is now: the fleet changed since the refusal")
        cost = (len(done), sum(m.memory_mb for m in done))
        found += 1
        best = cost if best is None or cost < best else best
    if best is None:
        if examined < len(order):
            return NoHint(f"the time limit ran out after {examined} of {len(order)} hosts, none found that "
                          "migrations free for it", timed_out=True)
        return NoHint(f"no host is freed for it by migrations the filters accept ({examined} examined)")
    complete = examined == len(order)
    assert floor is not None
    return Hint(hosts=found, all_counted=complete and not unproven, examined=examined, possible=len(order),
                migrations=best[0], memory_mb=best[1], fewest=complete and floor >= best,
                fewest_migrations=best[0] == 1 or (complete and floor[0] >= best[0]))
