"""The exact plan: an integer program over the candidate targets, solved by HiGHS (scipy.optimize.milp).

Variables: ``x[i, d]`` (instance i moves to host d, for the destinations the filters accept for
it), ``u[t]`` (candidate t is a target: instances may leave it, none arrive) and ``y[t]`` (how
many of the new instances it takes). Constraints: an instance moves at most once and only off
a target; a target holds what stays plus its new instances within its limits; a destination
takes, within its room, what arrives, and is no target; an anti-affinity group gets no more
members on a host than its rule allows; the new instances are all placed. Objective: the
number of migrations, then the memory they move (weighted below one migration in total).

As every source only gives and every destination only takes, the migrations can run in any
order without a host going over its limits at any step. scipy's milp takes no starting point:
the greedy plan enters as a bound on the number of migrations (the solver looks for no worse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from berth_contract.request_spec import RequestSpec
from scheduler.moves.rebalance.greedy import Draft
from scheduler.moves.rebalance.judge import Judge
from scheduler.moves.rebalance.snapshot import PlannedMove, Resident, Snapshot, amounts_of
from scheduler.policy import server_groups
from scheduler.policy.filters.affinity import max_per_host

if TYPE_CHECKING:  # scipy is imported by the solve only: every command and daemon imports this module
    from scipy import optimize

#: Destinations kept per instance (the roomiest the filters accept, and the greedy plan's).
DESTINATIONS = 24
#: Beyond this many variables the program is not solved: the greedy plan is the answer.
MAX_VARIABLES = 40_000


@dataclasses.dataclass
class Solved:
    draft: Draft | None
    optimal: bool  # proven optimal over the candidates (else: the best found in the time limit)
    status: str  # the solver's message
    variables: int


class _Rows:
    """The constraint matrix, a row at a time."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        row = len(self.lower)
        for col, val in entries:
            self.rows.append(row)
            self.cols.append(col)
            self.vals.append(val)
        self.lower.append(lo)
        self.upper.append(hi)

    def constraint(self, n: int) -> optimize.LinearConstraint:
        from scipy import optimize, sparse

        matrix = sparse.csr_array((self.vals, (self.rows, self.cols)), shape=(len(self.lower), n))
        return optimize.LinearConstraint(matrix, self.lower, self.upper)


def _pairs(snapshot: Snapshot, judge: Judge, targets: Sequence[int], hinted: dict[str, int],
           destinations: int) -> tuple[list[Resident], list[tuple[int, int]]]:
    """(the movable instances of the targets that have a destination, [(instance index, destination
    row)]: the roomiest rows the filters accept for it, the targets, and the greedy plan's)."""
    room = snapshot.room()
    is_target = np.zeros(len(snapshot), dtype=bool)
    is_target[list(targets)] = True
    movers: list[Resident] = []
    pairs: list[tuple[int, int]] = []
    for t in targets:
        for resident in snapshot.on_host.get(int(t), []):
            if not resident.movable:
                continue
            mask = judge.destinations(snapshot, resident)
            mask &= (room >= np.array(resident.amounts) - 1e-9).all(axis=1)
            rows = np.flatnonzero(mask & ~is_target)
            rows = rows[np.argsort(-room[rows, 1], kind="stable")][:destinations]
            chosen = {int(r) for r in rows} | {int(r) for r in np.flatnonzero(mask & is_target)}
            if resident.uuid in hinted:
                chosen.add(hinted[resident.uuid])
            if chosen:
                movers.append(resident)
                pairs.extend((len(movers) - 1, d) for d in sorted(chosen))
    return movers, pairs


def _anti_affinity(snapshot: Snapshot, movers: list[Resident], pairs: list[tuple[int, int]],
                   rows: _Rows) -> None:
    """No more members of an anti-affinity group on a destination than its rule allows."""
    grouped: dict[tuple[str, int], list[int]] = {}
    for col, (i, d) in enumerate(pairs):
        resident = movers[i]
        if resident.group is not None and server_groups.policy(resident.spec) == server_groups.ANTI_AFFINITY:
            grouped.setdefault((resident.group, d), []).append(col)
    for (group, d), columns in grouped.items():
        if len(columns) > 1:
            allowed = max_per_host(movers[pairs[columns[0]][0]].spec)
            left = allowed - snapshot.members(group).get(snapshot.table.names[d], 0)
            rows.add([(col, 1.0) for col in columns], -np.inf, float(max(left, 0)))


