"""How fast the scheduler absorbs agent reports, and what a host costs it in memory."""

import time
import tracemalloc

import numpy as np

from berth_contract.host_report import HostReport
from scheduler import conf as berth_conf
from scheduler.fleet.host_manager import HostManager
from scheduler.manager import ReportBuffer
from scheduler.simulation.host_tables import random_report


def _conf():
    conf = berth_conf.new_conf()
    conf([], project="berth-bench", default_config_files=[])
    return conf


def reports(n_hosts, rounds, seed=0):
    rng = np.random.default_rng(seed)
    return [random_report(rng, f"host-{i % n_hosts:06d}") for i in range(n_hosts * rounds)]


def measure_ingestion(n_hosts=10_000, rounds=5, seed=0):
    """Reports/s through what the scheduler's report_resources does: parse, table, save buffer."""
    incoming = reports(n_hosts, rounds, seed)
    manager, buffer = HostManager(_conf()), ReportBuffer()
    start = time.perf_counter()
    for wire in incoming:
        report = HostReport.from_wire(wire, wire["host"])
        manager.update_from_report(report)
        buffer.put(report.host, report)
    elapsed = time.perf_counter() - start
    return {
        "bench": "ingestion",
        "n_hosts": n_hosts,
        "policy": "-",
        "reports": len(incoming),
        "reports_per_s": len(incoming) / elapsed,
        "median_ms": elapsed / len(incoming) * 1e3,
        "p99_ms": None,
    }


def measure_memory(n_hosts=100_000, seed=0):
    """Bytes the scheduler holds per host once every host has reported."""
    incoming = reports(n_hosts, 1, seed)
    conf = _conf()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    manager = HostManager(conf)
    for wire in incoming:
        manager.update_from_report(HostReport.from_wire(wire, wire["host"]))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return {
        "bench": "memory",
        "n_hosts": n_hosts,
        "policy": "-",
        "bytes_per_host": held / n_hosts,
        "median_ms": None,
        "p99_ms": None,
    }
