"""Several schedulers on one queue, on a simulated clock: the placements per second N of them
sustain, the claim conflicts they meet, and where their instances end up.

Each simulated scheduler is Berth's own: a HostManager's host table fed by the agents'
reports, the default filters and weighers in a Selector (with ``host_subset_size``), and
HostClaims placing each batch (scheduler/planning/claims.py: select in memory, claim the
chosen hosts' generations, on a conflict learn what the others placed and select again).
The database is benchmarks/claim_model.py: host generations and instance rows as
ClaimQueries keeps them, a claimed host locked until its scheduler commits.

Time is simulated. A scheduler takes up to ``batch_size`` waiting requests; reads their
rows (one round trip); decides each, spending the CPU time the decision really took
(``thread_time``; or ``decision_ms``); claims (one round trip per claim_hosts, and one per
read when it learns after a conflict; HostClaims' back-off sleeps are simulated too); and
commits (one round trip), its builds reaching their agents ``build_delay`` later. An agent
reports every ``report_interval`` and, as its report_on_change does, ``report_min_interval``
after a build at the soonest; every report reaches every scheduler at once. So a scheduler
sees its own placements at once, and the others' through its conflicts and their hosts'
reports. Requests arrive at ``rate`` per second, or (0) are all waiting at time 0: the
figure is then what the N schedulers sustain.

Figures per run: placements per simulated second, claim conflicts per placement (the
berth_scheduler_claim_conflicts counter's increase), hosts found held by another
scheduler's transaction, decisions per placement (1.0: no request decided twice), and
the hosts' RAM at the end (the spread of free RAM across hosts, which RAMWeigher evens
out), against one scheduler's in the same run.

Run alone: ``python -m benchmarks.scale_out [--hosts 1000,10000] [--schedulers 1,2,4,8,16]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import greenlet
import numpy as np
import prometheus_client

from benchmarks import command_line
from benchmarks.claim_model import ClaimModel, Deadlock, Session
from benchmarks.decisions import policy_conf
from benchmarks.sim_clock import SimClock
from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.cmd.arguments import positive
from scheduler.exception import NoValidHost
from scheduler.fleet.host_manager import HostManager
from scheduler.fleet.report_owner import ReportOwners
from scheduler.planning.claims import HostClaims
from scheduler.planning.plan import Placement
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector
from scheduler.simulation.host_tables import random_report, random_spec

CONFLICTS = "berth_scheduler_claim_conflicts_total"


@dataclasses.dataclass
class Settings:
    hosts: int
    schedulers: int
    requests: int = 5000
    rate: float = 0.0  # requests per simulated second; 0: all waiting at time 0
    batch_size: int = 32  # [scheduler] batch_size
    round_trip: float = 0.001  # seconds of one database call
    build_delay: float = 0.005  # seconds from a commit to its builds on their agents
    report_interval: float = 10.0  # [compute_agent] report_interval
    report_min_interval: float | None = 0.2  # [compute_agent] report_min_interval; None: no report_on_change
    decision_ms: float | None = None  # None: each decision's real CPU time
    host_subset_size: int | None = None  # None: [filter_scheduler] host_subset_size's default
    #: Each scheduler prefers the hosts it owns among the live ones (Selector.owners), as the
    #: service tells it; False: every scheduler picks among the same heaviest hosts.
    owners: bool = True
    seed: int = 0


def fleet_reports(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Reports of ``n`` hosts of scheduler.simulation.host_tables' sizes, each under half used: room for
    the requests of a run."""
    rng = np.random.default_rng(seed)
    reports = []
    for i in range(n):
        report = random_report(rng, f"host-{i:06d}", load=float(rng.uniform(0.0, 0.5)))
        report["free_disk_gb"] = float(report["local_gb"] * rng.uniform(0.5, 1.0))
        report["vcpus_used"] = float(rng.integers(0, report["vcpus"] * 2))
        reports.append(report)
    return reports


def requests(count: int, seed: int = 0) -> list[RequestSpec]:
    """``count`` one-instance requests of scheduler.simulation.host_tables' flavors."""
    return [random_spec(seed * 1_000_003 + i) for i in range(count)]


