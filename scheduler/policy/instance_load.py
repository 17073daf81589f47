"""What each instance uses, as its agent measures it, kept as a moving average per host.

Every load sample of a report (scheduler.policy.host_load) comes with the use of each of the
host's powered-on instances (the report's ``instance_usage``: vCPUs busy, MB in use). Each is
folded into its own moving average, with the half-life and the elapsed time of the host's
average, so that an instance's figure is a window of its samples, not its last one. What the
host uses beyond its instances (processes outside any guest, guests beyond their flavor, the
reserve) is folded the same way as the host's *background*: the host's sample less the sum of
its instances', never below 0. A plan moves an instance's average with it and leaves the
background where it is (scheduler.moves.fleet_snapshot).

An instance first seen on a host starts from its sample (a moved one is measured again where it
landed); one its host no longer lists is forgotten. A host whose report carries no
``instance_usage`` has no entry: its instances' use is not known. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class InstanceLoad:
    """One host's figures: ``usage`` {uuid: (vCPUs busy, MB in use)} of its instances, and what the
    host uses beyond them (``background_cpu`` vCPUs, ``background_memory_mb``)."""

    usage: Mapping[str, tuple[float, float]]
    background_cpu: float
    background_memory_mb: float

    @property
    def cpu(self) -> float:
        """The host's busy vCPUs: its background and its instances'."""
        return self.background_cpu + sum(cpu for cpu, _ in self.usage.values())

    @property
    def memory_mb(self) -> float:
        return self.background_memory_mb + sum(memory for _, memory in self.usage.values())


def folded(before: InstanceLoad | None, usage: Mapping[str, Mapping[str, float]], host_cpu: float,
           host_memory_mb: float, alpha: float) -> InstanceLoad:
    """The figures after one sample: ``usage`` as a report carries it, the host's ``host_cpu`` busy
    vCPUs and ``host_memory_mb`` in use; ``alpha`` the weight of the new sample (1: taken as is)."""
    samples = {uuid: (float(u.get("cpu", 0.0)), float(u.get("memory", 0.0))) for uuid, u in usage.items()}
    background = (max(host_cpu - sum(c for c, _ in samples.values()), 0.0),
                  max(host_memory_mb - sum(m for _, m in samples.values()), 0.0))
    if before is None or alpha >= 1.0:
        return InstanceLoad(samples, *background)
    kept = before.usage
    averaged = {}
    for uuid, (cpu, memory) in samples.items():
        old = kept.get(uuid)
        averaged[uuid] = (cpu, memory) if old is None else (old[0] + alpha * (cpu - old[0]),
                                                            old[1] + alpha * (memory - old[1]))
    return InstanceLoad(averaged,
                        before.background_cpu + alpha * (background[0] - before.background_cpu),
                        before.background_memory_mb + alpha * (background[1] - before.background_memory_mb))
