"""What the reports of a large fleet cost one of several schedulers: CPU per second of reports.

Every agent fans its report out to every scheduler; each takes every report into its host
table, and writes to the database only the reports of the hosts it owns among the live
schedulers (about 1/N each). This runs one scheduler's own code, in this process, on a real
database: ``SchedulerManager.report_resources`` (what the RPC server calls for each message)
on each report's JSON body decoded as the server decodes it, and, every ``[scheduler]
periodic_interval`` of reports, ``SchedulerService.save_reports`` (the periodic task: the
owned reports' rows upserted, every report reconciled against the instances' rows). The other
schedulers are alive by their heartbeats only.

Reports come as fast as the process takes them, not at their real rate; the figure is CPU
time per second of reports at the fleet's rate (``--hosts`` hosts, one report each
``--report-interval`` s): the process's own CPU (``time.process_time``) and, on PostgreSQL,
that of the server's backends serving its connections (read from /proc: the server must be
on this machine). The reconciler's clock is the reports' simulated one, so that it looks at
the share of the hosts that falls due in a period of real time. Not counted: the AMQP frames
and the server's dispatch around the handler (the end-to-end check of the performance page measures
the whole process).

This machine's speed drifts, and other work on it slows a process's CPU too (caches, the
second thread of a core): each row also gives the CPU per report of the ``ingestion``
section (bare reports into a bare host table, the performance page's "agent reports absorbed") measured in
the same process just before, to compare with that section's figures.

Run: ``python -m benchmarks.report_load [--hosts N] [--backends sqlite,postgresql] ...``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks import command_line, ingestion
from benchmarks.services import temporary_database
from benchmarks.summary import spread
from berth_contract.host_report import HostReport
from scheduler import conf as berth_conf
from scheduler import states
from scheduler.client import TOPIC
from scheduler.cmd.arguments import positive
from scheduler.conf import opts
from scheduler.db import api as db_api
from scheduler.db.models import instances
from scheduler.fleet import reconciler
from scheduler.fleet.host_manager import HostManager
from scheduler.manager import ReportBuffer
from scheduler.process.running import settle_garbage_collector
from scheduler.service import BINARY, SchedulerService
from scheduler.utils import jsonutils

BACKENDS = ("sqlite", "postgresql")
INSERT_CHUNK = 5000
STARTED_AT = "2026-12-01T12:00:00.000000Z"


class _Clock:
    """A monotonic clock moved by hand: the reports' time, not the benchmark's."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now


