"""``berth simulate``: what would these policies do to this fleet? Offline: no broker, no
database; the daemon's own host table, filters, weighers and selection on a simulated clock
(scheduler.simulation)."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from oslo_config import cfg

from scheduler import conf as berth_conf
from scheduler.cmd import output, waiting
from scheduler.cmd.arguments import Interrupted, positive, whole
from scheduler.conf import opts
from scheduler.policy import filters, weighers
from scheduler.simulation import engine, inputs, rebalance

PREFIX = "berth simulate"
BAD_INPUT = 2

HELP = """\
Replay a workload against a fleet with one or more policies and compare what they do:
placed, refused (and the filter responsible), how unevenly the real load spreads (max /
mean across hosts), the free RAM stranded on hosts too full in another dimension for the
smallest instance, the most hosts in use, and the peak share of RAM and vCPUs allocated.

Fleet: --fleet FILE (CSV: name,memory_mb,vcpus,disk_gb[,zone,aggregates,hidden_cores]),
or --hosts N of --host-size MB,VCPUS,GB (repeat for a mix, taken in turn), with
--hidden-cores busy on every --hidden-every-th host.
Workload: --workload FILE (CSV: at,lifetime,flavor or memory_mb,vcpus,disk_gb[,busy,hints]),
or --count N arrivals at --rate a second, of --flavor-mix, living --lifetime seconds on
average, --busy of them busy.
Policies: --policy FILE, a Berth configuration file ([filter_scheduler] enabled_filters,
weighers, host_subset_size, allocation ratios...), repeat to compare; none: Berth's defaults.
Scaling groups: --scaling-group FILE (JSON: {"name", "flavor", "initial", "spec" as
`berth scaling group what-if` takes it, cpu metric only, "load": [[seconds, busy vCPUs of
the whole group], ...]}), synced every --sync-period; --count 0 leaves other arrivals out.
Maintenance: --maintenance FILE (CSV: at,host[,max_parallel]): at its time each host is
disabled and its instances moved off it, max_parallel at a time (default 2), each placed as a
migration is (its own request, its host left out) and taking --migration-time-per-gb seconds
per GiB of its RAM; the report says per drain what moved, what could not and why, how long
the drain took and the most migrations at once.
Rebalance: --rebalance every=1h,goal=balance,max=10 runs a rebalance goal (an installed goal
with no required option: see --rebalance's help) every so often on the simulated fleet and makes
its migrations; each policy is run without and with it, and the report says per policy what the
rebalances did.
"""


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="Compare placement policies on a fleet and a workload, locally (no broker, no database).",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--fleet", metavar="FILE", help="the fleet, as CSV")
    parser.add_argument(
        "--hosts", type=positive, default=100, help="generated fleet: how many hosts (default 100)"
    )
    parser.add_argument(
        "--host-size",
        action="append",
        type=_size,
        metavar="MB,VCPUS,GB",
        help="generated fleet: a host size (repeat for a mix; default 131072,32,2000)",
    )
    parser.add_argument(
        "--zones", type=positive, default=1, help="generated fleet: availability zones (default 1)"
    )
    parser.add_argument(
        "--hidden-cores",
        type=_non_negative_number,
        default=0.0,
        help="generated fleet: cores busy with load the scheduler cannot see, on every --hidden-every-th "
        "host (default 0)",
    )
    parser.add_argument(
        "--hidden-every", type=positive, default=3, help="generated fleet: see --hidden-cores (default 3)"
    )
    parser.add_argument("--workload", metavar="FILE", help="the workload, as CSV")
    parser.add_argument(
        "--count", type=whole, default=10_000, help="generated workload: arrivals, 0: none (default 10000)"
    )
    parser.add_argument(
        "--rate", type=_positive_number, default=1.0, help="generated workload: arrivals a second (default 1)"
    )
    parser.add_argument(
        "--flavor-mix",
        type=_mix,
        default="m1.small=4,m1.medium=2,m1.large=1",
        help="generated workload: flavor=weight,... (default m1.small=4,m1.medium=2,m1.large=1)",
    )
    parser.add_argument(
        "--lifetime",
        type=_non_negative_number,
        default=3600.0,
        help="generated workload: mean lifetime in seconds, 0: they stay (default 3600)",
    )
    parser.add_argument(
        "--busy",
        type=_share,
        default=0.35,
        help="generated workload: share of instances that keep their vCPUs busy (default 0.35)",
    )
    parser.add_argument(
        "--policy", action="append", metavar="FILE", help="a Berth configuration file (repeat)"
    )
    parser.add_argument(
        "--scaling-group",
        action="append",
        metavar="FILE",
        help="a scaling group to simulate, JSON: {name, flavor, initial, spec, load} (repeat)",
    )
    parser.add_argument(
        "--sync-period",
        type=_positive_number,
        default=15.0,
        help="seconds between the scaling groups' syncs (default 15)",
    )
    parser.add_argument("--maintenance", metavar="FILE", help="host drains, as CSV: at,host[,max_parallel]")
    parser.add_argument(
        "--migration-time-per-gb",
        metavar="SECONDS",
        type=_non_negative_number,
        default=engine.MIGRATION_TIME_PER_GB,
        help="seconds a migration takes per GiB of the instance's RAM (default "
        f"{engine.MIGRATION_TIME_PER_GB:g}: its memory copied over a 1 Gbit/s link, about 125 MB/s)",
    )
    parser.add_argument(
        "--rebalance",
        metavar="SPEC",
        type=_rebalance,
        help="run a rebalance goal periodically, e.g. every=1h,goal=balance,max=10 (goals: "
        f"{rebalance.goals_help()}); each policy is run without and with it",
    )
    parser.add_argument(
        "--report-interval",
        type=_positive_number,
        default=60.0,
        help="seconds between the agents' reports (default 60)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per policy")
    parser.add_argument("--plot", metavar="DIR", help="write PNG plots there (needs matplotlib)")
    parser.set_defaults(func=simulate_command, offline=True)


def _size(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or values[0] < 1 or values[1] < 1 or values[2] < 0:
        raise argparse.ArgumentTypeError(f"a host size is MB,VCPUS,GB (whole numbers), got {text!r}")
    return values  # type: ignore[return-value]


def _number(text: str, low: float, strict: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number, got {text!r}") from None
    if value != value or value < low or (strict and value == low) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"a number {'>' if strict else '>='} {low:g}, got {text!r}")
    return value


def _positive_number(text: str) -> float:
    return _number(text, 0.0, True)


def _non_negative_number(text: str) -> float:
    return _number(text, 0.0, False)


def _share(text: str) -> float:
    value = _number(text, 0.0, False)
    if value > 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1, got {text!r}")
    return value


def _mix(text: str) -> dict[str, float]:
    try:
        return inputs.parse_flavor_mix(text)
    except inputs.InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--flavor-mix: ")) from None


def _rebalance(text: str) -> rebalance.RebalanceSpec:
    try:
        return rebalance.parse(text)
    except inputs.InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--rebalance: ")) from None


def _read(path: str) -> str:
    try:
        return pathlib.Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise inputs.InputError(f"{path}: {reason}") from None


def policy_conf(path: str | None) -> cfg.ConfigOpts:
    """A Berth configuration from ``path`` (None: the defaults), its plugins checked."""
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    try:
        conf(["--config-file", path] if path else [], project="berth-simulate", default_config_files=[])
        filters.enabled_filters(conf)
        weighers.enabled_weighers(conf)
    except (cfg.Error, ValueError) as exc:
        raise inputs.InputError(f"{path or 'the default policy'}: {str(exc).splitlines()[0]}") from None
    return conf


def _policy_name(path: str | None, seen: dict[str, int]) -> str:
    name = pathlib.Path(path).stem if path else "default"
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name}-{seen[name]}"


def table(results: list[engine.Result]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): a row per policy."""
    headers = [
        "policy",
        "placed",
        "refused",
        "refused by",
        "skew mean",
        "skew max",
        "stranded RAM",
        "hosts used",
        "peak RAM",
        "peak vCPUs",
    ]
    rows = []
    for r in results:
        refused_by = ", ".join(f"{name} {count}" for name, count in r.summary()["refused_by"].items()) or "-"
        rows.append(
            [
                r.policy,
                str(r.placed),
                str(r.refused_total),
                refused_by,
                _fixed(r.skew_mean, 3),
                _fixed(r.skew_max, 3),
                f"{r.stranded:.1%}",
                str(r.hosts_used),
                f"{r.peak_ram:.1%}",
                f"{r.peak_vcpus:.1%}",
            ]
        )
    return headers, rows


def group_table(results: list[engine.Result]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): a row per policy and scaling group."""
    headers = [
        "policy",
        "scaling group",
        "members peak",
        "members mean",
        "scale-ups",
        "scale-downs",
        "unplaced",
    ]
    rows = []
    for result in results:
        for group in result.groups:
            summary = group.summary()
            rows.append(
                [
                    result.policy,
                    group.name,
                    str(summary["members_peak"]),
                    _fixed(summary["members_mean"] or float("nan"), 2),
                    str(group.scale_ups),
                    str(group.scale_downs),
                    str(group.unplaced),
                ]
            )
    return headers, rows


def drain_table(results: list[engine.Result]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): a row per policy and drain."""
    headers = [
        "policy",
        "drained host",
        "at",
        "instances",
        "moved",
        "not moved",
        "not moved by",
        "left",
        "migrations",
        "took",
        "peak in flight",
    ]
    rows = []
    for result in results:
        for drain in result.drains:
            not_moved_by = (
                ", ".join(f"{name} {count}" for name, count in drain.summary()["not_moved_by"].items()) or "-"
            )
            rows.append(
                [
                    result.policy,
                    drain.host,
                    f"{drain.at:g} s",
                    str(drain.instances),
                    str(drain.moved),
                    str(drain.not_moved_total),
                    not_moved_by,
                    str(drain.left),
                    str(drain.migrations),
                    f"{drain.took:g} s",
                    str(drain.peak_in_flight),
                ]
            )
    return headers, rows


def rebalance_table(results: list[engine.Result]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): a row per policy run with a rebalance."""
    headers = ["policy", "rebalance", "runs", "plans", "migrations", "moved", "skew before -> after",
               "no plan"]
    rows = []
    for result in results:
        done = result.rebalance
        if done is None:
            continue
        befores = [b for b, a in zip(done.skew_before, done.skew_after, strict=True) if b == b and a == a]
        afters = [a for b, a in zip(done.skew_before, done.skew_after, strict=True) if b == b and a == a]
        shift = (f"{sum(befores) / len(befores):.3f} -> {sum(afters) / len(afters):.3f}" if befores else "-")
        reasons = sorted(done.no_plan.items(), key=lambda kv: -kv[1])
        no_plan = f"{sum(done.no_plan.values())}: {reasons[0][0]}" if reasons else "-"
        moved = f"{done.migrations / result.placed:.1%}" if result.placed else "-"
        rows.append([result.policy, done.spec.label, str(done.runs), str(done.plans), str(done.migrations),
                     moved, shift, no_plan])
    return headers, rows


def _groups_said(groups: list[inputs.SimGroup]) -> str:
    if not groups:
        return ""
    return f" and {len(groups)} scaling group{'s' if len(groups) > 1 else ''} (members placed included)"


def _fixed(value: float, digits: int) -> str:
    return "-" if value != value else f"{value:.{digits}f}"


def simulate_command(client: object, args: Any, out: TextIO) -> int:
    try:
        hosts = (
            inputs.parse_fleet(_read(args.fleet), args.fleet)
            if args.fleet
            else inputs.generate_fleet(
                args.hosts,
                args.host_size or [(131072, 32, 2000)],
                args.zones,
                args.hidden_cores,
                args.hidden_every,
            )
        )
        arrivals = (
            inputs.parse_workload(_read(args.workload), args.workload)
            if args.workload
            else inputs.generate_workload(
                args.count, args.rate, args.flavor_mix, args.lifetime, args.busy, args.seed
            )
        )
        groups = [inputs.parse_group(_read(path), path) for path in args.scaling_group or []]
        drains = (
            inputs.parse_maintenance(_read(args.maintenance), hosts, args.maintenance)
            if args.maintenance
            else []
        )
        seen: dict[str, int] = {}
        policies = [(_policy_name(path, seen), policy_conf(path)) for path in (args.policy or [None])]
        plot_dir = pathlib.Path(args.plot) if args.plot else None
        if plot_dir is not None:
            _check_plotting(plot_dir)
    except inputs.InputError as exc:
        print(f"{PREFIX}: {exc}", file=sys.stderr)
        return BAD_INPUT
    runs = [(name, conf, None) for name, conf in policies]
    if args.rebalance is not None:
        runs = [run for name, conf in policies
                for run in ((name, conf, None), (f"{name} + {args.rebalance.goal}", conf, args.rebalance))]
    results: list[engine.Result] = []
    told = RunProgress(len(runs))
    try:
        for name, conf, spec in runs:
            told.start(name)
            results.append(engine.run(
                name,
                conf,
                hosts,
                arrivals,
                args.report_interval,
                args.seed,
                groups,
                args.sync_period,
                drains=drains,
                migration_time_per_gb=args.migration_time_per_gb,
                rebalance=spec,
                progress=told.reached,
            ))
            told.ended(results[-1])
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: {len(results)} of {len(runs)} simulation run(s) done, in "
                          f"{told.name!r}; nothing reported") from None
    finally:
        told.progress.clear()
    if args.json:
        for result in results:
            print(json.dumps(result.summary()), file=out)
    else:
        print(
            f"{len(arrivals):,} arrivals{_groups_said(groups)} on {len(hosts):,} hosts, reports every "
            f"{args.report_interval:g} s",
            file=out,
        )
        output.print_columns(*table(results), out)
        if groups:
            output.print_columns(*group_table(results), out)
        if drains:
            output.print_columns(*drain_table(results), out)
        if args.rebalance is not None:
            output.print_columns(*rebalance_table(results), out)
    if plot_dir is not None:
        from scheduler.simulation import plots

        written = plots.write_all(results, plot_dir)
        if not args.json:
            print(f"plots: {', '.join(str(p) for p in written)}", file=out)
    return 0


class RunProgress:
    """How far ``berth simulate`` is, on stderr: on a terminal one line rewritten, at most every
    REDRAW seconds (the engine calls :meth:`reached` at each round of reports); elsewhere a line
    as each run ends."""

    REDRAW = 0.2

    def __init__(self, runs: int, progress: waiting.Progress | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runs, self.progress, self.clock = runs, progress or waiting.Progress(), clock
        self.name, self.index, self.started, self.drawn = "", 0, 0.0, float("-inf")

    def start(self, name: str) -> None:
        self.name, self.index, self.started = name, self.index + 1, self.clock()
        self.drawn = self.started
        self.progress.status(f"{PREFIX}: run {self.index}/{self.runs} ({name}): starting")

    def reached(self, now: float, end: float) -> None:
        wall = self.clock()
        if not self.progress.tty or wall - self.drawn < self.REDRAW:
            return
        self.drawn = wall
        share = f"{min(now / end, 1.0):.0%}" if end > 0 else "0%"
        self.progress.status(f"{PREFIX}: run {self.index}/{self.runs} ({self.name}): {share} of "
                             f"{end:,.0f} simulated s ({wall - self.started:.0f} s)")

    def ended(self, result: engine.Result) -> None:
        self.progress.event(f"{PREFIX}: run {self.index}/{self.runs} ({self.name}) done in "
                            f"{self.clock() - self.started:.1f} s")


def _check_plotting(directory: pathlib.Path) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise inputs.InputError(
            "--plot needs matplotlib: pip install '.[plot]' in Berth's checkout (or 'berth[plot]')"
        ) from None
    if directory.exists() and not directory.is_dir():
        raise inputs.InputError(f"--plot {directory}: not a directory")
