"""The reports of a large fleet into a real berth-scheduler process over RabbitMQ: its CPU per
report, to hold against the in-process figure of ``benchmarks.report_load``.

A fresh vhost and PostgreSQL database; one scheduler process (``sched-0``), the two others
alive by the heartbeats this process writes, so that it writes about a third of the reports;
``--hosts`` hosts with their ACTIVE instances in the database. This process publishes one
report of every host (fanned out, as agents do), as fast as it can, in publisher batches, and
waits until the scheduler is idle again; a round's CPU is the scheduler process's (from
/proc), whatever its pace. The first round (each scheduler writes a host's first report) is
given apart from the next ones.

With ``--baseline DIR`` a second scheduler process (``sched-1``) runs the code of the source
tree DIR (a checkout of main, say) beside ``sched-0``: the fanout gives both every report at the
same time, so that the two figures, and their ratio, are measured in one run on the same
machine's noise. ``--option`` and ``--baseline-option`` (``GROUP.NAME=VALUE``) set either's
configuration.

A round's reports come as fast as the scheduler takes them, not every 10 s: a round lasts longer
than the default ``[scheduler] service_down_time`` (60 s) on a loaded machine or with a large
fleet, and every host would then be said down and up again (two log lines) and reconciled at
each round, which no fleet reporting every 10 s to a scheduler that keeps up ever is (twice
the CPU per report at 30,000 hosts). The schedulers run with ``service_down_time = 3600``
(``--option scheduler.service_down_time=60`` to see the difference); the rounds that said hosts
down anyway are counted, from the log. Reconciliation is then in the first round only.

With ``--modes each,shared`` three scheduler processes run instead, all live (each writes the
reports of its third of the hosts), in one ``[scheduler] report_ingestion`` mode then the other,
alternated ``--cycles`` times in one run (the three restarted at each change, a warm-up round
first): the CPU each of them spends per report of the fleet, which at one report per host every
10 s and 100,000 hosts (10,000 reports/s) is its CPU seconds per second in units of 100 us.

Run: ``python -m benchmarks.report_e2e [--hosts N] [--rounds R] [--baseline DIR | --modes each,shared
[--cycles C]]`` (needs RabbitMQ with rabbitmqctl, PostgreSQL, and the test extra).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from benchmarks import command_line
from benchmarks.report_load import INSERT_CHUNK, _Fleet
from benchmarks.services import temporary_database, temporary_vhost
from benchmarks.summary import spread
from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.client import TOPIC, SchedulerClient
from scheduler.cmd.arguments import positive
from scheduler.db import api as db_api
from scheduler.db.models import instances
from scheduler.service import BINARY
from scheduler.utils import jsonutils

BATCH = 500  # reports per publisher batch


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle(pid: int, proc: subprocess.Popen, window: int = 14, timeout: float = 900) -> tuple[float, float]:
    """Wait until the process spent under 0.15 s of CPU in the last ``window`` half-seconds
    (longer than [scheduler] periodic_interval: the save of what it took is in it); (its CPU
    seconds then, its CPU per second in that window: what it spends idle)."""
    deadline = time.monotonic() + timeout
    samples = [_cpu_s(pid)]
    while True:
        time.sleep(0.5)
        if proc.poll() is not None:
            raise RuntimeError(f"the scheduler exited with status {proc.returncode}")
        samples = [*samples[-window:], _cpu_s(pid)]
        if len(samples) > window and samples[-1] - samples[0] < 0.15:
            return samples[-1], (samples[-1] - samples[0]) / (window * 0.5)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the scheduler was still busy after {timeout} s")


def _option_lines(options: list[str]) -> str:
    """``[GROUP]\nNAME = VALUE`` lines of ``GROUP.NAME=VALUE`` options (DEFAULT for a bare NAME)."""
    groups: dict[str, list[str]] = {}
    for option in options:
        key, sep, value = option.partition("=")
        group, _, name = key.strip().rpartition(".")
        if not sep or not name:
            raise ValueError(f"an option is GROUP.NAME=VALUE, got {option!r}")
        groups.setdefault(group or "DEFAULT", []).append(f"{name} = {value.strip()}")
    return "".join(f"[{group}]\n" + "".join(f"{line}\n" for line in lines) for group, lines in groups.items())


def code_of(tree: str | None) -> tuple[str | None, dict[str, str]]:
    """The working directory and environment of a process of ``python -m`` that imports Berth
    from ``tree`` (None: from where this process would). In that tree, not only with it on
    PYTHONPATH: ``-m`` puts the working directory before PYTHONPATH, so a baseline started from
    a checkout would import the checkout's code."""
    env = dict(os.environ)
    if tree is None:
        return None, env
    env["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [env.get("PYTHONPATH")])])
    return tree, env


class _Scheduler:
    """A berth-scheduler process of the code of ``tree`` (None: this one), named ``name``."""

    def __init__(self, name: str, tree: str | None, tmp: pathlib.Path, url: str, db_url: str,
                 options: list[str]) -> None:
        self.name, self.tree, self.log_path = name, tree, tmp / f"{name}.log"
        conf_file = tmp / f"{name}.conf"
        conf_file.write_text(f"[DEFAULT]\ntransport_url = {url}\nstate_path = {tmp}/state-{name}\n"
                             f"host = {name}\n[database]\nconnection = {db_url}\n"
                             "[prometheus]\nlisten_port = 0\n[scheduler]\nservice_down_time = 3600\n"
                             + _option_lines(options))
        cwd, env = code_of(tree)
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.scheduler", "--config-file",
                                      str(conf_file)], stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     cwd=cwd)
        self.figures: list[dict[str, float]] = []
        self.idle = 0.0
        self._said = 0

    def said_down(self) -> int:
        """How many "Host X is down" lines its log holds that were not counted yet."""
        with open(self.log_path, "rb") as log:
            total = sum(1 for line in log if b" is down: no report for " in line)
        new, self._said = total - self._said, total
        return new

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
        self._log.close()


