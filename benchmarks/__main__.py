"""python -m benchmarks: decision latency, report ingestion, memory, the reports of a large fleet
on one of several schedulers, a host's drain, several schedulers on a simulated clock, making room
for a large flavor, balancing real load beside Watcher's workload balance, the balance and
consolidate goals planned on measured load and judged on the true load, end to end.

Prints a table, or one JSON object per line with --json.
"""

import argparse
import json
import os
import platform
import sys

from benchmarks import (
    balance,
    command_line,
    decisions,
    ingestion,
    machine_speed,
    make_room,
    moves,
    rebalance_goals,
    report_load,
    scale_out,
)

_hosts = command_line.counts("host counts")

DESCRIBED = {"moves": moves, "scale-out": scale_out, "reports": report_load,
             "make_room": make_room, "balance": balance, "rebalance_goals": rebalance_goals}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--hosts", type=_hosts, default=[1000, 10_000, 100_000],
                        help="fleet sizes for decision latency (default 1000,10000,100000)")
    parser.add_argument("--policies", default=",".join(decisions.POLICIES),
                        help=f"comma-separated, of: {', '.join(decisions.POLICIES)}")
    parser.add_argument("--decisions", type=int, default=500, help="decisions measured per row")
    parser.add_argument("--reference-hosts", type=_hosts, default=[1000, 10_000],
                        help="fleet sizes at which to also time the per-host reference pipeline")
    parser.add_argument("--ingest-hosts", type=int, default=10_000,
                        help="fleet size for the report ingestion rate")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: "
                        "decision,reference,ingestion,memory,reports,moves,scale-out,make_room,balance,"
                        "rebalance_goals,e2e")
    report_load.add_arguments(parser, prefix="reports-")
    moves.add_arguments(parser, prefix="moves-")
    scale_out.add_arguments(parser, prefix="scale-out-")
    make_room.add_arguments(parser, prefix="make-room-")
    balance.add_arguments(parser, prefix="balance-")
    rebalance_goals.add_arguments(parser, prefix="goals-")
    parser.add_argument("--e2e-hosts", type=int, default=1000)
    parser.add_argument("--e2e-instances", type=int, default=20_000)
    parser.add_argument("--e2e-rate", type=float, default=0,
                        help="run_instance casts per second offered end to end (default 0: as fast "
                        "as one client can, which measures a burst rather than a sustained rate)")
    parser.add_argument("--e2e-workers", type=int, default=1, help="berth-scheduler processes end to end")
    parser.add_argument("--e2e-no-owners", action="store_true",
                        help="[scheduler] prefer_owned_hosts = false: every scheduler weighs the whole fleet")
    parser.add_argument("--e2e-batch-size", type=int, default=None,
                        help="[scheduler] batch_size of the schedulers end to end (default 512)")
    parser.add_argument("--e2e-queue-version", type=int, choices=(1, 2), default=None,
                        help="give the run's classic queues this RabbitMQ queue version by a policy on "
                        "its vhost (default: the broker's own)")
    parser.add_argument("--e2e-bundle", action="store_true",
                        help="cast the requests in bundles, up to 100 to a message (run_instances), "
                        "instead of a message each")
    parser.add_argument("--e2e-client-threads", type=int, default=0, metavar="N",
                        help="cast the requests one a message from N threads, each waiting for its "
                        "cast's confirm, as an API service's workers do (default 0: one thread, a "
                        "publisher batch at a time)")
    parser.add_argument("--e2e-baseline", default=None, metavar="DIR",
                        help="run the end-to-end section for the code of the source tree DIR (a "
                        "checkout of an earlier commit) too, the two alternated --e2e-rounds times, "
                        "and print each one's medians")
    parser.add_argument("--e2e-rounds", type=int, default=1,
                        help="end-to-end runs of each code (with --e2e-baseline: alternated)")
    parser.add_argument("--e2e-logs", default=None, metavar="DIR",
                        help="keep the end-to-end processes' logs in DIR (default: thrown away)")
    parser.add_argument("--e2e-profile", default=None, metavar="DIR",
                        help="run the end-to-end schedulers under yappi, leaving their profiles in DIR "
                        "(scheduler-N.pstat); their CPU figures then include the profiler's")
    parser.add_argument("--transport-url", default=os.environ.get(
        "BERTH_BENCH_TRANSPORT_URL", "rabbit://guest:guest@127.0.0.1:5672/"),
        help="broker for the end-to-end section")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    args.policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in args.policies if p not in decisions.POLICIES]
    if unknown:
        parser.error(f"unknown policy {', '.join(unknown)}; known: {', '.join(decisions.POLICIES)}")
    args.skip = set(filter(None, args.skip.split(",")))
    return args


