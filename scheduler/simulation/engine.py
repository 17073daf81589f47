"""One policy over one workload: the daemon's own HostTable, filters, weighers and Selector
on a simulated clock, with agents that report their hosts every ``report_interval``
(allocation, and the load they measure: the busy share of their instances' vCPUs, an idle
instance counting 5%, plus load the scheduler cannot see).

Pure: no I/O, no wall clock in the figures; the same inputs and seed give the same result.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler import filters, weighers
from scheduler.aggregates import Aggregate
from scheduler.exception import NoValidHost
from scheduler.host_state import HostTable
from scheduler.request_spec import RequestSpec
from scheduler.selection import Selector
from scheduler.simulation.inputs import Arrival, SimHost

IDLE_LOAD = 0.05  # of each vCPU of an idle instance
NO_HOST = "no host"  # a refusal no filter made: no host at all (every one disabled, say)


@dataclasses.dataclass
class Result:
    """What a policy made of the workload; the series are sampled at each round of reports."""

    policy: str
    placed: int = 0
    refused: dict[str, int] = dataclasses.field(default_factory=dict)  # filter responsible -> instances
    skew_mean: float = float("nan")  # real load, max / mean across hosts, over the reports
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
    final_ram_use: list[float] = dataclasses.field(default_factory=list)  # per host, at the end

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

    def add(self, uuid: str, arrival: Arrival) -> None:
        self.instances[uuid] = arrival
        self._count(arrival, 1)

    def remove(self, uuid: str) -> None:
        self._count(self.instances.pop(uuid), -1)

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


def run(
    policy: str,
    conf: Any,
    hosts: Sequence[SimHost],
    arrivals: Sequence[Arrival],
    report_interval: float = 60.0,
    seed: int = 0,
) -> Result:
    """Replay ``arrivals`` (by time) on ``hosts`` with the filters, weighers and options of
    ``conf`` (a Berth configuration); one round of reports every ``report_interval`` seconds."""
    started = time.perf_counter()
    settings = conf.filter_scheduler
    selector = Selector(
        filters.enabled_filters(conf),
        weighers.enabled_weighers(conf),
        settings.host_subset_size,
        random.Random(seed),
        shuffle_best_same_weighed_hosts=settings.shuffle_best_same_weighed_hosts,
    )
    table = HostTable(capacity=max(1, len(hosts)))
    clock = [0.0]
    table.clock = lambda: clock[0]
    for host in hosts:
        table.add(host.name)
    table.set_aggregates(_aggregates(hosts))
    agents = [_Agent(host) for host in hosts]
    rng = random.Random(seed)
    result = Result(policy)
    departures: list[tuple[float, int, int, str]] = []
    smallest = (
        (min(a.memory_mb for a in arrivals), min(a.vcpus for a in arrivals), min(a.disk_gb for a in arrivals))
        if arrivals
        else (0, 0, 0)
    )
    limits: list[dict[str, float]] | None = None
    capacity = np.array([[h.memory_mb, h.vcpus] for h in hosts], dtype=float).sum(axis=0) if hosts else None
    sequence = 0
    next_report = 0.0
    end = (arrivals[-1].at if arrivals else 0.0) + report_interval

    def report_round(now: float) -> None:
        nonlocal limits
        clock[0] = now
        for row, agent in enumerate(agents):
            table.update_from_report(row, agent.report(now), now)
        if limits is None:
            limits = [selector.limits(table.view(row)) for row in range(len(agents))]
        _sample(result, agents, limits, smallest, capacity, now)

    for arrival in arrivals:
        while True:  # what happens before this arrival: departures and reports, in time order
            leaving = departures[0][0] if departures else float("inf")
            if min(leaving, next_report) > arrival.at:
                break
            if leaving < next_report:
                _, _, row, uuid = heapq.heappop(departures)
                agents[row].remove(uuid)
                table.release(row, uuid)
            else:
                report_round(next_report)
                next_report += report_interval
        clock[0] = arrival.at
        uuid = str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
        spec = RequestSpec.from_wire(
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
            {"scheduler_hints": dict(arrival.hints)} if arrival.hints else {},
        )
        try:
            row = selector.select(table, spec)[0].row
        except NoValidHost as exc:
            reason = _responsible(exc)
            result.refused[reason] = result.refused.get(reason, 0) + 1
            continue
        result.placed += 1
        agents[row].add(uuid, arrival)
        if arrival.lifetime is not None:
            sequence += 1
            heapq.heappush(departures, (arrival.at + arrival.lifetime, sequence, row, uuid))
    while next_report <= end:
        while departures and departures[0][0] < next_report:
            _, _, row, uuid = heapq.heappop(departures)
            agents[row].remove(uuid)
            table.release(row, uuid)
        report_round(next_report)
        next_report += report_interval
    _finish(result, agents)
    result.seconds = time.perf_counter() - started
    return result


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
    mean = real.mean() if len(real) else 0.0
    result.times.append(now)
    result.skews.append(float(real.max() / mean) if mean > 0 else float("nan"))
    result.refusals.append(result.refused_total)
    result.loads.append((real / vcpus).astype(np.float32))
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
    stuck = (free_vcpus < smallest[1]) | (free_disk < smallest[2]) | (free_ram < smallest[0])
    free_total = np.clip(free_ram, 0, None).sum()
    share = float(np.clip(free_ram[stuck], 0, None).sum() / free_total) if free_total > 0 else 0.0
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