class _ClockedTime:
    """The ``time`` module as the reconciler sees it: ``monotonic`` is the reports' clock."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def monotonic(self) -> float:
        return self._clock.monotonic()


class _Fleet:
    """``n_hosts`` hosts of ``per_host`` ACTIVE instances each, and their agents' reports: the
    keys a real agent sends (compute_agent's ResourceTracker.report), figures drawn at random."""

    def __init__(self, n_hosts: int, per_host: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.names = [f"host-{i:06d}" for i in range(n_hosts)]
        self.uuids = [[str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | i << 8 | k, version=4))
                       for k in range(per_host)] for i in range(n_hosts)]
        self.memory = rng.choice([131072, 262144, 524288], size=n_hosts)
        self.vcpus = rng.choice([32, 64, 128], size=n_hosts)
        self.per_host = per_host
        self._rng = rng
        self._seq = 0

    def instance_rows(self) -> Iterator[dict[str, Any]]:
        long_ago = datetime.datetime(2026, 11, 30, 12, 0, 0)
        for host, uuids in zip(self.names, self.uuids, strict=True):
            for number, instance in enumerate(uuids):
                yield {"uuid": instance, "project_id": "bench", "host": host, "node": host,
                       "state": states.ACTIVE, "flavor_name": "m1.medium", "memory_mb": 4096,
                       "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2, "created_at": long_ago,
                       "updated_at": long_ago, "scheduled_at": long_ago, "launched_at": long_ago,
                       "display_name": f"{host}-{number}"}

    def bodies(self, first: int, count: int) -> list[tuple[str, bytes]]:
        """The next report of ``count`` hosts from host ``first`` on (wrapping around), each
        (host, the report's JSON as it comes in a message)."""
        self._seq += 1
        n = len(self.names)
        used = self._rng.uniform(0.2, 0.9, size=count)
        at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out = []
        for k in range(count):
            i = (first + k) % n
            host, memory, vcpus = self.names[i], int(self.memory[i]), int(self.vcpus[i])
            memory_used, vcpus_used = int(memory * used[k]), int(vcpus * used[k])
            disk_used = 40 * self.per_host
            vms = self.per_host
            report = {
                "host": host, "memory_mb": memory, "free_ram_mb": memory - memory_used, "local_gb": 4000,
                "free_disk_gb": 4000 - disk_used, "vcpus": vcpus, "vcpus_used": vcpus_used, "nodename": host,
                "memory_mb_used": memory_used, "local_gb_used": disk_used, "running_vms": vms,
                "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "reserved_host_cpus": 0,
                "report_seq": self._seq, "started_at": STARTED_AT, "reported_at": at,
                "hypervisor_type": "kvm", "cpu_arch": "x86_64", "vm_modes": ["hvm"], "io_workload": 0,
                "failed_builds": 0, "image_properties": {}, "version": "0.1.0",
                "stats": {"num_instances": vms, "io_workload": 0, "failed_builds": 0, "num_vm_active": vms},
                "metrics": {"memory.used_mb": memory_used, "memory.free_mb": memory - memory_used,
                            "vcpus.used": vcpus_used, "instances": vms,
                            "memory.percent": round(100 * memory_used / memory, 3),
                            "cpu.percent": round(100 * vcpus_used / vcpus, 3)},
                "inventories": {
                    "VCPU": {"total": vcpus, "reserved": 0, "min_unit": 1, "max_unit": vcpus, "step_size": 1,
                             "allocation_ratio": 1.0},
                    "MEMORY_MB": {"total": memory, "reserved": 0, "min_unit": 1, "max_unit": memory,
                                  "step_size": 1, "allocation_ratio": 1.0},
                    "DISK_GB": {"total": 4000, "reserved": 0, "min_unit": 1, "max_unit": 4000, "step_size": 1,
                                "allocation_ratio": 1.0}},
                "usages": {"VCPU": vcpus_used, "MEMORY_MB": memory_used, "DISK_GB": disk_used},
                "traits": [], "instance_uuids": self.uuids[i],
            }
            out.append((host, jsonutils.dumps(report).encode()))
        return out


def reference_us(n_hosts: int = 10_000, rounds: int = 3) -> float:
    """CPU microseconds per report of the ``ingestion`` section's loop, measured now."""
    incoming = ingestion.reports(n_hosts, rounds)
    manager, buffer = HostManager(ingestion._conf()), ReportBuffer()
    started = time.process_time()
    for wire in incoming:
        report = HostReport.from_wire(wire, wire["host"])
        manager.update_from_report(report)
        buffer.put(report.host, report)
    return (time.process_time() - started) / len(incoming) * 1e6


