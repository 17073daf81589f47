"""What the scheduler counts, as Prometheus metrics of its process.

The counters of outcomes move once the unit of work that decided them commits (the
manager sends them through its outbox, as it sends the builds): a batch rolled back and
delivered again is counted once. The fleet's gauges are read from the host table at
each scrape (:class:`FleetCollector`). No series per host: a fleet of 100,000 hosts makes
the same few series as a fleet of 3.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from oslo_config import cfg
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

opts = [
    cfg.BoolOpt("per_host_series", default=False,
                help="Also serve each host's free RAM and disk, vCPUs used and report age (berth_host_*, "
                "labelled by host): one series each per host, so off by default (a fleet of 100,000 "
                "hosts would make 400,000)."),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("prometheus", opts)]


#: The outcomes of an instance's scheduling.
PLACED = "placed"  # its first attempt placed it
RESCHEDULED = "rescheduled"  # placed again after its agent sent it back
NO_VALID_HOST = "no_valid_host"  # refused: no host passed the filters, or its hints cannot be met
ERROR = "error"  # refused otherwise: too many attempts, or an invalid request

PLACEMENTS = Counter(
    "berth_scheduler_placements",
    "Instances the scheduler decided on, by outcome: placed, rescheduled (placed again after "
    "its agent sent it back), no_valid_host, error (too many attempts, invalid request).",
    ["outcome"])
for _outcome in (PLACED, RESCHEDULED, NO_VALID_HOST, ERROR):
    PLACEMENTS.labels(_outcome)

DECISION_SECONDS = Histogram(
    "berth_scheduler_decision_seconds",
    "Time to choose the hosts of one request (filters, weighers, selection) in memory, each time "
    "it is chosen: again after a claim conflict with another scheduler.",
    buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))

CAST_TO_SCHEDULED_SECONDS = Histogram(
    "berth_scheduler_cast_to_scheduled_seconds",
    "Time from a run_instance cast (or an agent's send-back) to its instance SCHEDULED, committed; "
    "the cast's sender's clock against the scheduler's. Casts from callers other than Berth's "
    "clients carry no time and are not counted.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))

REFUSAL_HOSTS_REMOVED = Counter(
    "berth_scheduler_refusal_hosts_removed",
    "In the decisions that found no valid host, the hosts each filter removed.",
    ["filter"])

CLAIM_CONFLICTS = Counter(
    "berth_scheduler_claim_conflicts",
    "Hosts whose claim failed because another scheduler placed there first.")


MOVES = Counter(
    "berth_scheduler_moves",
    "Moves of instances by kind (resize, migration, live-migration, evacuation) and outcome: started, "
    "completed (a migration's or evacuation's instance ACTIVE on its destination, a resize waiting for "
    "confirmation), confirmed, reverted, error (failed: the instance stays on its source).",
    ["kind", "outcome"])

MOVE_SECONDS = Histogram(
    "berth_scheduler_move_seconds",
    "Time from a move's start to its end (completed, confirmed, reverted or error), by kind.",
    ["kind"], buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600))


def count_move(kind: str, outcome: str, seconds: float | None = None) -> None:
    MOVES.labels(kind, outcome).inc()
    if seconds is not None and outcome != "started":
        MOVE_SECONDS.labels(kind).observe(max(0.0, seconds))


def count_outcome(outcome: str, instances: int) -> None:
    PLACEMENTS.labels(outcome).inc(instances)


def observe_scheduled(cast_at: Any) -> None:
    """An instance SCHEDULED now, whose request was cast at ``cast_at`` (seconds since the
    epoch, as the context carried it: anything else is left out). A sender whose clock is
    ahead is counted as 0."""
    if isinstance(cast_at, bool) or not isinstance(cast_at, int | float) or not math.isfinite(cast_at):
        return
    CAST_TO_SCHEDULED_SECONDS.observe(max(0.0, time.time() - cast_at))


class Scheduled:
    """The instances a batch placed, counted in one go once it commits."""

    def __init__(self) -> None:
        self.placed = self.rescheduled = 0
        self.cast_at: list[Any] = []

    def __bool__(self) -> bool:
        return bool(self.placed or self.rescheduled)

    def add(self, attempt: int, cast_at: Any) -> None:
        if attempt <= 1:
            self.placed += 1
        else:
            self.rescheduled += 1
        self.cast_at.append(cast_at)

    def count(self) -> None:
        for outcome, instances in ((PLACED, self.placed), (RESCHEDULED, self.rescheduled)):
            if instances:
                count_outcome(outcome, instances)
        for cast_at in self.cast_at:
            observe_scheduled(cast_at)


def count_refusal(removed: Iterable[tuple[str, int]]) -> None:
    for name, hosts in removed:
        REFUSAL_HOSTS_REMOVED.labels(name).inc(hosts)


def timed(select: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``select`` with each call's time observed in DECISION_SECONDS."""
    def observed(spec: Any) -> Any:
        started = time.perf_counter()
        try:
            return select(spec)
        finally:
            DECISION_SECONDS.observe(time.perf_counter() - started)
    return observed


