"""Fragmented fleets, reproducible from a seed: hosts filled to most of their memory by a mix
of flavors, some instances in anti-affinity groups, a few pinned; and a large flavor that fits
on none of them. What the rebalance planner's benchmarks and tests make room on."""

from __future__ import annotations

import time
import uuid as uuidlib
from typing import Any

import numpy as np

from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.moves.rebalance import Resident, Snapshot
from scheduler.policy.host_state import HostTable

MIX = [Flavor(memory_mb=m, root_gb=d, ephemeral_gb=0, vcpus=c, name=n) for n, m, d, c in (
    ("m1.small", 2048, 20, 1), ("m1.medium", 4096, 40, 2), ("m1.large", 8192, 80, 4),
    ("m1.xlarge", 16384, 160, 8))]
MIX_WEIGHTS = [0.3, 0.3, 0.25, 0.15]
LARGE = Flavor(memory_mb=65536, root_gb=160, ephemeral_gb=0, vcpus=16, name="m1.huge")
#: The allocation ratios the fleets are filled to (the conf given to fragmented_fleet should have them).
RATIOS = {"cpu": 4.0, "ram": 1.0, "disk": 1.0}


def fragmented_fleet(n_hosts: int, seed: int, conf: Any, low: float = 0.85, high: float = 0.95,
                     sizes: tuple[tuple[int, int, int], ...] = ((131072, 32, 2000), (262144, 64, 4000)),
                     mix: list[Flavor] = MIX, weights: list[float] = MIX_WEIGHTS, grouped: float = 0.1,
                     pinned: float = 0.03) -> Snapshot:
    """A Snapshot of ``n_hosts`` hosts each filled to ``low``-``high`` of its memory by instances of
    ``mix``; a share ``grouped`` of them in anti-affinity groups of 3 (one per host), ``pinned``
    not movable."""
    rng = np.random.default_rng(seed)
    table = HostTable(capacity=n_hosts)
    now = time.monotonic()
    table.clock = lambda: now
    residents: list[Resident] = []
    groups: list[dict[str, Any]] = []
    for i in range(n_hosts):
        host = f"host-{i:05d}"
        memory, vcpus, disk = sizes[int(rng.integers(0, len(sizes)))]
        goal = memory * float(rng.uniform(low, high))
        used = np.zeros(3)
        while True:
            flavor = mix[int(rng.choice(len(mix), p=weights))]
            amounts = np.array([flavor.vcpus, flavor.memory_mb, flavor.disk_gb], dtype=float)
            if not _fits(used, amounts, goal, vcpus, disk):
                smallest = np.array([mix[0].vcpus, mix[0].memory_mb, mix[0].disk_gb], dtype=float)
                if not _fits(used, smallest, goal, vcpus, disk):
                    break
                continue
            used += amounts
            uuid = str(uuidlib.UUID(int=int(rng.integers(0, 2**62)) * 4096 + len(residents)))
            spec = RequestSpec(instance_uuids=[uuid], flavor=flavor)
            if rng.random() < grouped / 3 * 3:  # joins an open group it has no member of here
                open_groups = [g for g in groups if len(g["members"]) < 3 and host not in g["hosts"]]
                group = open_groups[0] if open_groups and rng.random() < 0.67 else None
                if group is None:
                    group = {"uuid": f"group-{len(groups)}", "policy": "anti-affinity", "rules": {},
                             "members": [], "placed": [], "hosts": {}}
                    groups.append(group)
                group["members"].append(uuid)
                group["hosts"][host] = 1
                spec.group = group
            residents.append(Resident(uuid, host, spec, movable=bool(rng.random() >= pinned)))
        row = table.add(host)
        table.update_from_report(row, HostReport.trusted({
            "host": host, "memory_mb": memory, "free_ram_mb": int(memory - used[1]), "local_gb": disk,
            "free_disk_gb": float(disk - used[2]), "vcpus": vcpus, "vcpus_used": float(used[0]),
            "running_vms": 0, "instance_uuids": []}), now)
    for group in groups:  # the group as the scheduler reads it: its members' hosts
        group["placed"] = list(group["members"])
    return Snapshot.from_conf(table, residents, conf)


def _fits(used: np.ndarray, amounts: np.ndarray, goal: float, vcpus: int, disk: int) -> bool:
    return bool(used[1] + amounts[1] <= goal and used[0] + amounts[0] <= vcpus * RATIOS["cpu"]
                and used[2] + amounts[2] <= disk * RATIOS["disk"])
