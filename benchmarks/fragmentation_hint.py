"""What the fragmentation hint adds to a refusal, on the make_room benchmark's fragmented fleets.

Each fleet (benchmarks.make_room.fragmented_fleet: hosts filled to 85-95 % of their memory, a
tenth of the instances in anti-affinity groups, which the hint leaves in place) refuses one
instance of a 64 GB flavor that fits on no host. Through the service's FragmentationHints
(its time limit, budget per second and reused answers; the instances it reads come from memory
here, not from the database):

- the refusal alone: the Selector failing to place it (what a refusal cost before the hint);
- one hint: wall and CPU time, hosts examined, hosts found, whether the count is exact;
- a burst of 1,000 refusals of the same request on the unchanged fleet (the answer reused), and
  of 1,000 different requests (each a different host ignored: nothing reused, the budget bounds
  them): total wall time, and how many got a hint.

Run alone: ``python -m benchmarks.fragmentation_hint [--hosts 1000,10000] [--seeds N]
[--time-limit S]``.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import threading
import time
import uuid as uuidlib
from typing import Any

import numpy as np

from benchmarks import command_line
from benchmarks import make_room as bench
from scheduler.cmd.arguments import positive
from scheduler.exception import NoValidHost
from scheduler.moves.rebalance.judge import request_for
from scheduler.planning.fragmentation import FragmentationHints
from scheduler.policy import filters as filters_mod
from scheduler.policy.selection import Selector

BURST = 1000


class _Hosts:
    def __init__(self, table: Any) -> None:
        self.table = table
        self.lock = threading.RLock()


class _Instances:
    """The database's settled_instances_on_hosts, from the fleet's residents (movable, no group)."""

    def __init__(self, snapshot: Any) -> None:
        self.by_host: dict[str, list[Any]] = {}
        for resident in snapshot.residents.values():
            if resident.movable and resident.group is None:
                self.by_host.setdefault(resident.host, []).append(resident)

    def settled_instances_on_hosts(self, hosts: list[str]) -> list[dict[str, Any]]:
        rows = []
        for host in hosts:
            for resident in self.by_host.get(host, []):
                flavor = resident.flavor
                rows.append({"uuid": resident.uuid, "host": host, "memory_mb": flavor.memory_mb,
                             "root_gb": flavor.root_gb, "ephemeral_gb": flavor.ephemeral_gb,
                             "vcpus": flavor.vcpus, "flavor_name": flavor.name, "request_spec": {},
                             "filter_properties": {}, "resident": resident})
        return rows


def _hints(conf: Any, snapshot: Any, enabled: list[Any]) -> FragmentationHints:
    return FragmentationHints(conf, _Instances(snapshot), _Hosts(snapshot.table), enabled,
                              lambda move: move.instance["resident"].spec)


def _refusal(selector: Selector, table: Any, spec: Any) -> NoValidHost:
    try:
        selector.select(table, spec)
    except NoValidHost as exc:
        return exc
    raise AssertionError("the large flavor fits: the fleet is not fragmented")


def measure(n_hosts: int, seeds: int, time_limit: float) -> dict[str, Any]:
    conf = bench.make_conf()
    conf.set_override("fragmentation_hint_time_limit", time_limit, "scheduler")
    enabled = filters_mod.enabled_filters(conf)
    selector = Selector(enabled, [])
    refusal_ms, wall_ms, cpu_ms, examined, found, exact = [], [], [], [], [], []
    same_s, distinct_s, distinct_hinted = [], [], []
    for seed in range(seeds):
        snapshot = bench.fragmented_fleet(n_hosts, seed, conf)
        table = snapshot.table
        spec = request_for(bench.LARGE, 1)
        start = time.perf_counter()
        refused = _refusal(selector, table, spec)
        refusal_ms.append((time.perf_counter() - start) * 1e3)

        hints = _hints(conf, snapshot, enabled)
        wall, cpu = time.perf_counter(), time.process_time()
        reason = hints.reason(spec, refused)
        wall_ms.append((time.perf_counter() - wall) * 1e3)
        cpu_ms.append((time.process_time() - cpu) * 1e3)
        kept = next(iter(hints._answers.values()))[2]
        examined.append(getattr(kept, "examined", 0))
        found.append(getattr(kept, "hosts", 0))
        exact.append(bool(getattr(kept, "all_counted", False)))
        assert reason.startswith(str(refused))

        start = time.perf_counter()
        for _ in range(BURST):
            hints.reason(spec, _refusal(selector, table, spec))
        same_s.append(time.perf_counter() - start)

        hints = _hints(conf, snapshot, enabled)
        hinted = 0
        start = time.perf_counter()
        for i in range(BURST):
            other = dataclasses.replace(spec, instance_uuids=[str(uuidlib.uuid4())],
                                        ignore_hosts=[table.names[i % n_hosts]])
            refused = _refusal(selector, table, other)
            hinted += "fragmentation:" in hints.reason(other, refused)
        distinct_s.append(time.perf_counter() - start)
        distinct_hinted.append(hinted)
    return {
        "bench": "fragmentation_hint", "n_hosts": n_hosts, "seeds": seeds, "time_limit": time_limit,
        "refusal_ms_median": statistics.median(refusal_ms),
        "hint_wall_ms_median": statistics.median(wall_ms), "hint_wall_ms_min": min(wall_ms),
        "hint_wall_ms_max": max(wall_ms), "hint_cpu_ms_median": statistics.median(cpu_ms),
        "examined_median": statistics.median(examined), "found_median": statistics.median(found),
        "exact_counts": sum(exact),
        "burst_same_s_median": statistics.median(same_s), "burst_same_s_max": max(same_s),
        "burst_distinct_s_median": statistics.median(distinct_s), "burst_distinct_s_max": max(distinct_s),
        "burst_distinct_hinted_median": statistics.median(distinct_hinted),
        "median_ms": statistics.median(wall_ms), "p99_ms": float(np.percentile(wall_ms, 99)),
    }


def describe(row: dict[str, Any]) -> str:
    return (f"refusal alone {row['refusal_ms_median']:.1f} ms; one hint {row['hint_wall_ms_median']:.0f} ms "
            f"wall ({row['hint_wall_ms_min']:.0f}-{row['hint_wall_ms_max']:.0f}), "
            f"{row['hint_cpu_ms_median']:.0f} ms CPU, {row['examined_median']:g} hosts examined, "
            f"{row['found_median']:g} found ({row['exact_counts']}/{row['seeds']} counts exact); "
            f"{BURST} like refusals {row['burst_same_s_median']:.2f} s (max {row['burst_same_s_max']:.2f}); "
            f"{BURST} different ones {row['burst_distinct_s_median']:.2f} s (max "
            f"{row['burst_distinct_s_max']:.2f}), {row['burst_distinct_hinted_median']:g} with a hint")


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.fragmentation_hint", __doc__)
    parser.add_argument("--hosts", type=bench.host_counts, default=[1000, 10_000],
                        help="fleet sizes (default 1000,10000)")
    parser.add_argument("--seeds", type=positive, default=5, help="fleets per size (default 5)")
    parser.add_argument("--time-limit", type=float, default=0.1,
                        help="[scheduler] fragmentation_hint_time_limit, seconds (default 0.1)")
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    command_line.print_rows((measure(n, args.seeds, args.time_limit) for n in args.hosts), args.json,
                            lambda row: f"{row['n_hosts']:,} hosts: {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
