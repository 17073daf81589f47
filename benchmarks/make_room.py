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

With ``--served``: ``berth rebalance plan --make-room`` as the scheduler serves it, the fleet read,
planned, saved. In one process, as the unit tests drive a scheduler: the parts of ``assemble()`` on
memory:// and a SQLite file; the same fleets without server groups or pinned instances, their
instances written ACTIVE in the database and listed by their hosts' reports; ``--seeds`` repeats,
each one ``plan_rebalance`` call on a fresh seed. Figures: the wall time of the whole call, and of
its parts: the fleet read (the host table copied, every instance and its stored request read:
scheduler.moves.fleet_snapshot), the plan (make_room, within its 1 s limit), the figures before
and after, the plan saved; median with the interquartile range over the repeats.

Run alone: ``python -m benchmarks.make_room [--hosts 1000,10000] [--seeds N] [--json]``;
``python -m benchmarks.make_room --served [--hosts 1000] [--seeds 5] [--first-seed S]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks import command_line
from berth_contract.request_spec import RequestSpec
from scheduler import conf as berth_conf
from scheduler import rpc, states
from scheduler.cmd.arguments import positive, whole
from scheduler.conf import opts as conf_opts
from scheduler.db.api import Database
from scheduler.moves import rebalance_api
from scheduler.moves.goals.make_room import MakeRoom
from scheduler.moves.rebalance import figures, make_room
from scheduler.moves.rebalance.planner import AUTO, EXACT, GREEDY
from scheduler.policy import filters as filters_mod
from scheduler.service import assemble
from scheduler.simulation.fragmented import LARGE, RATIOS, fragmented_fleet

FILTERS = ["ComputeFilter", "RamFilter", "DiskFilter", "CoreFilter", "ServerGroupAntiAffinityFilter",
           "ServerGroupAffinityFilter"]


def make_conf(filters: list[str] = FILTERS) -> Any:
    conf = berth_conf.new_conf()
    conf_opts.register_plugin_opts(conf)
    conf([], project="berth-bench", default_config_files=[])
    conf.set_override("enabled_filters", filters, "filter_scheduler")
    for resource, ratio in RATIOS.items():
        conf.set_override(f"{resource}_allocation_ratio", ratio, "filter_scheduler")
    return conf


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


CTX = rpc.Context({})


def scheduler_with_fleet(tmp: str, n_hosts: int, seed: int) -> tuple[Any, Any, Any]:
    """(parts, database, transport): a scheduler whose hosts and instances are a fragmented fleet."""
    conf = make_conf()
    conf.set_override("state_path", os.path.join(tmp, "state"))
    conf.set_override("transport_url", "memory://")
    conf.set_override("control_exchange", f"berth-bench-rebalance-{os.getpid()}-{seed}")
    conf.set_override("connection", f"sqlite:///{tmp}/rebalance-{seed}.sqlite", "database")
    transport = rpc.get_transport(conf)
    database = Database.from_conf(conf)
    database.sync()
    parts = assemble(conf, transport, database, random.Random(seed))
    snapshot = fragmented_fleet(n_hosts, seed, conf, grouped=0.0, pinned=0.0)
    rows, on_host = [], {}
    for resident in snapshot.residents.values():
        flavor = resident.flavor
        spec, props = RequestSpec(instance_uuids=[resident.uuid], flavor=flavor).to_wire()
        rows.append({"uuid": resident.uuid, "host": resident.host, "state": states.ACTIVE,
                     "flavor_name": flavor.name, "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb,
                     "ephemeral_gb": flavor.ephemeral_gb, "vcpus": flavor.vcpus, "request_spec": spec,
                     "filter_properties": props})
        on_host.setdefault(resident.host, []).append(resident.uuid)
    database.create_instances(rows)
    table = snapshot.table
    for row, host in enumerate(table.names):
        parts.manager.report_resources(CTX, host, {
            "host": host, "memory_mb": int(table.total_ram_mb[row]),
            "free_ram_mb": int(table.free_ram_mb[row]),
            "local_gb": int(table.total_disk_gb[row]), "free_disk_gb": float(table.free_disk_gb[row]),
            "vcpus": int(table.vcpus_total[row]), "vcpus_used": float(table.vcpus_used[row]),
            "running_vms": len(on_host.get(host, [])), "instance_uuids": on_host.get(host, [])})
    return parts, database, transport


class Timed:
    """Wraps the call's parts to time each: {name: [seconds]}."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds.setdefault(label, []).append(time.perf_counter() - start)

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def measure_served(n_hosts: int, repeats: int, first_seed: int = 0) -> dict[str, Any]:
    timed = Timed()
    timed.wrap(rebalance_api, "fleet_snapshot", "fleet read")
    timed.wrap(figures, "before_after", "figures")
    timed.wrap(MakeRoom, "plan", "plan")
    steps, instances = [], 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(first_seed, first_seed + repeats):
                parts, database, transport = scheduler_with_fleet(tmp, n_hosts, seed)
                try:
                    instances = len(database.list_instances(states=[states.ACTIVE]))
                    timed.wrap(database, "create_rebalance_plan", "plan saved")
                    start = time.perf_counter()
                    plan = parts.rebalance.plan_rebalance(CTX, MakeRoom.name,
                                                          {"flavor": LARGE.to_wire()})
                    timed.seconds.setdefault("whole call", []).append(time.perf_counter() - start)
                    steps.append(len(plan["steps"]))
                finally:
                    transport.cleanup()
                    database.dispose()
    finally:
        timed.restore()
    return {"hosts": n_hosts, "instances": instances, "repeats": repeats, "steps": steps,
            "seconds": timed.seconds}


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0] * 1000:.0f} ms"
    q1, median, q3 = statistics.quantiles(values, n=4)
    return f"{statistics.median(values) * 1000:.0f} ms (IQR {q1 * 1000:.0f}-{q3 * 1000:.0f})"


def print_served(n_hosts: int, repeats: int, first_seed: int) -> None:
    result = measure_served(n_hosts, repeats, first_seed)
    print(f"plan_rebalance --make-room {LARGE.name}: {result['hosts']} hosts, {result['instances']} "
          f"instances, {result['repeats']} fleets, migrations per plan {result['steps']}")
    for name in ("whole call", "fleet read", "plan", "figures", "plan saved"):
        values = result["seconds"].get(name)
        print(f"  {name:<11} {_spread(values) if values else 'not called: the goal gave its own'}")


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.make_room", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    parser.add_argument("--served", action="store_true",
                        help="plan_rebalance as the scheduler serves it, --seeds repeats (no --json)")
    parser.add_argument("--first-seed", type=whole, default=0,
                        help="the first fleet's seed: fleets FIRST_SEED to FIRST_SEED + SEEDS - 1")
    args = parser.parse_args(argv)
    if args.served:
        if args.json:
            parser.error("--served prints text only: leave out --json")
        for n in args.hosts:
            print_served(n, args.seeds, args.first_seed)
        return 0
    command_line.print_rows(rows(args.hosts, args.seeds, args.time_limit, args.count), args.json,
                            lambda row: f"{row['n_hosts']:,} hosts: {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