class FleetCollector(Collector):
    """The fleet as the scheduler sees it, read from its HostManager at each scrape: hosts
    by state, the capacity and free room of the hosts that take work, the oldest report."""

    def __init__(self, host_manager: Any, down_after_s: Callable[[], float],
                 per_host: Callable[[], bool] = lambda: False) -> None:
        self._hosts = host_manager
        self._down_after_s = down_after_s
        self._per_host = per_host

    def describe(self) -> list[Any]:  # no samples at registration: read at scrape only
        return []

    def collect(self) -> Iterator[Any]:
        hosts = self._hosts
        with hosts.lock:
            table = hosts.table
            count = len(table)
            names = table.names[:count]
            deleted = np.fromiter((name in hosts.deleted for name in names), dtype=bool, count=count)
            known = ~deleted
            age = time.monotonic() - table.updated[:count]
            down = known & (age > self._down_after_s())
            disabled = known & ~down & table.disabled[:count]
            up = known & ~down & ~disabled
            columns = {name: np.asarray(getattr(table, name)[:count], dtype=float)[up]
                       for name in ("total_ram_mb", "free_ram_mb", "total_disk_gb", "free_disk_gb",
                                    "vcpus_total", "vcpus_used")}
            reported = known & np.isfinite(age)
            oldest = float(age[reported].max()) if reported.any() else None
            per_host = self._per_host_families(table, known, age) if self._per_host() else []
        states = GaugeMetricFamily("berth_scheduler_hosts", "Compute hosts the scheduler knows, by state: "
                                   "up, down (no report for service_down_time), disabled.", labels=["state"])
        for state, mask in (("up", up), ("down", down), ("disabled", disabled)):
            states.add_metric([state], int(mask.sum()))
        yield states
        mib, gib = 1024 ** 2, 1024 ** 3
        for name, help_text, value in (
                ("berth_fleet_memory_bytes", "RAM of the hosts up and enabled, as reported.",
                 columns["total_ram_mb"].sum() * mib),
                ("berth_fleet_memory_free_bytes", "Free RAM of the hosts up and enabled, the scheduler's "
                 "placements since their reports taken.", columns["free_ram_mb"].sum() * mib),
                ("berth_fleet_disk_bytes", "Disk of the hosts up and enabled, as reported.",
                 columns["total_disk_gb"].sum() * gib),
                ("berth_fleet_disk_free_bytes", "Free disk of the hosts up and enabled, the scheduler's "
                 "placements since their reports taken.", columns["free_disk_gb"].sum() * gib),
                ("berth_fleet_vcpus", "vCPUs of the hosts up and enabled.", columns["vcpus_total"].sum()),
                ("berth_fleet_vcpus_used", "vCPUs in use on the hosts up and enabled.",
                 columns["vcpus_used"].sum())):
            yield GaugeMetricFamily(name, help_text, value=float(value))
        if oldest is not None:
            yield GaugeMetricFamily("berth_scheduler_oldest_host_report_age_seconds",
                                    "Age of the oldest last report among the hosts the scheduler knows.",
                                    value=oldest)
        yield from per_host

    @staticmethod
    def _per_host_families(table: Any, known: Any, age: Any) -> list[GaugeMetricFamily]:
        """berth_host_* of each host known ([prometheus] per_host_series)."""
        families = [
            (GaugeMetricFamily("berth_host_memory_free_bytes", "A host's free RAM, placements since its "
                               "report included.", labels=["host"]), table.free_ram_mb, 1024 ** 2),
            (GaugeMetricFamily("berth_host_disk_free_bytes", "A host's free disk, placements since its "
                               "report included.", labels=["host"]), table.free_disk_gb, 1024 ** 3),
            (GaugeMetricFamily("berth_host_vcpus_used", "vCPUs in use on a host.", labels=["host"]),
             table.vcpus_used, 1),
            (GaugeMetricFamily("berth_host_report_age_seconds", "Age of a host's last report.",
                               labels=["host"]), age, 1),
        ]
        for row in np.flatnonzero(known & np.isfinite(age)):
            name = table.names[row]
            for family, column, unit in families:
                family.add_metric([name], float(column[row]) * unit)
        return [family for family, _, _ in families]