def rows(args):
    if "decision" not in args.skip:
        for n in args.hosts:
            for policy in args.policies:
                yield decisions.measure(n, policy, args.decisions)
    if "reference" not in args.skip:
        for n in args.reference_hosts:
            yield decisions.measure(n, "default", max(20, args.decisions // 20), vectorized=False)
    if "ingestion" not in args.skip:
        yield ingestion.measure_ingestion(args.ingest_hosts)
    if "memory" not in args.skip:
        yield ingestion.measure_memory(max(args.hosts))
    if "reports" not in args.skip:
        yield from report_load.rows(args, prefix="reports-")
    if "moves" not in args.skip:
        yield moves.measure(args.moves_hosts, args.moves_instances, args.moves_repeats, args.moves_parallel)
    if "scale-out" not in args.skip:
        yield from scale_out.rows(**scale_out.selected(args, prefix="scale-out-"))
    yield from _rebalance_rows(args)
    if "e2e" not in args.skip:
        from benchmarks import e2e

        trees = [args.e2e_baseline, None] if args.e2e_baseline else [None]
        for _ in range(args.e2e_rounds):
            for tree in trees:
                yield e2e.measure(args.transport_url, args.e2e_hosts, args.e2e_instances,
                                  workers=args.e2e_workers, rate=args.e2e_rate or None,
                                  batch_size=args.e2e_batch_size or e2e.BATCH_SIZE, logs=args.e2e_logs,
                                  profile=args.e2e_profile, prefer_owned_hosts=not args.e2e_no_owners,
                                  queue_version=args.e2e_queue_version, bundled=args.e2e_bundle, tree=tree,
                                  client_threads=args.e2e_client_threads)


def _rebalance_rows(args):
    if "make_room" not in args.skip:
        yield from make_room.rows(args.make_room_hosts, args.make_room_seeds, args.make_room_time_limit,
                                  args.make_room_count)
    if "balance" not in args.skip:
        yield from balance.rows(args.balance_hosts, args.balance_seeds, args.balance_policies)
    if "rebalance_goals" not in args.skip:
        yield from rebalance_goals.rows(args.goals_fleets, args.goals_seeds, args.goals_kinds,
                                        args.goals_shared_load, args.goals_true_load)


def _fmt(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if value < 1000 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.json:
        print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}; reference loop {machine_speed.reference_us():.1f} us "
              f"({machine_speed.LOOP}, best of 5)")
        print(f"{'bench':<10} {'hosts':>8} {'policy':<32} {'median ms':>10} {'p99 ms':>10}  rate")
    e2e_rows = []
    for row in rows(args):
        if row["bench"] == "e2e":
            e2e_rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        rate = next((f"{_fmt(row[k])} {k.replace('_per_s', '/s')}" for k in
                     ("decisions_per_s", "reports_per_s", "placements_per_s") if k in row), "")
        if "bytes_per_host" in row:
            rate = f"{row['bytes_per_host']:,.0f} bytes/host"
        if row["bench"] in DESCRIBED:
            rate = DESCRIBED[row["bench"]].describe(row)
        if row["bench"] == "e2e":
            from benchmarks import e2e

            rate = e2e.describe(row)
        print(f"{row['bench']:<10} {_fmt(row['n_hosts']):>8} {row['policy']:<32} "
              f"{_fmt(row['median_ms']):>10} {_fmt(row['p99_ms']):>10}  {rate}", flush=True)
    if len(e2e_rows) > 1 and not args.json:
        from benchmarks import e2e

        for line in e2e.summarise(e2e_rows):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