class _Agents:
    """The compute agents: what each host holds, and the reports it sends every scheduler."""

    def __init__(self, sim: Simulation, reports: Sequence[dict[str, Any]]) -> None:
        self.sim = sim
        self.base = {report["host"]: report for report in reports}
        self.held: dict[str, dict[str, Flavor]] = {host: {} for host in self.base}
        self.last: dict[str, float] = {}
        self.due: set[str] = set()

    def start(self, rng: random.Random) -> None:
        interval = self.sim.settings.report_interval
        for host in self.base:
            self.sim.clock.at(rng.uniform(0.0, interval), functools.partial(self._periodic, host))

    def _periodic(self, host: str) -> None:
        self.report(host)
        self.sim.clock.at(self.sim.clock.now + self.sim.settings.report_interval,
                          functools.partial(self._periodic, host))

    def build(self, host: str, instance_uuid: str, flavor: Flavor) -> None:
        self.held[host][instance_uuid] = flavor
        least = self.sim.settings.report_min_interval
        if least is not None and host not in self.due:
            self.due.add(host)
            soonest = self.last.get(host, -least) + least
            self.sim.clock.at(soonest, functools.partial(self._changed, host))

    def _changed(self, host: str) -> None:
        self.due.discard(host)
        self.report(host)

    def wire(self, host: str) -> dict[str, Any]:
        base, held = self.base[host], self.held[host].values()
        return dict(base,
                    free_ram_mb=base["free_ram_mb"] - sum(f.memory_mb for f in held),
                    free_disk_gb=base["free_disk_gb"] - sum(f.root_gb + f.ephemeral_gb for f in held),
                    vcpus_used=base["vcpus_used"] + sum(f.vcpus for f in held),
                    running_vms=base["running_vms"] + len(held),
                    instance_uuids=sorted(self.held[host]))

    def report(self, host: str) -> None:
        report = HostReport.from_wire(self.wire(host), host)
        now = self.sim.clock.now
        for scheduler in self.sim.schedulers:
            scheduler.hosts.update_from_report(report, now=now)
        self.last[host] = now


class _Scheduler:
    """One scheduler process: its host table, its selector, its claims on its own connection."""

    def __init__(self, sim: Simulation, index: int, conf: Any, reports: Sequence[HostReport]) -> None:
        self.sim = sim
        settings = sim.settings
        self.hosts = HostManager(conf)
        self.hosts.table.clock = lambda: sim.clock.now
        for report in reports:
            self.hosts.update_from_report(report, now=0.0)
        group = conf.filter_scheduler
        self.selector = Selector(
            filters.enabled_filters(conf), weighers.enabled_weighers(conf), group.host_subset_size,
            random.Random(settings.seed * 7919 + index),
            shuffle_best_same_weighed_hosts=group.shuffle_best_same_weighed_hosts)
        if settings.owners:
            self.selector.owners = ReportOwners(f"scheduler-{index}")
            self.selector.owners.set_live(f"scheduler-{i}" for i in range(settings.schedulers))
        self.session: Session = sim.model.session(settings.round_trip)
        self.claims = HostClaims(self.session, self.hosts, conf.scheduler.service_down_time,
                                 sleep=sim.clock.wait, rng=random.Random(settings.seed * 104_729 + index))
        self.decision_cpu: list[float] = []
        self.selected: list[tuple[str, str]] = []  # (host, uuid) consumed in the batch under way

    def select(self, spec: RequestSpec) -> list[Placement]:
        """As Planner.select: chosen and consumed in this scheduler's table; its time owed."""
        start = time.thread_time()
        try:
            chosen = self.selector.select(self.hosts.table, spec)
        finally:
            spent = time.thread_time() - start
            self.decision_cpu.append(spent)
            decision_ms = self.sim.settings.decision_ms
            self.session.owed += spent if decision_ms is None else decision_ms / 1e3
        self.selected.extend((h.host, u) for h, u in zip(chosen, spec.instance_uuids, strict=True))
        return [Placement(u, h.host, h.nodename, dict(h.limits))
                for h, u in zip(chosen, spec.instance_uuids, strict=True)]

    def _roll_back(self, batch: list[RequestSpec]) -> None:
        """The batch's transaction failed: what it consumed is given back (the undo log), its
        requests wait again (redelivered)."""
        self.session.rollback()
        for host, instance_uuid in self.selected:
            self.hosts.release(host, instance_uuid)
        self.sim.waiting[:0] = batch
        self.sim.deadlocks += 1

    def run(self) -> None:
        sim, clock = self.sim, self.sim.clock
        self.claims.learn()  # as a scheduler starting: every host's generation and placements
        while True:
            batch = sim.take(sim.settings.batch_size)
            if not batch:
                sim.idle.append(greenlet.getcurrent())
                clock.park()
                continue
            self.session.read()  # the batch's instance rows
            self.selected = []
            try:
                outcomes = self.claims.place(batch, self.select)
            except Deadlock:
                self._roll_back(batch)
                continue
            rows = []
            for spec, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, NoValidHost):
                    sim.refused += 1
                    continue
                for placement in outcome:
                    rows.append({"uuid": placement.instance_uuid, "host": placement.host,
                                 "memory_mb": spec.flavor.memory_mb, "root_gb": spec.flavor.root_gb,
                                 "ephemeral_gb": spec.flavor.ephemeral_gb, "vcpus": spec.flavor.vcpus,
                                 "flavor": spec.flavor})
            self.session.commit(rows)
            for row in rows:
                clock.at(clock.now + sim.settings.build_delay,
                         functools.partial(sim.agents.build, row["host"], row["uuid"], row["flavor"]))
            sim.placed += len(rows)
            sim.placements.extend((row["uuid"], row["host"]) for row in rows)
            sim.last_commit = clock.now


