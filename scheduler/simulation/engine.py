"""One policy over one workload: the daemon's own HostTable, filters, weighers and Selector
on a simulated clock, with agents that report their hosts every ``report_interval``
(allocation, and the load they measure: the busy share of their instances' vCPUs, an idle
instance counting 5%, plus load the scheduler cannot see).

Maintenance drains disable a host and move its instances off it as a move is placed
(scheduler.moves.planner): the instance's own request and size, its host left out, the
same selection as a build; both hosts hold it until its migration ends,
``migration_time_per_gb`` seconds per GiB of its RAM later.

Pure: no I/O, no wall clock in the figures; the same inputs and seed give the same result.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
import uuid as uuidlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from berth_contract.request_spec import RequestSpec
from scheduler import states
from scheduler.exception import NoValidHost
from scheduler.moves.rebalance import NoPlan, PlannedMove, RebalancePlan, Resident, Snapshot, figures
from scheduler.policy import filters, weighers
from scheduler.policy.aggregates import Aggregate
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from scheduler.scaling.behavior import history_horizon_s
from scheduler.scaling.settled import sample_milli
from scheduler.scaling.spec import CPU, Recommendation, ScaleEvent, SettledMembers
from scheduler.scaling.sync_plan import History, SyncPlan, plan_settings, plan_sync
from scheduler.simulation.inputs import Arrival, Drain, SimGroup, SimHost
from scheduler.simulation.rebalance import RebalanceResult, RebalanceSpec

IDLE_LOAD = 0.05  # of each vCPU of an idle instance
NO_HOST = "no host"  # a refusal no filter made: no host at all (every one disabled, say)
MIGRATION_TIME_PER_GB = 8.0  # seconds a GiB of an instance's RAM takes to move: ~1 Gbit/s


@dataclasses.dataclass
class Result:
    """What a policy made of the workload; the series are sampled at each round of reports."""

    policy: str
    placed: int = 0
    refused: dict[str, int] = dataclasses.field(default_factory=dict)  # filter responsible -> instances
    skew_mean: float = float("nan")  # busiest host's utilisation over the fleet's, over the reports
    skew_max: float = float("nan")
    stranded: float = 0.0  # mean share of the free RAM on hosts that cannot take the smallest instance
    hosts_used: int = 0  # most hosts holding an instance at once
    peak_ram: float = 0.0  # highest share of the fleet's RAM allocated
    peak_vcpus: float = 0.0  # highest share of its vCPUs
    seconds: float = 0.0  # wall time of the run (not a figure of the policy)
    times: list[float] = dataclasses.field(default_factory=list)
    skews: list[float] = dataclasses.field(default_factory=list)
    refusals: list[int] = dataclasses.field(default_factory=list)  # refused so far, at each report
    loads: list[Any] = dataclasses.field(default_factory=list)  # per report: each host's real load / vCPUs
    host_names: list[str] = dataclasses.field(default_factory=list)  # the hosts, in the order of loads' rows
    final_ram_use: list[float] = dataclasses.field(default_factory=list)  # per host, at the end
    peak_host_ram: float = 0.0  # highest share of one host's RAM held at any time
    groups: list[GroupResult] = dataclasses.field(default_factory=list)
    drains: list[DrainResult] = dataclasses.field(default_factory=list)
    rebalance: RebalanceResult | None = None

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())

    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "placed": self.placed,
            "refused": self.refused_total,
            "refused_by": dict(sorted(self.refused.items(), key=lambda kv: (-kv[1], kv[0]))),
            "skew_mean": _round(self.skew_mean),
            "skew_max": _round(self.skew_max),
            "stranded_ram": _round(self.stranded),
            "hosts_used": self.hosts_used,
            "peak_ram": _round(self.peak_ram),
            "peak_vcpus": _round(self.peak_vcpus),
            "peak_host_ram": _round(self.peak_host_ram),
            "scaling_groups": [group.summary() for group in self.groups],
            "drains": [drain.summary() for drain in self.drains],
            **({"rebalance": self.rebalance.summary()} if self.rebalance is not None else {}),
        }


def _round(value: float) -> float | None:
    return None if value != value else round(value, 4)


class _Agent:
    """A simulated compute agent: the instances on its host, and what it reports."""

    def __init__(self, host: SimHost) -> None:
        self.host = host
        self.instances: dict[str, Arrival] = {}
        self.memory_mb = self.vcpus = self.disk_gb = 0
        self.real = host.hidden_cores
        self.peak_ram = 0.0  # highest share of its RAM held

    def add(self, uuid: str, arrival: Arrival) -> None:
        self.instances[uuid] = arrival
        self._count(arrival, 1)
        self.peak_ram = max(self.peak_ram, self.memory_mb / self.host.memory_mb)

    def remove(self, uuid: str) -> None:
        self._count(self.instances.pop(uuid), -1)

    def set_busy(self, uuid: str, busy: float) -> None:
        """A scaling group member's share of busy vCPUs changed (its group's load moved)."""
        arrival = self.instances[uuid]
        self._count(arrival, -1)
        self.instances[uuid] = dataclasses.replace(arrival, busy=busy)
        self._count(self.instances[uuid], 1)

    def _count(self, arrival: Arrival, sign: int) -> None:
        self.memory_mb += sign * arrival.memory_mb
        self.vcpus += sign * arrival.vcpus
        self.disk_gb += sign * arrival.disk_gb
        self.real += sign * arrival.vcpus * max(arrival.busy, IDLE_LOAD)

    def report(self, now: float) -> dict[str, Any]:
        host = self.host
        in_use = sum(a.memory_mb * (0.5 + 0.5 * a.busy) for a in self.instances.values())
        return {
            "host": host.name,
            "memory_mb": host.memory_mb,
            "free_ram_mb": host.memory_mb - self.memory_mb,
            "local_gb": host.disk_gb,
            "free_disk_gb": host.disk_gb - self.disk_gb,
            "vcpus": host.vcpus,
            "vcpus_used": self.vcpus,
            "running_vms": len(self.instances),
            "instance_uuids": sorted(self.instances),
            "cpu_utilization": min(1.0, self.real / host.vcpus),
            "memory_mb_in_use": min(float(host.memory_mb), in_use),
            "utilization_sampled_at": now,
        }


def _aggregates(hosts: Sequence[SimHost]) -> list[Aggregate]:
    members: dict[tuple[str, str | None], set[str]] = {}
    for host in hosts:
        if host.zone:
            members.setdefault((f"zone-{host.zone}", host.zone), set()).add(host.name)
        for name in host.aggregates:
            members.setdefault((name, None), set()).add(host.name)
    return [
        Aggregate.from_dict({"name": name, "hosts": sorted(names), "availability_zone": zone})
        for (name, zone), names in members.items()
    ]


def _responsible(exc: NoValidHost) -> str:
    """The filter that removed the last hosts a refused request had left."""
    removing = [name for name, count in exc.removed if count]
    return removing[-1] if removing else NO_HOST


@dataclasses.dataclass
class GroupResult:
    """A scaling group under one policy: its members, desired count and load at each sync."""

    name: str
    times: list[float] = dataclasses.field(default_factory=list)
    members: list[int] = dataclasses.field(default_factory=list)
    desired: list[int] = dataclasses.field(default_factory=list)
    load: list[float] = dataclasses.field(default_factory=list)
    scale_ups: int = 0
    scale_downs: int = 0
    unplaced: int = 0  # members the policy found no host for

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "members_peak": max(self.members, default=0),
            "members_mean": _round(float(np.mean(self.members))) if self.members else None,
            "scale_ups": self.scale_ups,
            "scale_downs": self.scale_downs,
            "unplaced": self.unplaced,
        }


@dataclasses.dataclass
class DrainResult:
    """A drain under one policy: what was on the host, what moved, what could not and why."""

    host: str
    at: float
    max_parallel: int
    instances: int = 0  # on the host when the drain began, or landing on it later
    moved: int = 0
    not_moved: dict[str, int] = dataclasses.field(default_factory=dict)  # filter responsible -> instances
    left: int = 0  # instances deleted (lifetime over, scaled down) before their move ended
    migrations: int = 0  # started
    peak_in_flight: int = 0
    last_end: float | None = None  # when the last migration ended

    @property
    def not_moved_total(self) -> int:
        return sum(self.not_moved.values())

    @property
    def took(self) -> float:
        """From the drain's start to its last migration's end (0: nothing migrated)."""
        return 0.0 if self.last_end is None else self.last_end - self.at

    def summary(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "at": self.at,
            "max_parallel": self.max_parallel,
            "instances": self.instances,
            "moved": self.moved,
            "not_moved": self.not_moved_total,
            "not_moved_by": dict(sorted(self.not_moved.items(), key=lambda kv: (-kv[1], kv[0]))),
            "left": self.left,
            "migrations": self.migrations,
            "took_s": round(self.took, 3),
            "peak_in_flight": self.peak_in_flight,
        }


class _Draining:
    """A drain under way: the instances still to move, in the order they came to the host."""

    def __init__(self, drain: Drain, row: int, queue: Sequence[str]) -> None:
        self.row = row
        self.max_parallel = drain.max_parallel
        self.queue = deque(queue)
        self.in_flight = 0
        self.result = DrainResult(drain.host, drain.at, drain.max_parallel, len(queue))


class _Group:
    """A scaling group as the controller keeps it: members, desired count, history."""

    def __init__(self, group: SimGroup) -> None:
        self.group = group
        #: Member rows as the controller reads them (uuid, state, host) and the agent's row,
        #: oldest first.
        self.members: list[dict[str, Any]] = []
        self.desired = group.initial
        self.recommendations: list[tuple[float, int]] | None = None  # (time, count); None: never synced
        self.events: list[tuple[float, int]] = []  # (time, change)
        self.horizon_s = history_horizon_s(group.spec)
        self.result = GroupResult(group.name)

    def history(self, now: float) -> History:
        """The history within the group's horizon, as the controller reads it (older records
        are dropped, as the controller prunes them)."""
        kept = now - self.horizon_s
        self.events = [e for e in self.events if e[0] >= kept]
        recommendations = None
        if self.recommendations is not None:
            self.recommendations = [r for r in self.recommendations if r[0] >= kept]
            recommendations = [Recommendation(now - at, count) for at, count in self.recommendations]
        return History(recommendations, [ScaleEvent(now - at, change) for at, change in self.events])

    def record(self, now: float, plan: SyncPlan) -> None:
        """What the controller writes with the sync: its recommendations, its scale event, the count."""
        self.recommendations = (self.recommendations or []) + [(now, count) for count in plan.recorded]
        change = plan.decision.scale_event
        if change:
            self.events.append((now, change))
            if change > 0:
                self.result.scale_ups += 1
            else:
                self.result.scale_downs += 1
        self.desired = plan.decision.desired


def run(
    policy: str,
    conf: Any,
    hosts: Sequence[SimHost],
    arrivals: Sequence[Arrival],
    report_interval: float = 60.0,
    seed: int = 0,
    groups: Sequence[SimGroup] = (),
    sync_period: float = 15.0,
    concurrent: bool = False,
    drains: Sequence[Drain] = (),
    migration_time_per_gb: float = MIGRATION_TIME_PER_GB,
    rebalance: RebalanceSpec | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> Result:
    """Replay ``arrivals`` (by time) on ``hosts`` with the filters, weighers and options of
    ``conf`` (a Berth configuration); one round of reports every ``report_interval`` seconds;
    ``groups`` synced every ``sync_period`` seconds by the scaling controller's policy.

    ``concurrent``: the placements made at one time are decided at once, each reading the
    figures from before any of them (as separate schedulers, or requests in flight, would),
    and charged to their hosts once that time is over.

    ``drains``: at its time, each disables its host and moves the instances off it,
    ``max_parallel`` at a time, each taking ``migration_time_per_gb`` seconds per GiB of its
    RAM; the run goes on until every migration has ended.

    ``rebalance``: every ``rebalance.every`` seconds its goal plans on a snapshot of the fleet (the
    table as the scheduler holds it, each instance's measured load, each host's, hidden load
    included) and its migrations are made at once: the simulation does not hold an instance on
    both hosts while it moves, as it does for drains.

    ``progress(now, end)``: called at each round of reports with the simulated time reached and
    the time the run ends at (at least), for the caller to tell how far it is."""
    return _Run(
        policy,
        conf,
        hosts,
        arrivals,
        report_interval,
        seed,
        groups,
        sync_period,
        concurrent,
        drains,
        migration_time_per_gb,
        rebalance,
        progress,
    ).run()


class _Run:
    def __init__(
        self,
        policy: str,
        conf: Any,
        hosts: Sequence[SimHost],
        arrivals: Sequence[Arrival],
        report_interval: float,
        seed: int,
        groups: Sequence[SimGroup],
        sync_period: float,
        concurrent: bool,
        drains: Sequence[Drain],
        migration_time_per_gb: float,
        rebalance: RebalanceSpec | None = None,
        progress: Callable[[float, float], None] | None = None,
    ) -> None:
        settings = conf.filter_scheduler
        self.progress = progress
        self.conf = conf
        self.filters = filters.enabled_filters(conf)
        self.selector = Selector(
            self.filters,
            weighers.enabled_weighers(conf),
            settings.host_subset_size,
            random.Random(seed),
            shuffle_best_same_weighed_hosts=settings.shuffle_best_same_weighed_hosts,
        )
        self.table = HostTable(capacity=max(1, len(hosts)))
        self.clock = 0.0
        self.table.clock = lambda: self.clock
        for host in hosts:
            self.table.add(host.name)
        self.table.set_aggregates(_aggregates(hosts))
        self.agents = [_Agent(host) for host in hosts]
        self.rng = random.Random(seed)
        self.result = Result(policy)
        self.arrivals = arrivals
        self.groups = [_Group(group) for group in groups]
        self.plan_settings = plan_settings(conf)
        self.report_interval = report_interval
        self.sync_period = sync_period
        self.departures: list[tuple[float, int, str]] = []  # (time, sequence, uuid)
        self.located: dict[str, int] = {}  # uuid -> the row holding it (the source while it moves)
        self.drains = sorted(drains, key=lambda d: d.at)
        self.next_drain = 0
        self.migration_time_per_gb = migration_time_per_gb
        self.migrations: list[tuple[float, int, str]] = []  # (end, sequence, uuid)
        self.moving: dict[str, tuple[_Draining, int, int]] = {}  # uuid -> (drain, destination, sequence)
        self.draining: dict[int, _Draining] = {}  # row -> its drain
        sizes = [(a.memory_mb, a.vcpus, a.disk_gb) for a in arrivals] + [
            (g.memory_mb, g.vcpus, g.disk_gb) for g in groups
        ]
        self.smallest = tuple(min(size[k] for size in sizes) for k in range(3)) if sizes else (0, 0, 0)
        self.limits: list[dict[str, float]] | None = None
        self.capacity = (
            np.array([[h.memory_mb, h.vcpus] for h in hosts], dtype=float).sum(axis=0) if hosts else None
        )
        self.sequence = 0
        self.concurrent = concurrent
        self.uncharged: list[tuple[int, str, Any, float]] = []  # (row, uuid, flavor, time)
        last = max(
            [arrivals[-1].at if arrivals else 0.0]
            + [g.load[-1][0] for g in groups]
            + [d.at for d in self.drains]
        )
        self.end = last + report_interval
        self.rebalance = rebalance
        self.next_rebalance = rebalance.every if rebalance is not None else float("inf")
        if rebalance is not None:
            self.result.rebalance = RebalanceResult(rebalance)

    def run(self) -> Result:
        started = time.perf_counter()
        next_report, next_sync = 0.0, 0.0 if self.groups else float("inf")
        for arrival in [*self.arrivals, None]:
            until = self.end if arrival is None else arrival.at
            # What happens first: departures, migrations ending, drains, reports, syncs, in time
            # order; after the last arrival, until the end and every migration has ended.
            while True:
                leaving = self.departures[0][0] if self.departures else float("inf")
                landing = self.migrations[0][0] if self.migrations else float("inf")
                draining = self._next_drain_at()
                rebalancing = self.next_rebalance if self.next_rebalance <= self.end else float("inf")
                upcoming = min(leaving, landing, draining, next_report, next_sync, rebalancing)
                past = upcoming > until and (arrival is not None or not self.moving)
                if upcoming == float("inf") or past:
                    break
                self._charge()
                if leaving == upcoming:
                    _, _, uuid = heapq.heappop(self.departures)
                    self.clock = upcoming
                    self._gone(uuid)
                elif landing == upcoming:
                    _, sequence, uuid = heapq.heappop(self.migrations)
                    self.clock = upcoming
                    self._land(uuid, sequence)
                elif draining == upcoming:
                    self.clock = upcoming
                    self._drain(self.drains[self.next_drain])
                    self.next_drain += 1
                elif rebalancing == upcoming:
                    self.clock = upcoming
                    self._rebalance()
                    self.next_rebalance += self.rebalance.every  # type: ignore[union-attr]
                elif next_report == upcoming:
                    self._report_round(next_report)
                    if self.progress is not None:
                        self.progress(next_report, self.end)
                    next_report += self.report_interval
                else:
                    self._sync(next_sync)
                    next_sync += self.sync_period
            if arrival is None:
                break
            if arrival.at != self.clock:
                self._charge()
            self.clock = arrival.at
            row = self._place(arrival)
            if row is None:
                continue
            if arrival.lifetime is not None:
                self.sequence += 1
                heapq.heappush(self.departures, (arrival.at + arrival.lifetime, self.sequence, self.uuid))
        _finish(self.result, self.agents)
        self.result.groups = [group.result for group in self.groups]
        self.result.seconds = time.perf_counter() - started
        return self.result

    def _next_drain_at(self) -> float:
        return self.drains[self.next_drain].at if self.next_drain < len(self.drains) else float("inf")

    def _remove(self, row: int, uuid: str) -> None:
        self.agents[row].remove(uuid)
        self.table.release(row, uuid)

    def _gone(self, uuid: str) -> None:
        """Instance ``uuid`` deleted: from its host, and from its destination if it was moving."""
        self._remove(self.located.pop(uuid), uuid)
        move = self.moving.pop(uuid, None)
        if move is not None:
            draining, destination, _ = move
            self._remove(destination, uuid)
            draining.result.left += 1
            self._ended(draining)

    def _drain(self, drain: Drain) -> None:
        """``drain`` begins: its host takes nothing new, and its instances start moving off."""
        row = self.table.index[drain.host]
        self.table.view(row).disabled = True
        # Instances on their way in are moved on once they land (_land).
        held = [uuid for uuid in self.agents[row].instances if self.located[uuid] == row]
        draining = self.draining[row] = _Draining(drain, row, held)
        self.result.drains.append(draining.result)
        self._move_next(draining)

    def _move_next(self, draining: _Draining) -> None:
        """Start migrations off the drained host while it has fewer than max_parallel; an
        instance that finds no host stays, counted with the filter that refused it."""
        result = draining.result
        while draining.in_flight < draining.max_parallel and draining.queue:
            uuid = draining.queue.popleft()
            if self.located.get(uuid) != draining.row:
                result.left += 1
                continue
            arrival = self.agents[draining.row].instances[uuid]
            spec = self._spec(uuid, arrival, ignore_hosts=[result.host])
            try:
                destination = int(self.selector.select(self.table, spec)[0].row)
            except NoValidHost as exc:
                reason = _responsible(exc)
                result.not_moved[reason] = result.not_moved.get(reason, 0) + 1
                continue
            self.agents[destination].add(uuid, arrival)
            self.sequence += 1
            self.moving[uuid] = (draining, destination, self.sequence)
            ends = self.clock + self.migration_time_per_gb * arrival.memory_mb / 1024
            heapq.heappush(self.migrations, (ends, self.sequence, uuid))
            draining.in_flight += 1
            result.migrations += 1
            result.peak_in_flight = max(result.peak_in_flight, draining.in_flight)

    def _land(self, uuid: str, sequence: int) -> None:
        """A migration ends: the source lets the instance go, the destination keeps it."""
        move = self.moving.get(uuid)
        if move is None or move[2] != sequence:  # the instance was deleted while it moved
            return
        del self.moving[uuid]
        draining, destination, _ = move
        source = self.located[uuid]
        busy = self.agents[source].instances[uuid].busy  # a scaling group's load may have moved
        self._remove(source, uuid)
        self.agents[destination].set_busy(uuid, busy)
        self.located[uuid] = destination
        draining.result.moved += 1
        self._ended(draining)
        drained = self.draining.get(destination)
        if drained is not None:  # it landed on a host drained since it left: on it goes
            drained.queue.append(uuid)
            drained.result.instances += 1
            self._move_next(drained)

    def _ended(self, draining: _Draining) -> None:
        draining.in_flight -= 1
        draining.result.last_end = self.clock
        self._move_next(draining)

    def _spec(self, uuid: str, arrival: Arrival, ignore_hosts: Sequence[str] = ()) -> RequestSpec:
        """The request of one instance of ``arrival``'s size and hints, as a build sends it."""
        filter_properties: dict[str, Any] = {"scheduler_hints": dict(arrival.hints)} if arrival.hints else {}
        if ignore_hosts:
            filter_properties["ignore_hosts"] = list(ignore_hosts)
        return RequestSpec.from_wire(
            {
                "instance_uuids": [uuid],
                "num_instances": 1,
                "instance_type": {
                    "name": arrival.flavor or "sim",
                    "memory_mb": arrival.memory_mb,
                    "vcpus": arrival.vcpus,
                    "root_gb": arrival.disk_gb,
                },
            },
            filter_properties,
        )

    def _place(self, arrival: Arrival) -> int | None:
        """The row ``arrival`` was placed on (its uuid in self.uuid), None if refused (counted)."""
        self.uuid = str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))
        spec = self._spec(self.uuid, arrival)
        try:
            row = int(self.selector.select(self.table, spec)[0].row)
        except NoValidHost as exc:
            reason = _responsible(exc)
            self.result.refused[reason] = self.result.refused.get(reason, 0) + 1
            return None
        if self.concurrent:
            self.table.release(row, self.uuid)
            self.uncharged.append((row, self.uuid, spec.flavor, self.clock))
        self.agents[row].add(self.uuid, arrival)
        self.located[self.uuid] = row
        self.result.placed += 1
        return row

    def _charge(self) -> None:
        """Concurrent placements decided so far, charged to their hosts."""
        for row, uuid, flavor, at in self.uncharged:
            self.table.consume(row, uuid, flavor, at)
        self.uncharged.clear()

    def snapshot(self) -> Snapshot:
        """The fleet as a rebalance goal reads it: the table, every instance that is not moving
        (what it keeps busy), each host's real load."""
        residents = []
        for row, agent in enumerate(self.agents):
            for uuid, arrival in agent.instances.items():
                if self.located[uuid] == row:
                    residents.append(Resident(uuid, agent.host.name, self._spec(uuid, arrival),
                                              movable=uuid not in self.moving,
                                              load=arrival.vcpus * max(arrival.busy, IDLE_LOAD)))
        return Snapshot.from_conf(self.table, residents, self.conf,
                                  load=[agent.real for agent in self.agents])

    def _rebalance(self) -> None:
        """The goal's plan on the fleet as it is, its migrations made at once."""
        assert self.rebalance is not None and self.result.rebalance is not None
        self._charge()
        snapshot = self.snapshot()
        before = figures.skew(snapshot.load, snapshot.capacity())
        plan: RebalancePlan | NoPlan = self.rebalance.plan(snapshot, self.filters)
        if isinstance(plan, RebalancePlan):
            for migration in plan.moves:
                self._migrate(migration)
        agents = self.agents
        after = figures.skew([agent.real for agent in agents], [agent.host.vcpus for agent in agents])
        self.result.rebalance.record(self.clock, plan, before, after)

    def _migrate(self, migration: PlannedMove) -> None:
        uuid = migration.instance
        source, destination = self.located[uuid], self.table.index[migration.destination]
        arrival = self.agents[source].instances[uuid]
        flavor = self._spec(uuid, arrival).flavor
        self.agents[source].remove(uuid)
        if uuid in self.table.pending.get(source, {}):
            self.table.release(source, uuid)
        else:
            self.table.shift(source, flavor, -1)
        self.agents[destination].add(uuid, arrival)
        self.table.consume(destination, uuid, flavor, self.clock)
        self.located[uuid] = destination

    def _report_round(self, now: float) -> None:
        self.clock = now
        for row, agent in enumerate(self.agents):
            self.table.update_from_report(row, agent.report(now), now)
        if self.limits is None:
            self.limits = [self.selector.limits(self.table.view(row)) for row in range(len(self.agents))]
        _sample(self.result, self.agents, self.limits, self.smallest, self.capacity, now)

    def _sync(self, now: float) -> None:
        """Each group as the scaling controller syncs it: its members' cpu (the group's load
        shared), the controller's plan (scheduler.scaling.sync_plan), then the members it
        chose removed and the new ones placed."""
        self.clock = now
        for state in self.groups:
            for member in state.members:  # where the drains have moved them
                member["row"] = self.located[member["uuid"]]
                member["host"] = self.agents[member["row"]].host.name
            group = state.group
            load = group.load_at(now)
            count = len(state.members)
            each = min(float(group.vcpus), load / count) if count else 0.0
            for member in state.members:
                self.agents[member["row"]].set_busy(member["uuid"], each / group.vcpus)
            seen = SettledMembers(
                count,
                {CPU: count * sample_milli(each)},
                {CPU: count * group.vcpus * 1000, "memory": count * group.memory_mb * 1000},
            )
            plan = plan_sync(
                group.spec,
                state.desired,
                state.members,
                seen if count else [],
                {},
                state.history(now),
                self.plan_settings,
            )
            state.record(now, plan)
            gone = {member["uuid"] for member in plan.victims}
            for member in plan.victims:
                self._gone(member["uuid"])
            state.members = [member for member in state.members if member["uuid"] not in gone]
            share = min(1.0, load / max(1, state.desired) / group.vcpus)
            for _ in range(plan.create):
                row = self._place(
                    Arrival(now, group.memory_mb, group.vcpus, group.disk_gb, None, share, None)
                )
                if row is None:
                    state.result.unplaced += 1
                else:
                    host = self.agents[row].host.name
                    state.members.append(
                        {"uuid": self.uuid, "state": states.ACTIVE, "host": host, "row": row}
                    )
            result = state.result
            result.times.append(now)
            result.members.append(len(state.members))
            result.desired.append(state.desired)
            result.load.append(load)


