"""A churning, overcommitted fleet where part of the load is invisible to allocation.

The simulation from CloudStack's balanced weighting proposal:
9 hosts of 192 cores and 1,132,000 MB, overcommitted 10 times on CPU and 4
times on memory; 300 batches of 8 VMs of 4 cores / 8 GB, 35% of them busy;
60 cores busy with hidden load on every third host; each VM leaves after 10
to 59 batches. The VMs of a batch are placed concurrently: every decision of
a batch reads the same figures (as separate schedulers, or requests in
flight, would), and the placements are charged once the batch is over. The
agents report every batch (a minute of simulated time): allocation, and the
measured CPU utilisation and memory in use.

What is measured is how unevenly the real load (busy cores, hidden ones
included) ends up spread: max / mean across hosts, averaged over the
batches after the first lifetimes have run out. Lower is better.

Pure: a HostTable, a Selector and a simulated clock; no I/O. The workload is
drawn from the random seed before any policy runs, so every policy sees the same
VMs. ``python -m benchmarks.simulation`` prints the figures.
"""

import dataclasses
import random
import sys
import uuid as uuidlib

import numpy as np

from scheduler import conf as berth_conf
from scheduler import filters, weighers
from scheduler.conf import opts
from scheduler.exception import NoValidHost
from scheduler.host_report import HostReport
from scheduler.host_state import HostTable
from scheduler.request_spec import RequestSpec
from scheduler.selection import Selector

HOSTS = 9
CORES = 192
MEMORY_MB = 1_132_000
CPU_RATIO = 10.0
RAM_RATIO = 4.0
VM_VCPUS = 4
VM_MEMORY_MB = 8192
BATCHES = 300
BATCH_SIZE = 8
BUSY_FRACTION = 0.35
HIDDEN_CORES = 60.0  # on every third host
LIFETIME = (10, 59)  # batches, inclusive
BATCH_SECONDS = 60.0
IDLE_CPU_LOAD = 0.05  # cores per vCPU of an idle VM
IDLE_MEMORY_FRACTION = 0.5
WARMUP = LIFETIME[1] + 1  # batches before the skew is measured
SEEDS = range(5)

#: Policies compared: name -> (weighers, host_subset_size).
POLICIES = {
    "allocation": (["RAMWeigher"], 1),
    "allocation+spread": (["RAMWeigher"], 3),
    "balanced": (["BalancedWeigher"], 1),
}


@dataclasses.dataclass(frozen=True)
class VM:
    uuid: str
    busy: bool
    lifetime: int  # batches


def workload(seed):
    """[[VM] * BATCH_SIZE] * BATCHES, drawn from ``seed`` alone."""
    rng = random.Random(seed)
    return [
        [
            VM(
                str(uuidlib.UUID(int=rng.getrandbits(128), version=4)),
                rng.random() < BUSY_FRACTION,
                rng.randint(*LIFETIME),
            )
            for _ in range(BATCH_SIZE)
        ]
        for _ in range(BATCHES)
    ]


def policy_conf(weigher_names):
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-simulation", default_config_files=[])
    for name, value in {
        "enabled_filters": ["RamFilter", "CoreFilter"],
        "weighers": weigher_names,
        "cpu_allocation_ratio": CPU_RATIO,
        "ram_allocation_ratio": RAM_RATIO,
    }.items():
        conf.set_override(name, value, "filter_scheduler")
    return conf


class Host:
    """A simulated agent: its VMs and what it measures."""

    def __init__(self, name, hidden_cores):
        self.name = name
        self.hidden = hidden_cores
        self.vms = {}  # uuid -> (VM, the batch it leaves at)

    def real_cores(self):
        return self.hidden + sum(
            VM_VCPUS * (1.0 if vm.busy else IDLE_CPU_LOAD) for vm, _ in self.vms.values()
        )

    def report(self, now):
        count = len(self.vms)
        in_use = sum(VM_MEMORY_MB * (1.0 if vm.busy else IDLE_MEMORY_FRACTION) for vm, _ in self.vms.values())
        return {
            "host": self.name,
            "memory_mb": MEMORY_MB,
            "free_ram_mb": MEMORY_MB - count * VM_MEMORY_MB,
            "local_gb": 10_000,
            "free_disk_gb": 10_000,
            "vcpus": CORES,
            "vcpus_used": count * VM_VCPUS,
            "running_vms": count,
            "instance_uuids": sorted(self.vms),
            "cpu_utilization": min(1.0, self.real_cores() / CORES),
            "memory_mb_in_use": min(float(MEMORY_MB), in_use),
            "utilization_sampled_at": now,
        }


def run(policy, seed, batches=None):
    """The real-load skew of ``policy`` on the workload of ``seed``: a dict of figures."""
    weigher_names, subset = POLICIES[policy]
    conf = policy_conf(weigher_names)
    selector = Selector(
        filters.enabled_filters(conf), weighers.enabled_weighers(conf), subset, random.Random(seed)
    )
    table = HostTable(capacity=HOSTS)
    clock = [0.0]
    table.clock = lambda: clock[0]
    hosts = [Host(f"sim-{i}", HIDDEN_CORES if i % 3 == 0 else 0.0) for i in range(HOSTS)]
    for host in hosts:
        table.add(host.name)
    flavor = {"name": "sim.vm", "memory_mb": VM_MEMORY_MB, "root_gb": 0, "vcpus": VM_VCPUS}
    skews, failed = [], 0
    arrivals = workload(seed)[:batches]
    for batch, vms in enumerate(arrivals):
        now = clock[0] = batch * BATCH_SECONDS
        for row, host in enumerate(hosts):
            host.vms = {u: (vm, end) for u, (vm, end) in host.vms.items() if end > batch}
            table.update_from_report(row, HostReport.trusted(host.report(now)), now)
        decided = []
        for vm in vms:
            spec = RequestSpec.from_wire({"instance_uuids": [vm.uuid], "instance_type": flavor}, {})
            try:
                row = selector.select(table, spec)[0].row
            except NoValidHost:
                failed += 1
                continue
            table.release(row, vm.uuid)  # concurrent: the next decision reads the same figures
            decided.append((vm, row, spec.flavor))
        for vm, row, flavor_obj in decided:
            table.consume(row, vm.uuid, flavor_obj, now)
            hosts[row].vms[vm.uuid] = (vm, batch + vm.lifetime)
        if batch >= WARMUP:
            loads = np.array([host.real_cores() for host in hosts])
            skews.append(loads.max() / loads.mean())
    return {
        "policy": policy,
        "seed": seed,
        "skew": float(np.mean(skews)) if skews else float("nan"),
        "worst": float(np.max(skews)) if skews else float("nan"),
        "failed": failed,
    }


def compare(seeds=SEEDS, policies=tuple(POLICIES)):
    return [run(policy, seed) for seed in seeds for policy in policies]


def table_text(results):
    by_seed = {}
    for r in results:
        by_seed.setdefault(r["seed"], {})[r["policy"]] = r
    policies = list(dict.fromkeys(r["policy"] for r in results))
    lines = [
        "real-load skew, max/mean across hosts (mean over batches; worst batch in brackets)",
        "seed  " + "  ".join(f"{p:>22}" for p in policies),
    ]
    for seed, row in by_seed.items():
        lines.append(
            f"{seed:>4}  " + "  ".join(f"{row[p]['skew']:>13.3f} [{row[p]['worst']:.2f}]" for p in policies)
        )
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    seeds = [int(s) for s in argv] or list(SEEDS)
    print(table_text(compare(seeds)))


if __name__ == "__main__":
    main()