class _Unclaimed(logging.Handler):
    """Counts HostClaims' 'placing them without a claim' warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "without a claim" in record.getMessage()


class Simulation:
    def __init__(self, settings: Settings, reports: Sequence[dict[str, Any]] | None = None,
                 specs: Sequence[RequestSpec] | None = None) -> None:
        self.settings = settings
        self.clock = SimClock()
        self.model = ClaimModel(self.clock)
        reports = fleet_reports(settings.hosts, settings.seed) if reports is None else reports
        self.specs = list(requests(settings.requests, settings.seed) if specs is None else specs)
        conf = policy_conf({} if settings.host_subset_size is None
                           else {"host_subset_size": settings.host_subset_size})
        checked = [HostReport.from_wire(report, report["host"]) for report in reports]
        self.schedulers = [_Scheduler(self, i, conf, checked) for i in range(settings.schedulers)]
        self.agents = _Agents(self, reports)
        self.waiting: list[RequestSpec] = []
        self.idle: list[Any] = []
        self.placed = self.refused = self.deadlocks = 0
        self.placements: list[tuple[str, str]] = []  # (instance uuid, host), in commit order
        self.last_commit = 0.0

    def take(self, count: int) -> list[RequestSpec]:
        batch, self.waiting = self.waiting[:count], self.waiting[count:]
        return batch

    def _arrive(self, spec: RequestSpec) -> None:
        self.waiting.append(spec)
        if self.idle:
            self.clock.wake(self.idle.pop(0))

    def run(self) -> dict[str, Any]:
        """Play the run to its last request's outcome; its figures."""
        settings = self.settings
        if settings.rate:
            for i, spec in enumerate(self.specs):
                self.clock.at(i / settings.rate, functools.partial(self._arrive, spec))
        else:
            self.waiting = list(self.specs)
        self.agents.start(random.Random(settings.seed))
        for scheduler in self.schedulers:
            self.clock.spawn(scheduler.run)
        unclaimed = _Unclaimed()
        claims_log = logging.getLogger("scheduler.planning.claims")
        claims_log.addHandler(unclaimed)
        conflicts_before = prometheus_client.REGISTRY.get_sample_value(CONFLICTS) or 0.0
        cpu = time.process_time()
        try:
            self.clock.run(lambda: self.placed + self.refused >= len(self.specs))
        finally:
            claims_log.removeHandler(unclaimed)
        conflicts = (prometheus_client.REGISTRY.get_sample_value(CONFLICTS) or 0.0) - conflicts_before
        decisions = [d for s in self.schedulers for d in s.decision_cpu]
        placed = max(self.placed, 1)
        free_ram = np.array([self.agents.wire(host)["free_ram_mb"] for host in self.agents.base])
        return {
            "bench": "scale-out",
            "n_hosts": settings.hosts,
            "schedulers": settings.schedulers,
            "policy": f"default, {settings.schedulers} scheduler{'s' if settings.schedulers > 1 else ''}"
                      + ("" if settings.owners or settings.schedulers == 1 else ", no owners"),
            "requests": len(self.specs),
            "placed": self.placed,
            "refused": self.refused,
            "sim_seconds": self.last_commit,
            "placements_per_s": self.placed / self.last_commit if self.last_commit else 0.0,
            "conflicts": int(conflicts),
            "conflicts_per_placement": conflicts / placed,
            "decisions_per_placement": len(decisions) / placed,
            "unclaimed": unclaimed.count,
            "deadlocks": self.deadlocks,
            "held": self.model.held,
            "decision_ms_median": statistics.median(decisions) * 1e3 if decisions else 0.0,
            "median_ms": statistics.median(decisions) * 1e3 if decisions else 0.0,  # of a decision
            "p99_ms": None,
            "free_ram_std_gb": float(np.std(free_ram)) / 1024,
            "overfilled_hosts": sum(self._over(host) for host in self.agents.base),
            "cpu_s": time.process_time() - cpu,
        }

    def _over(self, host: str) -> bool:
        """Whether the host's agent holds more than the default filters allow."""
        wire = self.agents.wire(host)
        return (wire["free_ram_mb"] < 0 or wire["free_disk_gb"] < 0
                or wire["vcpus_used"] > 4.0 * wire["vcpus"])


