"""How fast ``berth simulate`` replays: 100,000 placements on 1,000 hosts (the goal: at most
30 s), Berth's default policy, arrivals at 20 a second living 1,000 s on average (about
20,000 instances at once, nothing refused), a report round every 60 simulated seconds.

Run: ``python -m benchmarks.simulate [--hosts N] [--count N] [--runs R]``.
"""

from __future__ import annotations

import statistics
import sys
import time

from benchmarks import command_line
from scheduler.cmd.arguments import positive
from scheduler.cmd.simulate_command import policy_conf
from scheduler.simulation import engine, inputs


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.simulate", __doc__)
    parser.add_argument("--hosts", type=positive, default=1000)
    parser.add_argument("--count", type=positive, default=100_000)
    parser.add_argument("--runs", type=positive, default=3)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    hosts = inputs.generate_fleet(args.hosts, [(131072, 32, 2000)])
    arrivals = inputs.generate_workload(
        args.count, 20.0, {"m1.small": 4, "m1.medium": 2, "m1.large": 1}, 1000.0, 0.35
    )
    conf = policy_conf(None)
    seconds, placed = [], 0
    for _ in range(args.runs):
        started = time.perf_counter()
        result = engine.run("default", conf, hosts, arrivals)
        seconds.append(time.perf_counter() - started)
        placed = result.placed
    print(
        f"berth simulate, {placed:,} placements on {args.hosts:,} hosts ({len(result.times)} report rounds): "
        f"{statistics.median(seconds):.1f} s ({min(seconds):.1f}-{max(seconds):.1f}), median of {args.runs}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
