"""Balancing real load: Berth's balance goal beside Watcher's workload-balance strategy.

The fleets:

* CloudStack's simulation fleet (scheduler.simulation.cloudstack: 9 hosts of 192 cores, 60 cores
  of hidden load on every third, VMs of 4 cores / 8 GB arriving 8 a minute, 35 % busy, each
  living 10 to 59 minutes), placed by the policy named; every 30 simulated minutes after the
  first lifetimes have run out, the fleet as the simulator holds it is a sample;
* generated fleets: hosts of 256 GB and 64 vCPUs (cpu ratio 4) filled to 55-80 % of their
  memory with a mix of flavors (some in anti-affinity groups), 35 % of the instances busy (the
  others at 5 % of their vCPUs), 16 busy vCPUs of hidden load on every third host.

On each sample both get the same budget, 5 % of the instances, and the skew is measured the
same way (max / mean of each host's real load, hidden load included, as ``berth simulate``
reports it):

* Berth: ``balance`` (target 1.15, the issue's), every destination judged by the filters;
* Watcher: its workload_balance strategy's rule (watcher/decision_engine/strategy/strategies/
  workload_balance.py), one migration per audit as Watcher makes it, audits repeated while
  each finds one and the budget lasts: a host whose instances' CPU use is at or above
  ``threshold`` % of its vCPUs is overloaded; from the most loaded one, the instance whose use
  comes closest to, without exceeding, the host's excess over the mean; to the least loaded
  host under the threshold with free vCPUs, memory and disk for it where its use stays under
  the threshold. Watcher sees the instances' use only, not the hidden load. It is run with its
  default threshold (25 %) and with the threshold at the fleet's mean use (every host above the
  mean a source), the best an operator can tune it to here.

Figures per fleet and planner: skew before and after (median and quartiles over the samples),
instances moved (% of all), samples meeting the issue's target (skew <= 1.15 with at most 5 %
moved), and the CPU time of a plan (process_time; median and quartiles).

Run alone: ``python -m benchmarks.balance [--hosts 100,1000] [--seeds N] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks import command_line, make_room
from benchmarks.summary import quartiles
from scheduler.cmd.arguments import positive
from scheduler.moves.rebalance import NoPlan, PlannedMove, Snapshot, balance, figures
from scheduler.policy import filters as filters_mod
from scheduler.simulation import cloudstack as real_load_skew
from scheduler.simulation import engine, fragmented
from scheduler.simulation.inputs import generate_fleet

TARGET = 1.15
BUDGET = 0.05  # of the instances
PROBE_EVERY = 1800.0  # simulated seconds between the CloudStack fleet's samples
BUSY, IDLE = 0.35, 0.05
HIDDEN = 16.0  # busy vCPUs on every third generated host
WATCHER_THRESHOLD = 25.0


def watcher_workload_balance(snapshot: Snapshot, threshold: float | None, audits: int) -> list[PlannedMove]:
    """Watcher's workload_balance rule, one migration per audit, ``audits`` at most (it stops at the
    first audit that finds none). ``threshold`` None: the fleet's mean use, in %. The snapshot is
    left as it was."""
    table = snapshot.table
    enabled = np.flatnonzero(~np.asarray(table.disabled, dtype=bool))
    vcpus = np.asarray(table.vcpus_total, dtype=float)
    if threshold is None:
        use = _instance_use(snapshot)
        threshold = float(use[enabled].sum() / vcpus[enabled].sum() * 100)
    level = threshold
    return snapshot.planned(lambda done: _watcher_audit(snapshot, enabled, vcpus, level), audits)


def _instance_use(snapshot: Snapshot) -> np.ndarray:
    """Each host's workload as Watcher sums it: its instances' CPU use, in vCPUs."""
    use = np.zeros(len(snapshot))
    for row, residents in snapshot.on_host.items():
        use[row] = sum(r.load for r in residents)
    return use


def _watcher_audit(snapshot: Snapshot, enabled: np.ndarray, vcpus: np.ndarray,
                   threshold: float) -> PlannedMove | None:
    workload = _instance_use(snapshot)
    util = workload / vcpus * 100
    overloaded = [int(r) for r in enabled if util[r] >= threshold]
    targets = [int(r) for r in enabled if util[r] < threshold]
    if not overloaded or not targets:
        return None
    average = workload[enabled].sum() / len(enabled)
    chosen = None
    for row in sorted(overloaded, key=lambda r: -util[r]):  # choose_instance_to_migrate
        delta = workload[row] - average
        best, least = None, 1_000_000.0
        for resident in snapshot.on_host.get(row, []):
            if not resident.movable:  # watcher_exclude
                continue
            current = delta - resident.load
            if 0 <= current < least:
                best, least = resident, current
        if best is not None:
            chosen = (row, best)
            break
    if chosen is None:
        return None
    row, resident = chosen
    room = snapshot.room()
    fits = [t for t in targets  # filter_destination_hosts
            if (room[t] >= np.array(resident.amounts) - 1e-9).all()
            and resident.load + workload[t] < threshold / 100 * vcpus[t]]
    if not fits:
        return None
    to = min(fits, key=lambda t: util[t])
    names = snapshot.table.names
    return PlannedMove(resident.uuid, names[row], names[to], "watcher workload_balance", resident.amounts[1])


@dataclasses.dataclass
class Outcome:
    before: float
    after: float
    moved: float  # share of the instances
    seconds: float
    needed: float  # share of the instances no plan reaching the target can move less of


def fewest_to_target(snapshot: Snapshot, target: float) -> int:
    """Migrations no plan bringing the skew to ``target`` can do with fewer of: each host over
    target x mean sheds its excess with its most loaded movable instances."""
    load = snapshot.load
    ceiling = target * load.mean()
    fewest = 0
    for row in np.flatnonzero(load > ceiling + 1e-9):
        excess = load[row] - ceiling
        loads = sorted((r.load for r in snapshot.on_host.get(int(row), []) if r.movable), reverse=True)
        shed = np.cumsum(loads)
        fewest += int(np.searchsorted(shed, excess - 1e-9) + 1) if len(loads) and shed[-1] >= excess - 1e-9 \
            else len(snapshot.residents) + 1
    return fewest


def compare(snapshot: Snapshot, filters: list[Any]) -> dict[str, Outcome]:
    """Each planner on ``snapshot`` with 5 % of its instances as budget."""
    instances = len(snapshot.residents)
    budget = max(1, int(instances * BUDGET))
    before = figures.skew(snapshot.load)
    needed = min(fewest_to_target(snapshot, TARGET), instances) / instances
    outcomes = {}
    planners = {
        "berth balance": lambda: _migrations(balance(snapshot, filters, TARGET, budget)),
        f"watcher, threshold {WATCHER_THRESHOLD:g} %": lambda: watcher_workload_balance(
            snapshot, WATCHER_THRESHOLD, budget),
        "watcher, threshold at the mean": lambda: watcher_workload_balance(snapshot, None, budget),
    }
    for name, plan in planners.items():
        started = time.process_time()
        migrations = plan()
        seconds = time.process_time() - started
        with snapshot.moved(migrations):
            after = figures.skew(snapshot.load)
        outcomes[name] = Outcome(before, after, len(migrations) / instances, seconds, needed)
    return outcomes


def _migrations(plan: Any) -> list[PlannedMove]:
    return [] if isinstance(plan, NoPlan) else plan.moves


class _Probe:
    """Stands for a rebalance spec in the simulator: at each call past the warm-up, compares the
    planners on the fleet as the simulator holds it, and moves nothing."""

    every = PROBE_EVERY

    def __init__(self, warmup: float) -> None:
        self.warmup = warmup
        self.calls = 0
        self.samples: list[dict[str, Outcome]] = []

    def plan(self, snapshot: Snapshot, filters: list[Any]) -> NoPlan:
        self.calls += 1
        if self.calls * self.every > self.warmup:
            self.samples.append(compare(snapshot, filters))
        return NoPlan("a benchmark's probe")


def cloudstack_samples(policy: str, seeds: int) -> list[dict[str, Outcome]]:
    samples: list[dict[str, Outcome]] = []
    for seed in range(seeds):
        hosts = generate_fleet(real_load_skew.HOSTS, [(real_load_skew.MEMORY_MB, real_load_skew.CORES,
                                                       real_load_skew.DISK_GB)],
                               hidden_cores=real_load_skew.HIDDEN_CORES)
        probe = _Probe(real_load_skew.WARMUP * real_load_skew.BATCH_SECONDS)
        engine.run(policy, real_load_skew.policy_conf(*real_load_skew.POLICIES[policy]), hosts,
                   real_load_skew.workload(seed), report_interval=real_load_skew.BATCH_SECONDS, seed=seed,
                   concurrent=True, rebalance=probe)  # type: ignore[arg-type]
        samples.extend(probe.samples)
    return samples


def loaded_fleet(n_hosts: int, seed: int, conf: Any) -> Snapshot:
    """A generated fleet (see the module's docstring) with measured load."""
    base = fragmented.fragmented_fleet(n_hosts, seed, conf, low=0.55, high=0.8, sizes=((262144, 64, 4000),))
    rng = np.random.default_rng(seed + 1)
    residents = [dataclasses.replace(r, load=r.flavor.vcpus * (1.0 if rng.random() < BUSY else IDLE))
                 for r in base.residents.values()]
    load = np.zeros(n_hosts)
    load[::3] = HIDDEN
    for resident in residents:
        load[base.table.index[resident.host]] += resident.load
    return Snapshot(base.table, residents, base.ratios, load)


def generated_samples(n_hosts: int, seeds: int) -> list[dict[str, Outcome]]:
    conf = make_room.make_conf()
    filters = filters_mod.enabled_filters(conf)
    return [compare(loaded_fleet(n_hosts, seed, conf), filters) for seed in range(seeds)]


def summarise(fleet: str, n_hosts: int, samples: list[dict[str, Outcome]]) -> Iterator[dict[str, Any]]:
    for planner in samples[0]:
        outcomes = [sample[planner] for sample in samples]
        before = quartiles([o.before for o in outcomes])
        after = quartiles([o.after for o in outcomes])
        ms = quartiles([o.seconds * 1e3 for o in outcomes])
        moved = [o.moved * 100 for o in outcomes]
        met = sum(1 for o in outcomes if o.after <= TARGET + 1e-9 and o.moved <= BUDGET + 1e-9)
        feasible = sum(1 for o in outcomes if o.needed <= BUDGET + 1e-9)
        yield {
            "bench": "balance", "n_hosts": n_hosts, "policy": f"{fleet}, {planner}", "fleet": fleet,
            "planner": planner, "samples": len(outcomes),
            "skew_before_q1": before[0], "skew_before_median": before[1], "skew_before_q3": before[2],
            "skew_after_q1": after[0], "skew_after_median": after[1], "skew_after_q3": after[2],
            "moved_pct_median": statistics.median(moved), "moved_pct_max": max(moved),
            "met_target": met, "target_within_reach": feasible,
            "needed_pct_median": statistics.median(o.needed * 100 for o in outcomes),
            "plan_ms_q1": ms[0], "median_ms": ms[1], "plan_ms_q3": ms[2],
            "p99_ms": max(o.seconds * 1e3 for o in outcomes),
        }


def describe(row: dict[str, Any]) -> str:
    return (f"skew {row['skew_before_median']:.3f} -> {row['skew_after_median']:.3f} "
            f"(after: {row['skew_after_q1']:.3f}-{row['skew_after_q3']:.3f}), moved "
            f"{row['moved_pct_median']:.1f} % (max {row['moved_pct_max']:.1f} %), skew <= {TARGET} within "
            f"{BUDGET:.0%}: {row['met_target']}/{row['samples']} (within reach of any plan: "
            f"{row['target_within_reach']}, fewest moves to it >= {row['needed_pct_median']:.1f} %); "
            f"plan CPU ms {row['plan_ms_q1']:.1f}-{row['plan_ms_q3']:.1f}")


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(f"--{prefix}hosts", type=make_room.host_counts, default=[100, 1000],
                        help="generated fleet sizes (default 100,1000)")
    parser.add_argument(f"--{prefix}seeds", type=positive, default=5,
                        help="generated fleets per size, and CloudStack workloads (default 5)")
    parser.add_argument(f"--{prefix}policies", type=command_line.names("policies", real_load_skew.POLICIES),
                        default=["allocation", "balanced"],
                        help="the policies placing the CloudStack workload, comma-separated, of "
                        f"{', '.join(real_load_skew.POLICIES)} (default allocation,balanced)")


def rows(hosts: list[int], seeds: int, policies: list[str] = ["allocation", "balanced"]  # noqa: B006
         ) -> Iterator[dict[str, Any]]:
    for policy in policies:
        yield from summarise(f"cloudstack/{policy}", real_load_skew.HOSTS, cloudstack_samples(policy, seeds))
    for n in hosts:
        yield from summarise("generated", n, generated_samples(n, seeds))


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.balance", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    command_line.print_rows(rows(args.hosts, args.seeds, args.policies), args.json,
                            lambda row: f"{row['n_hosts']:>6,} hosts  {row['policy']:<50} {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
