"""A simulated host's measured load and reservation figures (the fake driver's).

Pure and deterministic: whether an instance is busy or powered off is drawn
from ``seed`` and its uuid alone, so the same instances always give the
same figures. Per instance of ``vcpus`` and ``memory_mb``:

* powered on, busy: uses ``vcpus * busy_cpu_load`` cores and all its memory;
* powered on, idle: ``vcpus * idle_cpu_load`` cores, ``idle_memory_fraction`` of its memory;
* powered off: nothing; its reservation counts as undeployed.

An override (``overrides``: {uuid: :class:`Load`}, set at run time with ``berth fake-load``)
replaces that: the instance is powered on and uses ``cpu`` of its vCPUs and ``memory`` of its
memory (None: as busy or idle has it). Each powered-on instance's use goes in the report
as ``instance_usage`` ({uuid: {"cpu": vCPUs used, "memory": MB used}}); the host's figures
add them up.

``hidden_cpu_load`` cores are busy with work allocation cannot see (guests
beyond their flavor, processes outside any instance). Every powered-on
instance reserves ``reservation_fraction`` of its flavor and may burst into
the rest.
"""

import random
from dataclasses import dataclass

from berth_contract.host_report import HostLoad
from compute_agent.resource_tracker import isotime


@dataclass(frozen=True)
class Load:
    """An instance's simulated load: ``cpu`` of its vCPUs busy (0 to 1), ``memory`` of its
    memory in use (0 to 1; None: as the busy/idle model has it)."""

    cpu: float
    memory: float | None = None

    def as_dict(self):
        return {"cpu": self.cpu, "memory": self.memory}


def busy_and_off(uuid, seed, busy_fraction, powered_off_fraction):
    rng = random.Random(f"{seed}:{uuid}")
    return rng.random() < busy_fraction, rng.random() < powered_off_fraction


def simulated_load(
    instances,
    vcpus,
    memory_mb,
    *,
    reserved_cpus=0,
    reserved_memory_mb=0,
    busy_fraction=0.0,
    busy_cpu_load=1.0,
    idle_cpu_load=0.05,
    hidden_cpu_load=0.0,
    idle_memory_fraction=0.5,
    reservation_fraction=1.0,
    powered_off_fraction=0.0,
    seed=0,
    now=None,
    overrides=None,
):
    """The measured load and reservations of ``instances`` ({uuid: flavor}) and each one's usage,
    as the HostReport fields ``load`` and ``instance_usage``."""
    overrides = overrides or {}
    cores = float(hidden_cpu_load)
    in_use = float(reserved_memory_mb)
    reserved = {"cpu": float(reserved_cpus), "memory": float(reserved_memory_mb)}
    burst = {"cpu": 0.0, "memory": 0.0}
    undeployed = {"cpu": 0.0, "memory": 0.0}
    usage = {}
    r = reservation_fraction
    for uuid in sorted(instances):
        flavor = instances[uuid]
        size = {"cpu": flavor.get("vcpus", 0), "memory": flavor.get("memory_mb", 0)}
        busy, off = busy_and_off(uuid, seed, busy_fraction, powered_off_fraction)
        load = overrides.get(uuid)
        if off and load is None:
            for key in size:
                undeployed[key] += size[key] * r
            continue
        cpu_load, memory_load = (busy_cpu_load, 1.0) if busy else (idle_cpu_load, idle_memory_fraction)
        if load is not None:
            cpu_load = load.cpu
            memory_load = memory_load if load.memory is None else load.memory
        used = usage[uuid] = {"cpu": float(size["cpu"] * cpu_load),
                              "memory": float(size["memory"] * memory_load)}
        cores += used["cpu"]
        in_use += used["memory"]
        for key in size:
            reserved[key] += size[key] * r
            burst[key] += size[key] * (1.0 - r)
    load = HostLoad(
        cpu_utilization=min(1.0, cores / vcpus) if vcpus > 0 else 0.0,
        memory_mb_in_use=min(in_use, float(memory_mb)),
        utilization_sampled_at=isotime(now),
        cpu_reserved=reserved["cpu"],
        cpu_burst=burst["cpu"],
        cpu_undeployed_reservation=undeployed["cpu"],
        memory_reserved_mb=reserved["memory"],
        memory_burst_mb=burst["memory"],
        memory_undeployed_reservation_mb=undeployed["memory"],
    )
    return {"load": load, "instance_usage": usage}
