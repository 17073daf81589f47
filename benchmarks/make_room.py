"""Making room for a large flavor on fragmented fleets: the planner's exact and greedy plans.

Each fleet: hosts of 128 or 256 GB, 32 or 64 vCPUs (ratio 4) and 2 or 4 TB, each filled at
random to 85-95 % of its memory with a mix of flavors (some instances in anti-affinity groups
of 3, spread one to a host; a few pinned, never moved), and a large flavor (64 GB, 16 vCPUs,
160 GB) that fits on none. For each seed, ``make_room`` is asked for room for it three ways on
the same fleet: greedy alone, exact alone (the integer program, no warm start, its optimum
over the candidate targets), and ``auto`` (the greedy plan, then the exact one within the
time limit): the planner as it runs.

Figures: how often the greedy plan exists when the exact one does, its migrations against
the exact optimum (the share within 1 migration, and equal), the CPU time of each plan
(process_time; median and p95 over the seeds), at 1,000 and 10,000 hosts. Every plan is
replayed step by step by the planner itself before it is returned.

Run alone: ``python -m benchmarks.make_room [--hosts 1000,10000] [--seeds N] [--json]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid as uuidlib
from typing import Any

import numpy as np

from benchmarks import command_line
from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from scheduler import conf as berth_conf
from scheduler.cmd.arguments import positive
from scheduler.conf import opts as conf_opts
from scheduler.moves.rebalance import Resident, Snapshot, make_room
from scheduler.moves.rebalance.planner import AUTO, EXACT, GREEDY
from scheduler.policy import filters as filters_mod
from scheduler.policy.host_state import HostTable

MIX = [Flavor(memory_mb=m, root_gb=d, ephemeral_gb=0, vcpus=c, name=n) for n, m, d, c in (
    ("m1.small", 2048, 20, 1), ("m1.medium", 4096, 40, 2), ("m1.large", 8192, 80, 4),
    ("m1.xlarge", 16384, 160, 8))]
MIX_WEIGHTS = [0.3, 0.3, 0.25, 0.15]
LARGE = Flavor(memory_mb=65536, root_gb=160, ephemeral_gb=0, vcpus=16, name="m1.huge")
FILTERS = ["ComputeFilter", "RamFilter", "DiskFilter", "CoreFilter", "ServerGroupAntiAffinityFilter",
           "ServerGroupAffinityFilter"]
RATIOS = {"cpu": 4.0, "ram": 1.0, "disk": 1.0}


def make_conf(filters: list[str] = FILTERS) -> Any:
    conf = berth_conf.new_conf()
    conf_opts.register_plugin_opts(conf)
    conf([], project="berth-bench", default_config_files=[])
    conf.set_override("enabled_filters", filters, "filter_scheduler")
    for resource, ratio in RATIOS.items():
        conf.set_override(f"{resource}_allocation_ratio", ratio, "filter_scheduler")
    return conf


def fragmented_fleet(n_hosts: int, seed: int, conf: Any, low: float = 0.85, high: float = 0.95,
                     sizes: tuple[tuple[int, int, int], ...] = ((131072, 32, 2000), (262144, 64, 4000)),
                     mix: list[Flavor] = MIX, weights: list[float] = MIX_WEIGHTS, grouped: float = 0.1,
                     pinned: float = 0.03) -> Snapshot:
    """A Snapshot of ``n_hosts`` hosts each filled to ``low``-``high`` of its memory by instances of
    ``mix``; a share ``grouped`` of them in anti-affinity groups of 3 (one per host), ``pinned``
    not movable."""
    rng = np.random.default_rng(seed)
    table = HostTable(capacity=n_hosts)
    now = time.monotonic()
    table.clock = lambda: now
    residents: list[Resident] = []
    groups: list[dict[str, Any]] = []
    for i in range(n_hosts):
        host = f"host-{i:05d}"
        memory, vcpus, disk = sizes[int(rng.integers(0, len(sizes)))]
        goal = memory * float(rng.uniform(low, high))
        used = np.zeros(3)
        while True:
            flavor = mix[int(rng.choice(len(mix), p=weights))]
            amounts = np.array([flavor.vcpus, flavor.memory_mb, flavor.disk_gb], dtype=float)
            if not _fits(used, amounts, goal, vcpus, disk):
                smallest = np.array([mix[0].vcpus, mix[0].memory_mb, mix[0].disk_gb], dtype=float)
                if not _fits(used, smallest, goal, vcpus, disk):
                    break
                continue
            used += amounts
            uuid = str(uuidlib.UUID(int=int(rng.integers(0, 2**62)) * 4096 + len(residents)))
            spec = RequestSpec(instance_uuids=[uuid], flavor=flavor)
            if rng.random() < grouped / 3 * 3:  # joins an open group it has no member of here
                open_groups = [g for g in groups if len(g["members"]) < 3 and host not in g["hosts"]]
                group = open_groups[0] if open_groups and rng.random() < 0.67 else None
                if group is None:
                    group = {"uuid": f"group-{len(groups)}", "policy": "anti-affinity", "rules": {},
                             "members": [], "placed": [], "hosts": {}}
                    groups.append(group)
                group["members"].append(uuid)
                group["hosts"][host] = 1
                spec.group = group
            residents.append(Resident(uuid, host, spec, movable=bool(rng.random() >= pinned)))
        row = table.add(host)
        table.update_from_report(row, HostReport.trusted({
            "host": host, "memory_mb": memory, "free_ram_mb": int(memory - used[1]), "local_gb": disk,
            "free_disk_gb": float(disk - used[2]), "vcpus": vcpus, "vcpus_used": float(used[0]),
            "running_vms": 0, "instance_uuids": []}), now)
    for group in groups:  # the group as the scheduler reads it: its members' hosts
        group["placed"] = list(group["members"])
    return Snapshot.from_conf(table, residents, conf)


def _fits(used: np.ndarray, amounts: np.ndarray, goal: float, vcpus: int, disk: int) -> bool:
    return bool(used[1] + amounts[1] <= goal and used[0] + amounts[0] <= vcpus * RATIOS["cpu"]
                and used[2] + amounts[2] <= disk * RATIOS["disk"])


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def measure(n_hosts: int = 1000, seeds: int = 20, time_limit: float = 1.0,
            first_seed: int = 0, count: int = 1) -> dict[str, Any]:
    conf = make_conf()
    enabled = filters_mod.enabled_filters(conf)
    cpu: dict[str, list[float]] = {GREEDY: [], EXACT: [], AUTO: []}
    exists = greedy_found = within_one = equal = auto_found = auto_optimal = 0
    extra: list[int] = []
    moved: list[int] = []
    for seed in range(first_seed, first_seed + seeds):
        snapshot = fragmented_fleet(n_hosts, seed, conf)
        plans = {}
        for method in (GREEDY, EXACT, AUTO):
            # the exact reference gets ten times the limit, to prove its optimum
            limit = time_limit * 10 if method == EXACT else time_limit
            start = time.process_time()
            plans[method] = make_room(snapshot, LARGE, count, enabled, time_limit=limit, method=method)
            cpu[method].append(time.process_time() - start)
        best = plans[EXACT]
        if not best:
            continue
        exists += 1
        moved.append(len(best.moves))
        auto_found += bool(plans[AUTO])
        if plans[AUTO] and len(plans[AUTO].moves) == len(best.moves):
            auto_optimal += 1
        greedy = plans[GREEDY]
        if greedy:
            greedy_found += 1
            gap = len(greedy.moves) - len(best.moves)
            extra.append(gap)
            within_one += gap <= 1
            equal += gap == 0
    ms = {m: [v * 1e3 for v in values] for m, values in cpu.items()}
    return {
        "bench": "make_room", "n_hosts": n_hosts, "policy": f"{count} x {LARGE.name}, {time_limit:g} s limit",
        "count": count, "seeds": seeds,
        "plans_exist": exists, "greedy_found": greedy_found, "greedy_within_1": within_one,
        "greedy_equal": equal, "greedy_extra_max": max(extra) if extra else None,
        "auto_found": auto_found, "auto_optimal": auto_optimal,
        **{f"{m}_ms_median": statistics.median(v) for m, v in ms.items()},
        **{f"{m}_ms_p95": _p95(v) for m, v in ms.items()},
        **{f"{m}_ms_min": min(v) for m, v in ms.items()},
        **{f"{m}_ms_max": max(v) for m, v in ms.items()},
        "migrations_median": statistics.median(moved) if moved else None,
        "median_ms": statistics.median(ms[AUTO]), "p99_ms": _p95(ms[AUTO]),
    }


def describe(row: dict[str, Any]) -> str:
    share = row["greedy_within_1"] / row["plans_exist"] if row["plans_exist"] else float("nan")
    return (f"{row['plans_exist']}/{row['seeds']} fleets with a plan (median {row['migrations_median']} "
            f"migrations); auto found {row['auto_found']} ({row['auto_optimal']} with the optimum's "
            f"migrations); greedy found {row['greedy_found']}, within 1 migration {row['greedy_within_1']} "
            f"({share:.0%}), equal {row['greedy_equal']}; CPU ms median (p95, max): "
            f"auto {row['auto_ms_median']:.0f} ({row['auto_ms_p95']:.0f}, {row['auto_ms_max']:.0f}), "
            f"greedy {row['greedy_ms_median']:.0f} ({row['greedy_ms_p95']:.0f}, {row['greedy_ms_max']:.0f}), "
            f"exact alone {row['exact_ms_median']:.0f} ({row['exact_ms_p95']:.0f}, "
            f"{row['exact_ms_max']:.0f})")


host_counts = command_line.counts("host counts", low=2)


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(f"--{prefix}hosts", type=host_counts, default=[1000, 10_000],
                        help="fleet sizes (default 1000,10000)")
    parser.add_argument(f"--{prefix}seeds", type=positive, default=20, help="fleets per size (default 20)")
    parser.add_argument(f"--{prefix}time-limit", type=float, default=1.0,
                        help="the exact solver's limit in auto mode, seconds (default 1)")
    parser.add_argument(f"--{prefix}count", type=positive, default=1,
                        help="instances of the large flavor to make room for (default 1)")


def rows(hosts: list[int], seeds: int, time_limit: float, count: int = 1) -> Any:
    for n in hosts:
        yield measure(n, seeds, time_limit, count=count)


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.make_room", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    command_line.print_rows(rows(args.hosts, args.seeds, args.time_limit, args.count), args.json,
                            lambda row: f"{row['n_hosts']:,} hosts: {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
