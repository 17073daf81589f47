"""The balance and consolidate goals planned on measured load, judged on the true load.

The fleets, one per size and seed: 10, 50 and 200 hosts, of one size (256 GB, 64 vCPUs) or
mixed (128 GB / 32 vCPUs, 256 / 64, 384 / 96), each filled to 25-40 % of its memory with a mix of
flavors (scheduler.simulation.fragmented: about 12-17 instances a host; a tenth in anti-affinity groups of 3,
ServerGroupAntiAffinityFilter enabled; 2 % pinned, never moved). Each instance's true CPU load is
a heavy-tailed share of its vCPUs (Lomax, shape 1.3, scale 0.08, at most all of them: most nearly
idle, a few busy), its true memory use 50-95 % of its flavor's. A fifth of the hosts carry load
no instance accounts for (background: 4-10 busy vCPUs and 8 GB per 64 vCPUs).

The planner is given what the agents would measure, not the true load: each instance's and each
host's background load sampled 12 times, each sample the true figure times a random factor
(gamma, mean 1, 30 % spread; memory 10 %; no sample above the instance's vCPUs or memory),
folded into a moving average (half-life 3 samples, as scheduler.policy.instance_load folds
reports). With ``--shared-load`` each fleet is also planned
as the previous release planned it: each host's measured load shared among its instances by
vCPUs (memory by memory), the fallback of scheduler.moves.fleet_snapshot.with_load. With
``--true-load`` also on the true figures themselves: what is left of the gap between predicted
and reached is the planner's, not the measurement's.

Each plan is then replayed on the true load: through the filters and the allocation limits (a
plan refused, a group with two members on a host, or a consolidation ending with more hosts in
use counts as a fault), and its figures taken as the fleet would show them.

The goals: balance (target 1.15, the goal's default; a budget of 5 % of the instances) and
consolidate (1000 migrations at most; headroom 0 and 0.2). Figures per goal, fleet and mode
(median and range over the seeds):

* balance: skew (busiest host's utilisation over the fleet's) before (true), as the plan predicts
  it after, as reached on the true load; consolidate: hosts in use, the same three;
* hosts past their vCPUs on the true load before and after the plan;
* migrations against a lower bound. Balance: for each host whose true utilisation is above the
  target times the fleet's, the fewest of its movable instances whose true load covers its
  excess, summed (a host none of whose movable instances can cover its excess, its background
  too high, is left out and counted as unreachable). Consolidate: the fewest migrations that
  empty as many hosts as the plan empties (the instances on that many emptiable hosts holding
  the fewest); beside it, the fewest hosts in use any plan can end with: the hosts holding a
  pinned instance, plus the fewest other hosts (largest first) whose capacity covers what the
  instances left take of each class (allocated vCPUs, memory and disk within the limits; true
  busy vCPUs and memory within 1 - headroom of the hosts' own), the class asking most;
* the planning time (process_time, CPU ms).

Run alone: ``python -m benchmarks.rebalance_goals [--fleets 10,50,200] [--seeds N] [--shared-load]
[--true-load] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from benchmarks import command_line, make_room
from berth_contract.request_spec import Flavor
from scheduler.cmd.arguments import positive
from scheduler.moves.fleet_snapshot import with_load
from scheduler.moves.goals.balance import TARGET_SKEW
from scheduler.moves.rebalance import NoPlan, PlannedMove, Snapshot, balance, consolidate, figures
from scheduler.moves.rebalance.judge import Judge, replay, request_for
from scheduler.policy import filters as filters_mod
from scheduler.simulation import fragmented

EQUAL = ((262144, 64, 4000),)
MIXED = ((131072, 32, 2000), (262144, 64, 4000), (393216, 96, 6000))
SIZES = {"equal": EQUAL, "mixed": MIXED}
FILL = (0.25, 0.40)  # of each host's memory
GROUPED, PINNED = 0.1, 0.02
MIX = fragmented.MIX + [Flavor(memory_mb=m, root_gb=d, ephemeral_gb=0, vcpus=c, name=n) for n, m, d, c in (
    ("c1.large", 4096, 40, 4), ("c1.xlarge", 8192, 80, 8))]
MIX_WEIGHTS = [0.25, 0.25, 0.15, 0.1, 0.15, 0.1]
LOAD_SHAPE, LOAD_SCALE = 1.3, 0.25  # Lomax: the share of its vCPUs an instance keeps busy
MEMORY_USE = (0.5, 0.95)  # of the flavor's memory
BACKGROUND_SHARE = 0.2  # of the hosts
BACKGROUND_CPU = (4.0, 10.0)  # busy vCPUs per 64 vCPUs
BACKGROUND_MEMORY = 8192.0  # MB per 64 vCPUs
SAMPLES, HALF_LIFE = 12, 3.0
CPU_NOISE, MEMORY_NOISE = 0.3, 0.1  # each sample's spread (coefficient of variation)
BUDGET = 0.05  # of the instances, for balance
CONSOLIDATE_MIGRATIONS = 1000
HEADROOMS = (0.0, 0.2)
MEASURED, SHARED, TRUE = "measured", "shared", "true"
MODES = (MEASURED, SHARED, TRUE)


@dataclasses.dataclass
class Fleet:
    """One generated fleet: the true figures and what the planner is given in each mode."""

    true: Snapshot
    given: dict[str, Snapshot]


@dataclasses.dataclass
class Outcome:
    before: float  # true, before
    seen: float  # as the planner saw it before
    predicted: float  # the plan's own after figure
    reached: float  # replayed on the true load
    overloaded: int  # hosts past their vCPUs on the true load after
    overloaded_before: int
    migrations: int
    bound: int  # the fewest migrations (see the module's docstring)
    unreachable: int  # balance: hosts no plan can bring to the target; consolidate: fewest hosts in use
    ms: float
    fault: str = ""  # what the true replay found wrong, "" when nothing
    planned: bool = True


def _measured(rng: np.random.Generator, true: np.ndarray, noise: float, most: np.ndarray) -> np.ndarray:
    """The moving average over SAMPLES noisy samples of each of ``true``, no sample above ``most``
    (no instance is seen busier than its vCPUs, nor using more than its memory)."""
    shape = 1.0 / noise**2
    samples = true[:, None] * rng.gamma(shape, 1.0 / shape, size=(len(true), SAMPLES))
    samples = np.minimum(samples, most[:, None])
    weight = 1.0 - 0.5 ** (1.0 / HALF_LIFE)
    average = samples[:, 0]
    for i in range(1, SAMPLES):
        average = average + weight * (samples[:, i] - average)
    return np.asarray(average)


def build(n_hosts: int, kind: str, seed: int, conf: Any, modes: Sequence[str]) -> Fleet:
    """The fleet of ``n_hosts`` hosts of ``kind`` sizes for ``seed``, the planner's snapshot in each
    of ``modes``."""
    base = fragmented.fragmented_fleet(n_hosts, seed, conf, low=FILL[0], high=FILL[1], sizes=SIZES[kind],
                                      mix=MIX, weights=MIX_WEIGHTS, grouped=GROUPED, pinned=PINNED)
    rng = np.random.default_rng(seed + 7919)
    residents = list(base.residents.values())
    vcpus = np.array([r.flavor.vcpus for r in residents], dtype=float)
    memory = np.array([r.flavor.memory_mb for r in residents], dtype=float)
    cpu = np.minimum(rng.pareto(LOAD_SHAPE, len(residents)) * LOAD_SCALE, 1.0) * vcpus
    mem = rng.uniform(*MEMORY_USE, len(residents)) * memory
    capacity = base.capacity()
    hidden = rng.random(n_hosts) < BACKGROUND_SHARE
    background = np.where(hidden, rng.uniform(*BACKGROUND_CPU, n_hosts) * capacity / 64, 0.0)
    background_memory = np.where(hidden, BACKGROUND_MEMORY * capacity / 64, 0.0)
    seen_cpu, seen_mem = _measured(rng, cpu, CPU_NOISE, vcpus), _measured(rng, mem, MEMORY_NOISE, memory)
    seen_background = _measured(rng, background, CPU_NOISE, capacity)
    seen_background_memory = _measured(rng, background_memory, MEMORY_NOISE, base.memory())
    rows = np.array([base.table.index[r.host] for r in residents], dtype=np.intp)

    def snapshot(loads: np.ndarray, memory_loads: np.ndarray, host_cpu: np.ndarray,
                 host_memory: np.ndarray) -> Snapshot:
        placed = [dataclasses.replace(r, load=float(c), memory_load=float(m))
                  for r, c, m in zip(residents, loads, memory_loads, strict=True)]
        load = host_cpu + np.bincount(rows, loads, minlength=n_hosts)
        memory_load = host_memory + np.bincount(rows, memory_loads, minlength=n_hosts)
        return Snapshot(base.table.copy(), placed, base.ratios, load.tolist(), memory_load.tolist())

    true = snapshot(cpu, mem, background, background_memory)
    measured = snapshot(seen_cpu, seen_mem, seen_background, seen_background_memory)
    given = {MEASURED: measured, TRUE: snapshot(cpu, mem, background, background_memory)}
    if SHARED in modes:
        given[SHARED] = shared(measured)
    return Fleet(true, {mode: given[mode] for mode in modes})


def shared(measured: Snapshot) -> Snapshot:
    """``measured`` as an agent reporting no per-instance use would have it read: each host's
    measured load shared among its instances (fleet_snapshot.with_load's fallback)."""
    table = measured.table.copy()
    capacity, memory = measured.capacity(), measured.memory()
    table.cpu_util[:] = np.divide(measured.load, capacity, out=np.zeros(len(table)), where=capacity > 0)
    table.mem_util[:] = np.divide(measured.memory_load, memory, out=np.zeros(len(table)), where=memory > 0)
    table.util_measured[:] = True
    table.instance_load = {}
    bare = [dataclasses.replace(r, load=0.0, memory_load=0.0) for r in measured.residents.values()]
    residents, load, memory_load, estimated = with_load(table, bare)
    snapshot = Snapshot(table, residents, measured.ratios, load, memory_load)
    snapshot.estimated = estimated
    return snapshot


# -- lower bounds -----------------------------------------------------------------


def fewest_to_balance(true: Snapshot, target: float) -> tuple[int, int]:
    """(the fewest migrations bringing every host that can be brought within ``target`` times the
    fleet's utilisation, the hosts that cannot be: their movable instances cannot cover their
    excess), on the true load."""
    capacity = true.capacity()
    ceiling = target * true.load.sum() / capacity.sum() * capacity
    fewest = unreachable = 0
    for row in np.flatnonzero(true.load > ceiling + 1e-9):
        excess = true.load[row] - ceiling[row]
        loads = sorted((r.load for r in true.on_host.get(int(row), []) if r.movable), reverse=True)
        shed = np.cumsum(loads)
        if len(loads) and shed[-1] >= excess - 1e-9:
            fewest += int(np.searchsorted(shed, excess - 1e-9) + 1)
        else:
            unreachable += 1
    return fewest, unreachable


def fewest_hosts(true: Snapshot, headroom: float) -> int:
    """The fewest hosts in use any plan keeping ``headroom`` can end with (see the docstring)."""
    in_use = [row for row, here in true.on_host.items() if here]
    pinned = [row for row in in_use if any(not r.movable for r in true.on_host[row])]
    others = [row for row in range(len(true)) if row not in set(pinned) and row in set(in_use)]
    keep = 1.0 - headroom
    held = np.array([r.amounts for r in true.residents.values()]).sum(axis=0)
    demand = np.append(held, [sum(r.load for r in true.residents.values()),
                              sum(r.memory_load for r in true.residents.values())])
    capacity = np.column_stack([true.limits() * keep, true.capacity() * keep, true.memory() * keep])
    left = demand - capacity[pinned].sum(axis=0)
    fewest = 0
    for column in range(capacity.shape[1]):
        sizes = np.sort(capacity[others, column])[::-1]
        if left[column] <= 1e-9:
            continue
        covered = np.cumsum(sizes)
        fewest = max(fewest, int(np.searchsorted(covered, left[column] - 1e-9) + 1))
    return len(pinned) + min(fewest, len(others))


def fewest_to_empty(true: Snapshot, hosts: int) -> int:
    """The fewest migrations that empty ``hosts`` hosts: the instances on as many hosts in use,
    holding no pinned instance, as hold the fewest."""
    counts = sorted(len(here) for here in true.on_host.values()
                    if here and all(r.movable for r in here))
    return sum(counts[:hosts])


# -- plans and their replay ---------------------------------------------------------


def hosts_in_use(snapshot: Snapshot) -> int:
    return sum(1 for here in snapshot.on_host.values() if here)


def broken_groups(snapshot: Snapshot) -> list[str]:
    """The anti-affinity groups with two members on one host."""
    return [group for group in {r.group for r in snapshot.residents.values() if r.group}
            if any(n > 1 for n in snapshot.members(group).values())]


def judged(true: Snapshot, judge: Judge, moves: list[PlannedMove], goal: str) -> tuple[float, int, str]:
    """(the goal's figure, hosts past their vCPUs, what is wrong or "") once ``moves`` are done on
    the true load."""
    refused = replay(true, judge, moves, request_for(Flavor(memory_mb=1, root_gb=0, ephemeral_gb=0,
                                                             vcpus=1), 1), [])
    if refused:
        return math.nan, 0, f"refused: {refused}"
    used = hosts_in_use(true)
    with true.moved(moves):
        figure = figures.skew(true.load, true.capacity()) if goal == "balance" else float(hosts_in_use(true))
        past = int((true.load > true.capacity() + 1e-6).sum())
        broken = broken_groups(true)
        more = goal != "balance" and hosts_in_use(true) > used
    fault = (f"anti-affinity broken: {', '.join(sorted(broken))}" if broken
             else f"{int(figure)} hosts in use after, {used} before" if more else "")
    return figure, past, fault


def plan_goal(fleet: Fleet, mode: str, goal: str, headroom: float, filters: list[Any]) -> Outcome:
    given, true = fleet.given[mode], fleet.true
    instances = len(true.residents)
    started = time.process_time()
    if goal == "balance":
        plan = balance(given, filters, TARGET_SKEW, max(1, int(instances * BUDGET)))
    else:
        plan = consolidate(given, filters, CONSOLIDATE_MIGRATIONS, headroom)
    ms = (time.process_time() - started) * 1e3
    if goal == "balance":
        before = figures.skew(true.load, true.capacity())
        seen = figures.skew(given.load, given.capacity())
    else:
        before = seen = float(hosts_in_use(true))
    moves = [] if isinstance(plan, NoPlan) else plan.moves
    reached, past, fault = judged(true, Judge(filters), moves, goal)
    predicted = seen if isinstance(plan, NoPlan) or plan.after is None else (
        plan.after.skew if goal == "balance" else float(plan.after.hosts_used))
    if goal == "balance":
        bound, unreachable = fewest_to_balance(true, TARGET_SKEW)
    else:
        bound = fewest_to_empty(true, int(round(before - reached))) if reached == reached else 0
        unreachable = fewest_hosts(true, headroom)
    past_before = int((true.load > true.capacity() + 1e-6).sum())
    return Outcome(before, seen, predicted, reached, past, past_before, len(moves), bound, unreachable, ms,
                   fault, not isinstance(plan, NoPlan))


def goals() -> list[tuple[str, float]]:
    return [("balance", 0.0)] + [("consolidate", h) for h in HEADROOMS]


def goal_name(goal: str, headroom: float) -> str:
    if goal == "balance":
        return f"balance {TARGET_SKEW:g}, {BUDGET:.0%} of instances"
    return f"consolidate <= {CONSOLIDATE_MIGRATIONS}, headroom {headroom:g}"


def summarise(kind: str, n_hosts: int, mode: str, goal: str, headroom: float, instances: list[int],
              outcomes: list[Outcome]) -> dict[str, Any]:
    ms = [o.ms for o in outcomes]
    row: dict[str, Any] = {
        "bench": "rebalance_goals", "n_hosts": n_hosts, "fleet": kind, "mode": mode, "goal": goal,
        "headroom": headroom, "policy": f"{kind}, {goal_name(goal, headroom)}, {mode}",
        "seeds": len(outcomes), "instances_min": min(instances), "instances_max": max(instances),
        "plans": sum(o.planned for o in outcomes),
        "faults": [o.fault for o in outcomes if o.fault],
        "median_ms": statistics.median(ms), "p99_ms": max(ms), "plan_ms_min": min(ms),
    }
    for name in ("before", "seen", "predicted", "reached", "overloaded", "overloaded_before", "migrations",
                 "bound", "unreachable"):
        values = [float(getattr(o, name)) for o in outcomes]
        kept = [v for v in values if v == v] or [math.nan]
        row[f"{name}_median"] = statistics.median(kept)
        row[f"{name}_min"], row[f"{name}_max"] = min(kept), max(kept)
    gaps = [abs(o.reached - o.predicted) for o in outcomes if o.reached == o.reached]
    row["gap_max"] = max(gaps) if gaps else math.nan
    return row


def measure(kind: str, n_hosts: int, seeds: int, modes: Sequence[str]) -> Iterator[dict[str, Any]]:
    conf = make_room.make_conf()
    filters = filters_mod.enabled_filters(conf)
    fleets = [build(n_hosts, kind, seed, conf, modes) for seed in range(seeds)]
    instances = [len(f.true.residents) for f in fleets]
    for goal, headroom in goals():
        for mode in modes:
            outcomes = [plan_goal(f, mode, goal, headroom, filters) for f in fleets]
            yield summarise(kind, n_hosts, mode, goal, headroom, instances, outcomes)


def _range(row: dict[str, Any], name: str, digits: int) -> str:
    median, low, high = row[f"{name}_median"], row[f"{name}_min"], row[f"{name}_max"]
    text = f"{median:.{digits}f}"
    return text if low == high else f"{text} ({low:.{digits}f}-{high:.{digits}f})"


def describe(row: dict[str, Any]) -> str:
    balancing = row["goal"] == "balance"
    digits = 3 if balancing else 0
    figure = "skew" if balancing else "hosts in use"
    bound = (f"unreachable hosts {_range(row, 'unreachable', 0)}" if balancing
             else f"fewest hosts any plan reaches {_range(row, 'unreachable', 0)}")
    faults = "; ".join(row["faults"]) or "none"
    return (f"{row['mode']}: {figure} {_range(row, 'before', digits)} (planner saw "
            f"{_range(row, 'seen', digits)}) -> predicted {_range(row, 'predicted', digits)}, reached "
            f"{_range(row, 'reached', digits)}; past their vCPUs {_range(row, 'overloaded_before', 0)} -> "
            f"{_range(row, 'overloaded', 0)}; "
            f"migrations {_range(row, 'migrations', 0)} vs lower bound {_range(row, 'bound', 0)} ({bound}); "
            f"plan CPU ms {row['median_ms']:.0f} ({row['plan_ms_min']:.0f}-{row['p99_ms']:.0f}); "
            f"plans {row['plans']}/{row['seeds']}; faults: {faults}")


COLUMNS = (("fleet", 5), ("hosts", 5), ("inst", 9), ("goal", 18), ("mode", 8), ("before", 19),
           ("seen", 19), ("predicted", 19), ("reached", 19), ("past", 10), ("migr", 13), ("bound", 13),
           ("unreach/fewest", 14), ("plan CPU ms", 13), ("faults", 6))


def header() -> str:
    return " ".join(f"{name:<{width}}" for name, width in COLUMNS)


def headline(row: dict[str, Any]) -> str:
    """``row`` under ``header``: each figure its median (and range over the seeds)."""
    digits = 3 if row["goal"] == "balance" else 0
    goal = "balance" if row["goal"] == "balance" else f"consolidate h={row['headroom']:g}"
    cells = (row["fleet"], f"{row['n_hosts']}", f"{row['instances_min']}-{row['instances_max']}", goal,
             row["mode"], *(_range(row, n, digits) for n in ("before", "seen", "predicted", "reached")),
             f"{row['overloaded_before_median']:.0f}->{_range(row, 'overloaded', 0)}",
             *(_range(row, n, 0) for n in ("migrations", "bound", "unreachable")),
             f"{row['median_ms']:.0f} ({row['plan_ms_min']:.0f}-{row['p99_ms']:.0f})",
             "; ".join(row["faults"]) or "none")
    return " ".join(f"{cell:<{width}}" for cell, (_name, width) in zip(cells, COLUMNS, strict=True))


fleet_sizes = command_line.counts("host counts", low=2)


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(f"--{prefix}fleets", type=fleet_sizes, default=[10, 50, 200],
                        help="fleet sizes, hosts (default 10,50,200)")
    parser.add_argument(f"--{prefix}kinds", type=command_line.names("kinds", SIZES), default=list(SIZES),
                        help="host sizes: equal (64 vCPUs), mixed (32/64/96) (default both)")
    parser.add_argument(f"--{prefix}seeds", type=positive, default=3,
                        help="fleets per size and kind (default 3)")
    parser.add_argument(f"--{prefix}shared-load", action="store_true",
                        help="also plan on each host's load shared among its instances by vCPUs, as "
                        "the previous release did")
    parser.add_argument(f"--{prefix}true-load", action="store_true",
                        help="also plan on the true load, no measurement error")


def rows(fleets: list[int], seeds: int, kinds: Sequence[str] = tuple(SIZES), shared_load: bool = False,
         true_load: bool = False) -> Iterator[dict[str, Any]]:
    modes = [MEASURED] + [SHARED] * shared_load + [TRUE] * true_load
    for n in fleets:
        for kind in kinds:
            yield from measure(kind, n, seeds, modes)


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.rebalance_goals", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    if not args.json:
        print(header())
    command_line.print_rows(rows(args.fleets, args.seeds, args.kinds, args.shared_load,
                                 args.true_load), args.json, headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