def solve(snapshot: Snapshot, judge: Judge, request: RequestSpec, targets: Sequence[int],
          time_limit: float, bound: Draft | None = None, destinations: int = DESTINATIONS) -> Solved:
    """The cheapest plan over ``targets`` (rows), within ``time_limit`` seconds (wall time, as
    HiGHS counts it), no worse than ``bound`` in migrations."""
    table = snapshot.table
    count = request.num_instances
    flavor = amounts_of(request.flavor)
    room = snapshot.room()
    target_index = {int(t): k for k, t in enumerate(targets)}
    hinted = {m.instance: table.index[m.destination] for m in bound.moves} if bound is not None else {}
    movers, pairs = _pairs(snapshot, judge, targets, hinted, destinations)
    amounts = np.array([movers[i].amounts for i, _ in pairs]).reshape(-1, 3)
    n_x, n_t = len(pairs), len(targets)
    n = n_x + 2 * n_t  # x, then u, then y
    if n > MAX_VARIABLES:
        return Solved(None, False, f"{n} variables, over the {MAX_VARIABLES} the solver is given", n)
    u0, y0 = n_x, n_x + n_t
    cost = np.zeros(n)
    cost[:n_x] = 1.0 + amounts[:, 1] / (amounts[:, 1].sum() + 1.0)

    rows = _Rows()
    by_mover: dict[int, list[int]] = {}
    by_destination: dict[int, list[int]] = {}
    leaving: dict[int, list[int]] = {}
    for col, (i, d) in enumerate(pairs):
        by_mover.setdefault(i, []).append(col)
        by_destination.setdefault(d, []).append(col)
        leaving.setdefault(target_index[table.index[movers[i].host]], []).append(col)
    # an instance moves at most once, and only off a target
    for i, columns in by_mover.items():
        source = target_index[table.index[movers[i].host]]
        rows.add([(c, 1.0) for c in columns] + [(u0 + source, -1.0)], -np.inf, 0.0)
    # a target holds what stays and its new instances within its limits
    for t, k in target_index.items():
        for c in range(3):
            slack = max(0.0, -room[t, c])
            entries = [(col, -amounts[col, c]) for col in leaving.get(k, [])]
            rows.add(entries + [(y0 + k, flavor[c]), (u0 + k, slack)], -np.inf, room[t, c] + slack)
        rows.add([(y0 + k, 1.0), (u0 + k, -float(count))], -np.inf, 0.0)
    rows.add([(y0 + k, 1.0) for k in range(n_t)], count, count)
    # a destination takes what arrives within its room, and is no target
    for d, columns in by_destination.items():
        for c in range(3):
            if amounts[columns, c].any():
                rows.add([(col, amounts[col, c]) for col in columns], -np.inf, max(0.0, room[d, c]))
        if d in target_index:
            rows.add([(col, 1.0) for col in columns] + [(u0 + target_index[d], float(len(columns)))],
                     -np.inf, float(len(columns)))
    _anti_affinity(snapshot, movers, pairs, rows)
    if bound is not None:
        rows.add([(col, 1.0) for col in range(n_x)], -np.inf, float(len(bound.moves)))

    from scipy import optimize

    result = optimize.milp(
        cost, integrality=np.ones(n),
        bounds=optimize.Bounds(np.zeros(n), np.concatenate([np.ones(n_x + n_t), np.full(n_t, float(count))])),
        constraints=rows.constraint(n),
        options={"time_limit": max(time_limit, 0.01), "mip_rel_gap": 1e-9, "disp": False})
    if result.x is None:
        return Solved(None, result.status == 2, result.message, n)
    x = np.round(result.x).astype(int)
    label = f"flavor {request.flavor.name}" if request.flavor.name else "the flavor"
    migrations = []
    for chosen in np.flatnonzero(x[:n_x]):
        i, d = pairs[int(chosen)]
        resident = movers[i]
        migrations.append(PlannedMove(resident.uuid, resident.host, table.names[d],
                                    f"frees room on {resident.host} for {label}", resident.amounts[1]))
    migrations.sort(key=lambda m: (m.source, -m.memory_mb))
    placements = [table.names[t] for t, k in target_index.items() for _ in range(int(x[y0 + k]))]
    return Solved(Draft(migrations, placements), result.status == 0, result.message, n)