def _backend_cpu_s(database: db_api.Database) -> dict[int, float]:
    """{pid: CPU seconds} of the PostgreSQL backends connected to ``database``'s database."""
    tick = os.sysconf("SC_CLK_TCK")
    with database.engine.connect() as connection:  # one of the pool's: its own query costs little
        pids = [pid for (pid,) in connection.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")]
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return found


def _server_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


@contextlib.contextmanager
def _database_url(backend: str, tmp: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp}/report-load.sqlite"
        return
    with temporary_database() as url:
        yield url


def _conf(url: str, tmp: str, name: str) -> Any:
    conf = berth_conf.new_conf()
    conf([], project="berth-bench", default_config_files=[])
    conf.set_override("host", name)
    conf.set_override("state_path", tmp)
    conf.set_override("transport_url", "memory://")
    conf.set_override("control_exchange", f"report-load-{os.getpid()}")
    conf.set_override("connection", url, group="database")
    opts.register_plugin_opts(conf)
    return conf


def measure(backend: str = "sqlite", n_hosts: int = 100_000, schedulers: int = 3, interval: float = 10.0,
            periods: int = 5, per_host: int = 4, seed: int = 0) -> dict[str, Any]:
    """One row: the CPU one of ``schedulers`` schedulers spends per second of the reports of
    ``n_hosts`` hosts reporting every ``interval`` s, over ``periods`` save periods after a
    first round of every host (a scheduler's start, measured apart)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    reference = reference_us()
    tmp = tempfile.mkdtemp(prefix="berth-report-load-")
    try:
        with _database_url(backend, tmp) as url:
            row = _measure(url, tmp, backend, n_hosts, schedulers, interval, periods, per_host, seed)
            row["ingestion_us_per_report"] = reference
            return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(url: str, tmp: str, backend: str, n_hosts: int, schedulers: int, interval: float, periods: int,
             per_host: int, seed: int) -> dict[str, Any]:
    names = [f"sched-{k}" for k in range(schedulers)]
    conf = _conf(url, tmp, names[0])
    database = db_api.Database.from_conf(conf)
    threshold = gc.get_threshold()
    clock = _Clock()
    real_time = reconciler.time
    reconciler.time = _ClockedTime(clock)  # type: ignore[assignment]
    try:
        database.sync()
        fleet = _Fleet(n_hosts, per_host, seed)
        rows = list(fleet.instance_rows())
        with database.engine.begin() as connection:
            for start in range(0, len(rows), INSERT_CHUNK):
                connection.execute(instances.insert(), rows[start:start + INSERT_CHUNK])
        del rows
        if backend == "postgresql":
            with database.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
        service = SchedulerService(conf, _transport(conf), database)
        manager = service.manager
        save_period = conf.scheduler.periodic_interval
        per_period = round(n_hosts / interval * save_period)

        def alive() -> None:
            for name in names:
                database.service_heartbeat(name, BINARY, TOPIC)

        def absorb(bodies: list[tuple[str, bytes]]) -> None:
            for host, body in bodies:
                manager.report_resources({}, host, jsonutils.loads(body))

        settle_garbage_collector()  # as a started scheduler does
        alive()
        first = fleet.bodies(0, n_hosts)
        started, server = time.process_time(), _backend_cpu_s(database) if backend == "postgresql" else {}
        absorb(first)
        service.save_reports()
        first_cpu = time.process_time() - started
        first_server = _server_delta(server, _backend_cpu_s(database)) if backend == "postgresql" else 0.0
        del first
        taken, saved, on_server, written = [], [], [], []
        real_save = database.save_compute_nodes

        def counted(rows: Any) -> None:
            rows = list(rows)
            written.append(len(rows))
            real_save(rows)

        database.save_compute_nodes = counted  # type: ignore[method-assign]
        for period in range(periods):
            alive()
            bodies = fleet.bodies(period * per_period, per_period)
            before = _backend_cpu_s(database) if backend == "postgresql" else {}
            started = time.process_time()
            absorb(bodies)
            middle = time.process_time()
            clock.now += save_period
            service.save_reports()
            ended = time.process_time()
            if backend == "postgresql":
                on_server.append(_server_delta(before, _backend_cpu_s(database)))
            taken.append(middle - started)
            saved.append(ended - middle)
    finally:
        reconciler.time = real_time  # type: ignore[assignment]
        gc.unfreeze()
        gc.set_threshold(*threshold)
        database.dispose()
    seconds = save_period  # of reports per period
    own = [(t + s) / seconds * 1e3 for t, s in zip(taken, saved, strict=True)]
    total = [o + (v / seconds * 1e3) for o, v in zip(own, on_server or [0.0] * len(own), strict=True)]
    return {
        "bench": "reports",
        "n_hosts": n_hosts,
        "policy": f"1 of {schedulers} schedulers, {backend}",
        "backend": backend,
        "schedulers": schedulers,
        "reports_per_s": n_hosts / interval,
        "instances_per_host": per_host,
        "periods": periods,
        "reports_per_period": per_period,
        "rows_written_per_period": statistics.median(written) if written else 0,
        "absorb_us_per_report": [t / per_period * 1e6 for t in taken],
        "save_ms_per_period": [s * 1e3 for s in saved],
        "server_ms_per_period": [v * 1e3 for v in on_server] or None,
        "cpu_ms_per_s": own,  # this process's CPU per second of reports
        "total_cpu_ms_per_s": total,  # and the database server's backends on PostgreSQL
        "first_round_cpu_s": first_cpu,
        "first_round_server_cpu_s": first_server if backend == "postgresql" else None,
        "median_ms": statistics.median(total),
        "p99_ms": None,
    }


def _transport(conf: Any) -> Any:
    from scheduler import rpc

    return rpc.get_transport(conf)


def describe(row: dict[str, Any]) -> str:
    """The row's figures in words, median (min-max) over its periods."""
    own = row["cpu_ms_per_s"]
    text = (f"{row['reports_per_s']:,.0f} reports/s, {row['instances_per_host']} instances/host: "
            f"{spread(row['absorb_us_per_report'])} us CPU per report taken, save "
            f"{spread(row['save_ms_per_period'], 0)} ms CPU per {row['reports_per_period']:,} reports "
            f"({row['rows_written_per_period']:,} rows written); scheduler {spread(own, 0)} ms CPU per s "
            f"of reports ({statistics.median(own) / 10:.0f}% of a core)")
    if row["server_ms_per_period"]:
        total = row["total_cpu_ms_per_s"]
        text += (f", PostgreSQL's backends {spread(row['server_ms_per_period'], 0)} ms per save, "
                 f"both {spread(total, 0)} ms per s ({statistics.median(total) / 10:.0f}% of a core)")
    text += f"; first round of every host {row['first_round_cpu_s']:.1f} s CPU"
    if row["first_round_server_cpu_s"] is not None:
        text += f" (+{row['first_round_server_cpu_s']:.1f} s on the server)"
    return text + f"; the ingestion section's reports {row['ingestion_us_per_report']:.1f} us CPU each"


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(f"--{prefix}hosts", type=positive, default=100_000,
                        help="hosts reporting (default 100000)")
    parser.add_argument(f"--{prefix}schedulers", type=positive, default=3,
                        help="live schedulers sharing the writes (default 3)")
    parser.add_argument(f"--{prefix}interval", type=float, default=10.0,
                        help="seconds between two reports of a host (default 10)")
    parser.add_argument(f"--{prefix}periods", type=positive, default=5,
                        help="save periods measured (default 5)")
    parser.add_argument(f"--{prefix}instances", type=int, default=4,
                        help="ACTIVE instances per host, in the reports and the database (default 4)")
    parser.add_argument(f"--{prefix}backends", type=command_line.names("backends", BACKENDS),
                        default=list(BACKENDS),
                        help="comma-separated, of: sqlite, postgresql")


def rows(args: argparse.Namespace, prefix: str = "") -> Iterator[dict[str, Any]]:
    get = lambda name: getattr(args, prefix.replace("-", "_") + name)  # noqa: E731
    for backend in get("backends"):
        yield measure(backend, get("hosts"), get("schedulers"), get("interval"), get("periods"),
                      get("instances"))


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.report_load", __doc__)
    add_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for row in rows(args):
        print(f"{row['n_hosts']:,} hosts, 1 of {row['schedulers']} schedulers, {row['backend']}: "
              f"{describe(row)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
