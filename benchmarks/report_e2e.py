"""The reports of a large fleet into a real berth-scheduler process over RabbitMQ: its CPU per
report, to hold against the in-process figure of ``benchmarks.report_load``.

A fresh vhost and PostgreSQL database; one scheduler process (``sched-0``), the two others
alive by the heartbeats this process writes, so that it writes about a third of the reports;
``--hosts`` hosts with their ACTIVE instances in the database. This process publishes one
report of every host (fanned out, as agents do), as fast as it can, in publisher batches, and
waits until the scheduler is idle again; a round's CPU is the scheduler process's (from
/proc), whatever its pace. The first round (each scheduler writes a host's first report) is
given apart from the next ones.

Run: ``python -m benchmarks.report_e2e [--hosts N] [--rounds R]`` (needs RabbitMQ with
rabbitmqctl, PostgreSQL, and the test extra).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import sqlalchemy as sa

from benchmarks.report_load import INSERT_CHUNK, PG_ADMIN_DSN, PG_URL, _Fleet
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


def measure(transport_url: str, n_hosts: int = 30_000, rounds: int = 3, per_host: int = 4) -> dict[str, Any]:
    from tests.fixtures import temporary_database, temporary_vhost  # the test extra

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="berth-report-e2e-"))
    proc = None
    try:
        with temporary_vhost(transport_url, prefix="berth-bench") as url, \
                temporary_database(PG_ADMIN_DSN, PG_URL, prefix="berth_bench", connect_timeout=3) as db_url:
            conf_file = tmp / "berth.conf"
            conf_file.write_text(f"[DEFAULT]\ntransport_url = {url}\nstate_path = {tmp}/state\n"
                                 f"host = sched-0\n[database]\nconnection = {db_url}\n"
                                 "[prometheus]\nlisten_port = 0\n")
            database = db_api.Database(db_url)
            database.sync()
            fleet = _Fleet(n_hosts, per_host, 0)
            rows = list(fleet.instance_rows())
            with database.engine.begin() as connection:
                for start in range(0, len(rows), INSERT_CHUNK):
                    connection.execute(instances.insert(), rows[start:start + INSERT_CHUNK])
            del rows
            def alive() -> None:
                for name in ("sched-1", "sched-2"):
                    database.service_heartbeat(name, BINARY, TOPIC)

            alive()
            log = open(tmp / "scheduler.log", "ab")  # noqa: SIM115
            proc = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.scheduler", "--config-file",
                                     str(conf_file)], stdout=log, stderr=subprocess.STDOUT)
            conf = berth_conf.new_conf()
            conf(["--config-file", str(conf_file)], project="berth-bench", default_config_files=[])
            transport = rpc.get_transport(conf)
            figures = []
            try:
                client = SchedulerClient(transport, timeout=2)
                deadline = time.monotonic() + 120
                while True:  # the scheduler's fanout queue exists once it answers
                    try:
                        client.list_hosts({})
                        break
                    except rpc.MessagingTimeout:
                        if time.monotonic() > deadline or proc.poll() is not None:
                            raise RuntimeError("the scheduler did not start: see its log") from None
                _, idle = _idle(proc.pid, proc)
                for _ in range(rounds):
                    alive()
                    reports = [(host, jsonutils.loads(body)) for host, body in fleet.bodies(0, n_hosts)]
                    before, started = _cpu_s(proc.pid), time.monotonic()
                    for chunk in range(0, n_hosts, BATCH):
                        with transport.publisher.batch():
                            for host, resources in reports[chunk:chunk + BATCH]:
                                client.report_resources({}, host, resources)
                    sent = time.monotonic() - started
                    after, _ = _idle(proc.pid, proc)
                    # Less what it spends idle (periodic tasks) over the round.
                    figures.append({"cpu_s": after - before - idle * (time.monotonic() - started),
                                    "publish_s": sent})
            finally:
                transport.cleanup()
            with database.engine.connect() as connection:
                known = connection.execute(sa.text("SELECT count(*) FROM compute_nodes")).scalar()
            database.dispose()
            if known != n_hosts:
                raise RuntimeError(f"{known} hosts of {n_hosts} have a row: reports were lost")
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)
    steady = [f["cpu_s"] / n_hosts * 1e6 for f in figures[1:]]
    return {
        "bench": "reports e2e",
        "idle_cpu_ms_per_s": idle * 1e3,
        "n_hosts": n_hosts,
        "rounds": rounds,
        "first_round_us_per_report": figures[0]["cpu_s"] / n_hosts * 1e6,
        "us_per_report": steady,
        "published_per_s": [n_hosts / f["publish_s"] for f in figures],
        "median_ms": statistics.median(steady) / 1e3 if steady else None,
        "p99_ms": None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report_e2e", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=positive, default=30_000)
    parser.add_argument("--rounds", type=positive, default=3,
                        help="rounds of every host's report (default 3)")
    parser.add_argument("--transport-url", default=os.environ.get(
        "BERTH_BENCH_TRANSPORT_URL", "rabbit://guest:guest@127.0.0.1:5672/"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    row = measure(args.transport_url, args.hosts, max(2, args.rounds))
    steady = row["us_per_report"]
    print(f"{args.hosts:,} hosts into a berth-scheduler process over RabbitMQ (1 of 3 schedulers, "
          f"PostgreSQL): {statistics.median(steady):.0f} us CPU per report "
          f"({min(steady):.0f}-{max(steady):.0f}, {len(steady)} rounds after the first), "
          f"first round {row['first_round_us_per_report']:.0f} us (less its idle "
          f"{row['idle_cpu_ms_per_s']:.0f} ms CPU per s); "
          f"published at {statistics.median(row['published_per_s']):,.0f} reports/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