def _sample(
    result: Result,
    agents: Sequence[_Agent],
    limits: Sequence[dict[str, float]],
    smallest: tuple[int, int, int],
    capacity: Any,
    now: float,
) -> None:
    real = np.array([agent.real for agent in agents])
    vcpus = np.array([agent.host.vcpus for agent in agents], dtype=float)
    memory = np.array([agent.memory_mb for agent in agents], dtype=float)
    used_vcpus = np.array([agent.vcpus for agent in agents], dtype=float)
    disk = np.array([agent.disk_gb for agent in agents], dtype=float)
    result.times.append(now)
    result.skews.append(figures.skew(real, vcpus))
    result.refusals.append(result.refused_total)
    result.loads.append((real / vcpus).astype(np.float32))
    if not result.host_names:
        result.host_names = [agent.host.name for agent in agents]
    free_ram = (
        np.array(
            [
                limit.get("memory_mb", agent.host.memory_mb)
                for limit, agent in zip(limits, agents, strict=True)
            ]
        )
        - memory
    )
    free_vcpus = np.array(
        [limit.get("vcpu", agent.host.vcpus) for limit, agent in zip(limits, agents, strict=True)]
    )
    free_vcpus = free_vcpus - used_vcpus
    free_disk = (
        np.array(
            [limit.get("disk_gb", agent.host.disk_gb) for limit, agent in zip(limits, agents, strict=True)]
        )
        - disk
    )
    share = figures.stranded(np.column_stack([free_vcpus, free_ram, free_disk]),
                             (smallest[1], smallest[0], smallest[2]))
    count = len(result.times)
    result.stranded += (share - result.stranded) / count
    result.hosts_used = max(result.hosts_used, int(sum(1 for agent in agents if agent.instances)))
    if capacity is not None:
        result.peak_ram = max(result.peak_ram, float(memory.sum() / capacity[0]))
        result.peak_vcpus = max(result.peak_vcpus, float(used_vcpus.sum() / capacity[1]))


def _finish(result: Result, agents: Sequence[_Agent]) -> None:
    skews = [s for s in result.skews if s == s]
    if skews:
        result.skew_mean, result.skew_max = float(np.mean(skews)), float(np.max(skews))
    result.final_ram_use = [agent.memory_mb / agent.host.memory_mb for agent in agents]
    result.peak_host_ram = max((agent.peak_ram for agent in agents), default=0.0)