@contextlib.contextmanager
def _fleet_on_services(transport_url: str, n_hosts: int,
                       per_host: int) -> Iterator[tuple[str, str, Any, Any]]:
    """(vhost URL, database URL, Database, fleet): a fresh vhost and PostgreSQL database, the
    latter holding the fleet's ``per_host`` ACTIVE instances a host; both dropped after."""
    with temporary_vhost(transport_url) as url, temporary_database() as db_url:
        database = db_api.Database(db_url)
        database.sync()
        fleet = _Fleet(n_hosts, per_host, 0)
        rows = list(fleet.instance_rows())
        with database.engine.begin() as connection:
            for start in range(0, len(rows), INSERT_CHUNK):
                connection.execute(instances.insert(), rows[start:start + INSERT_CHUNK])
        del rows
        yield url, db_url, database, fleet


def measure(transport_url: str, n_hosts: int = 30_000, rounds: int = 3, per_host: int = 4,
            baseline: str | None = None, options: list[str] | None = None,
            baseline_options: list[str] | None = None) -> dict[str, Any]:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="berth-report-e2e-"))
    schedulers: list[_Scheduler] = []
    try:
        with _fleet_on_services(transport_url, n_hosts, per_host) as (url, db_url, database, fleet):
            def alive() -> None:
                for name in ("sched-1", "sched-2"):
                    database.service_heartbeat(name, BINARY, TOPIC)

            alive()
            schedulers.append(_Scheduler("sched-0", None, tmp, url, db_url, options or []))
            if baseline is not None:
                schedulers.append(_Scheduler("sched-1", baseline, tmp, url, db_url, baseline_options or []))
            conf = berth_conf.new_conf()
            conf(["--config-file", str(tmp / "sched-0.conf")], project="berth-bench", default_config_files=[])
            transport = rpc.get_transport(conf)
            try:
                client = SchedulerClient(transport, timeout=2)
                for scheduler in schedulers:  # its fanout queue exists once it answers
                    _answering(client, scheduler)
                for scheduler in schedulers:
                    _, scheduler.idle = _idle(scheduler.proc.pid, scheduler.proc)
                    scheduler.said_down()
                for _ in range(rounds):
                    alive()
                    reports = _reports(fleet, n_hosts)
                    before = [_cpu_s(s.proc.pid) for s in schedulers]
                    started = time.monotonic()
                    sent = _publish_round(transport, client, reports)
                    for scheduler, cpu_before in zip(schedulers, before, strict=True):
                        after, _ = _idle(scheduler.proc.pid, scheduler.proc)
                        # Less what it spends idle (periodic tasks) over the round.
                        scheduler.figures.append({
                            "cpu_s": after - cpu_before - scheduler.idle * (time.monotonic() - started),
                            "publish_s": sent, "round_s": time.monotonic() - started,
                            "said_down": scheduler.said_down()})
            finally:
                transport.cleanup()
            with database.engine.connect() as connection:
                known = connection.execute(sa.text("SELECT count(*) FROM compute_nodes")).scalar()
            database.dispose()
            if known != n_hosts:
                raise RuntimeError(f"{known} hosts of {n_hosts} have a row: reports were lost")
    finally:
        for scheduler in schedulers:
            scheduler.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    row = _row(schedulers[0], n_hosts, rounds)
    if baseline is not None:
        row["baseline"] = _row(schedulers[1], n_hosts, rounds)
        row["ratios"] = [mine["cpu_s"] / theirs["cpu_s"] for mine, theirs in
                         zip(schedulers[0].figures[1:], schedulers[1].figures[1:], strict=True)]
    return row


