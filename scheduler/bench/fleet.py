"""Synthetic fleets and requests, reproducible from a seed (benchmarks, tests)."""

import time
import uuid

import numpy as np

from scheduler.host_state import HostTable
from scheduler.request_spec import RequestSpec

FLAVORS = [
    {"name": "m1.tiny", "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1},
    {"name": "m1.small", "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "vcpus": 1},
    {"name": "m1.medium", "memory_mb": 4096, "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2},
    {"name": "m1.large", "memory_mb": 8192, "root_gb": 80, "ephemeral_gb": 0, "vcpus": 4},
    {"name": "m1.xlarge", "memory_mb": 16384, "root_gb": 160, "ephemeral_gb": 0, "vcpus": 8},
]


def random_report(rng, host, load=None):
    """A plausible agent report; ``load`` (0..1.6) is the share of RAM in use."""
    memory = int(rng.choice([65536, 131072, 262144, 524288]))
    disk = int(rng.choice([500, 1000, 2000, 4000]))
    vcpus = int(rng.choice([16, 32, 48, 64]))
    load = rng.uniform(0.0, 1.6) if load is None else load
    vms = int(rng.integers(0, 60))
    return {
        "host": host,
        "memory_mb": memory,
        "free_ram_mb": int(memory * (1 - load)),
        "local_gb": disk,
        "free_disk_gb": float(disk * (1 - rng.uniform(0.0, 1.05))),
        "vcpus": vcpus,
        "vcpus_used": float(rng.integers(0, vcpus * 17)),
        "running_vms": vms,
        "instance_uuids": [],
    }


def random_fleet(n, seed=0, down_fraction=0.02, disabled_fraction=0.01, service_down_time=60):
    """A HostTable of ``n`` hosts; a few are silent past service_down_time or disabled."""
    rng = np.random.default_rng(seed)
    table = HostTable(capacity=n)
    now = time.monotonic()
    for i in range(n):
        host = f"host-{i:06d}"
        row = table.add(host)
        silent = rng.random() < down_fraction
        table.update_from_report(
            row, random_report(rng, host), now - (service_down_time * 2 if silent else rng.uniform(0, 30))
        )
        table.disabled[row] = rng.random() < disabled_fraction
    return table


def random_spec(seed=0, count=1, **filter_properties):
    rng = np.random.default_rng(seed)
    flavor = dict(FLAVORS[int(rng.integers(0, len(FLAVORS)))])
    return RequestSpec.from_wire(
        {
            "instance_uuids": [str(uuid.UUID(int=int(rng.integers(0, 2**62)) + i)) for i in range(count)],
            "instance_type": flavor,
        },
        filter_properties,
    )