def run(settings: Settings, reports: Sequence[dict[str, Any]] | None = None,
        specs: Sequence[RequestSpec] | None = None) -> dict[str, Any]:
    return Simulation(settings, reports, specs).run()


def rows(hosts: Sequence[int], schedulers: Sequence[int], **settings: Any) -> Iterator[dict[str, Any]]:
    """A row per fleet size and scheduler count; ``vs_one`` compares the hosts' free RAM spread
    with one scheduler's on the same fleet and requests (the first count, when it is 1)."""
    for n_hosts in hosts:
        one = None
        for count in schedulers:
            row = run(Settings(n_hosts, count, **settings))
            if count == 1:
                one = row
            row["free_ram_std_vs_one"] = (row["free_ram_std_gb"] / one["free_ram_std_gb"]
                                          if one and one["free_ram_std_gb"] else None)
            yield row


def describe(row: dict[str, Any]) -> str:
    """The row's figures as the table prints them."""
    vs_one = row.get("free_ram_std_vs_one")
    return (f"{row['placements_per_s']:,.0f} placements/s simulated; "
            f"conflicts {row['conflicts_per_placement']:.2%} per placement, "
            f"{row['decisions_per_placement']:.3f} decisions per placement; "
            f"free RAM std {row['free_ram_std_gb']:.1f} GB"
            + (f" ({vs_one:.3f} x one scheduler's)" if vs_one is not None else "")
            + f"; {row['refused']} refused, {row['unclaimed']} placed unclaimed, "
            f"{row['overfilled_hosts']} hosts overfilled, {row['deadlocks']} deadlocks")


_counts = command_line.counts("counts")


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The options of this benchmark (``prefix``ed in ``python -m benchmarks``)."""
    parser.add_argument(f"--{prefix}hosts", type=_counts, default=[1000, 10_000],
                        help="fleet sizes (default 1000,10000)")
    parser.add_argument(f"--{prefix}schedulers", type=_counts, default=[1, 2, 4, 8, 16],
                        help="scheduler counts (default 1,2,4,8,16); with 1 first, the others' hosts "
                        "are compared with its")
    parser.add_argument(f"--{prefix}requests", type=positive, default=5000,
                        help="one-instance requests per run (default 5000)")
    parser.add_argument(f"--{prefix}rate", type=float, default=0.0,
                        help="requests per simulated second (default 0: all waiting at the start)")
    parser.add_argument(f"--{prefix}batch-size", type=positive, default=32,
                        help="[scheduler] batch_size (default 32)")
    parser.add_argument(f"--{prefix}round-trip-ms", type=float, default=1.0,
                        help="simulated milliseconds of one database call (default 1)")
    parser.add_argument(f"--{prefix}decision-ms", type=float, default=None,
                        help="simulated milliseconds of one decision (default: its real CPU time)")
    parser.add_argument(f"--{prefix}report-interval", type=float, default=10.0,
                        help="seconds between an agent's periodic reports (default 10)")
    parser.add_argument(f"--{prefix}no-owners", action="store_true",
                        help="schedulers do not prefer the hosts they own: each picks among the same "
                        "heaviest hosts, as before they did")
    parser.add_argument(f"--{prefix}host-subset-size", type=positive, default=None,
                        help="[filter_scheduler] host_subset_size (default: its default)")


def selected(args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """rows()'s arguments from the parsed options."""
    value = lambda name: getattr(args, (prefix + name).replace("-", "_"))  # noqa: E731
    return {"hosts": value("hosts"), "schedulers": value("schedulers"), "requests": value("requests"),
            "rate": value("rate"), "batch_size": value("batch-size"),
            "round_trip": value("round-trip-ms") / 1e3, "decision_ms": value("decision-ms"),
            "report_interval": value("report-interval"), "host_subset_size": value("host-subset-size"),
            "owners": not value("no-owners")}


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.scale_out", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    command_line.print_rows(rows(**selected(args)), args.json,
                            lambda row: f"{row['n_hosts']:>7,} hosts, {row['schedulers']:>2} schedulers: "
                            f"{describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