def _reports(fleet: Any, n_hosts: int) -> list[tuple[str, Any]]:
    """(host, report) of every host, as its agent sends it."""
    return [(host, jsonutils.loads(body)) for host, body in fleet.bodies(0, n_hosts)]


def _publish_round(transport: Any, client: SchedulerClient, reports: list[tuple[str, Any]]) -> float:
    """Every host's report, as agents send them; the seconds it took to publish them."""
    started = time.monotonic()
    for chunk in range(0, len(reports), BATCH):
        with transport.publisher.batch():
            for host, resources in reports[chunk:chunk + BATCH]:
                client.report_resources({}, host, resources)
    return time.monotonic() - started


def measure_modes(transport_url: str, modes: list[str], n_hosts: int = 30_000, rounds: int = 3,
                  cycles: int = 2, per_host: int = 4, options: list[str] | None = None,
                  n_schedulers: int = 3) -> dict[str, Any]:
    """{mode: [[CPU s per report of scheduler i, for i in 0..n-1] for each measured round]}: the
    schedulers in each mode of ``modes`` in turn, ``cycles`` times."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="berth-report-e2e-"))
    figures: dict[str, list[list[float]]] = {mode: [] for mode in modes}
    rounds_s: dict[str, list[float]] = {mode: [] for mode in modes}
    schedulers: list[_Scheduler] = []
    try:
        with _fleet_on_services(transport_url, n_hosts, per_host) as (url, db_url, database, fleet):
            for _ in range(cycles):
                for mode in modes:
                    schedulers = [_Scheduler(f"sched-{i}", None, tmp, url, db_url,
                                             [*(options or []), f"scheduler.report_ingestion={mode}"])
                                  for i in range(n_schedulers)]
                    conf = berth_conf.new_conf()
                    conf(["--config-file", str(tmp / "sched-0.conf")], project="berth-bench",
                         default_config_files=[])
                    transport = rpc.get_transport(conf)
                    try:
                        client = SchedulerClient(transport, timeout=2)
                        for scheduler in schedulers:
                            _answering(client, scheduler)
                        for scheduler in schedulers:
                            _, scheduler.idle = _idle(scheduler.proc.pid, scheduler.proc)
                        for measured in range(rounds + 1):  # a warm-up round first
                            before = [_cpu_s(s.proc.pid) for s in schedulers]
                            started = time.monotonic()
                            _publish_round(transport, client, _reports(fleet, n_hosts))
                            spent = []
                            for scheduler, cpu_before in zip(schedulers, before, strict=True):
                                after, _ = _idle(scheduler.proc.pid, scheduler.proc)
                                idle = scheduler.idle * (time.monotonic() - started)
                                spent.append((after - cpu_before - idle) / n_hosts)
                            if measured:
                                figures[mode].append(spent)
                                rounds_s[mode].append(time.monotonic() - started)
                    finally:
                        transport.cleanup()
                        for scheduler in schedulers:
                            scheduler.stop()
            database.dispose()
    finally:
        for scheduler in schedulers:
            scheduler.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"n_hosts": n_hosts, "figures": figures, "round_s": rounds_s}


def describe_modes(row: dict[str, Any]) -> list[str]:
    lines = []
    for mode, figures in row["figures"].items():
        each = [us * 1e6 for round_ in figures for us in round_]
        worst = [max(round_) * 1e6 for round_ in figures]
        lines.append(f"report_ingestion = {mode}: {spread(each, 0, 'scheduler-rounds')} us CPU per "
                     f"report of the fleet per scheduler; the busiest scheduler of each round "
                     f"{spread(worst, 0, 'rounds')}; "
                     f"at 10,000 reports/s: {statistics.median(each) / 100:.2f} CPU s per s per scheduler; "
                     f"rounds of {spread(row['round_s'][mode], 1, 'rounds')} s")
    return lines


def _answering(client: SchedulerClient, scheduler: _Scheduler) -> None:
    own = client._client.prepare(server=scheduler.name, timeout=2)
    deadline = time.monotonic() + 120
    while True:
        try:
            own.call({}, "list_hosts")
            return
        except rpc.MessagingTimeout:
            if time.monotonic() > deadline or scheduler.proc.poll() is not None:
                with open(scheduler.log_path, errors="replace") as log:
                    tail = "".join(log.readlines()[-15:])
                raise RuntimeError(f"{scheduler.name} did not start; its log ends:\n{tail}") from None


def _row(scheduler: _Scheduler, n_hosts: int, rounds: int) -> dict[str, Any]:
    figures = scheduler.figures
    steady = [f["cpu_s"] / n_hosts * 1e6 for f in figures[1:]]
    return {
        "bench": "reports e2e",
        "scheduler": scheduler.name,
        "tree": scheduler.tree,
        "idle_cpu_ms_per_s": scheduler.idle * 1e3,
        "n_hosts": n_hosts,
        "rounds": rounds,
        "first_round_us_per_report": figures[0]["cpu_s"] / n_hosts * 1e6,
        "us_per_report": steady,
        "published_per_s": [n_hosts / f["publish_s"] for f in figures],
        "round_s": [f["round_s"] for f in figures],
        "rounds_saying_down": sum(1 for f in figures if f["said_down"]),
        "median_ms": statistics.median(steady) / 1e3 if steady else None,
        "p99_ms": None,
    }


def describe(row: dict[str, Any]) -> str:
    steady = row["us_per_report"]
    down = row["rounds_saying_down"]
    return (f"{row['scheduler']} ({row['tree'] or 'this tree'}): {spread(steady, 0, 'rounds')} us CPU "
            f"per report after the first round, first round {row['first_round_us_per_report']:.0f} us (less "
            f"its idle {row['idle_cpu_ms_per_s']:.0f} ms CPU per s); rounds of "
            f"{spread(row['round_s'], 0, 'rounds')} s"
            + (f", {down} of them past service_down_time (hosts said down)" if down else ""))


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.report_e2e", __doc__)
    parser.add_argument("--hosts", type=positive, default=30_000)
    parser.add_argument("--rounds", type=positive, default=3,
                        help="rounds of every host's report (default 3)")
    parser.add_argument("--baseline", metavar="DIR", default=None,
                        help="also run a scheduler of the source tree DIR, on the same reports")
    parser.add_argument("--option", action="append", default=[], metavar="GROUP.NAME=VALUE",
                        help="configuration of the scheduler of this tree (repeatable)")
    parser.add_argument("--baseline-option", action="append", default=[], metavar="GROUP.NAME=VALUE",
                        help="configuration of the baseline's scheduler (repeatable)")
    parser.add_argument("--modes", default=None, metavar="MODE,MODE",
                        help="run three schedulers in each [scheduler] report_ingestion mode given "
                        "(each, shared), alternated")
    parser.add_argument("--cycles", type=positive, default=2,
                        help="with --modes: how many times each mode runs (default 2)")
    parser.add_argument("--transport-url", default=os.environ.get(
        "BERTH_BENCH_TRANSPORT_URL", "rabbit://guest:guest@127.0.0.1:5672/"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        _option_lines(args.option + args.baseline_option)
    except ValueError as exc:
        parser.error(str(exc))
    if args.modes is not None:
        modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
        if not modes or set(modes) - {"each", "shared"} or args.baseline is not None:
            parser.error("--modes takes each and/or shared, comma-separated, and no --baseline")
        row = measure_modes(args.transport_url, modes, args.hosts, args.rounds, args.cycles,
                            options=args.option)
        print(f"{args.hosts:,} hosts into 3 berth-scheduler processes over RabbitMQ (PostgreSQL), "
              f"modes alternated {args.cycles} times, {args.rounds} rounds each after a warm-up")
        for line in describe_modes(row):
            print(line)
        return 0
    row = measure(args.transport_url, args.hosts, max(2, args.rounds), baseline=args.baseline,
                  options=args.option, baseline_options=args.baseline_option)
    print(f"{args.hosts:,} hosts into berth-scheduler processes over RabbitMQ (of 3 schedulers, "
          f"PostgreSQL), published at {statistics.median(row['published_per_s']):,.0f} reports/s")
    print(describe(row))
    if "baseline" in row:
        print(describe(row["baseline"]))
        print(f"CPU per report, {row['scheduler']} / {row['baseline']['scheduler']}, round by round: "
              f"{spread(row['ratios'], 2, 'rounds')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
