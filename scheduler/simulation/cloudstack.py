"""A churning, overcommitted fleet where part of the load is invisible to allocation,
replayed by ``berth simulate``'s engine (scheduler/simulation/engine.py).

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
included) ends up spread: max / mean across hosts at each round of reports,
averaged over the rounds after the first lifetimes have run out. Lower is
better.

The workload is drawn from the random seed before any policy runs, so every
policy sees the same VMs. The balance benchmark (``benchmarks/balance.py``) and the balanced
policy's tests replay it.
"""


import random

import numpy as np

from scheduler import conf as berth_conf
from scheduler.conf import opts
from scheduler.simulation import engine
from scheduler.simulation.inputs import Arrival, generate_fleet

HOSTS = 9
CORES = 192
MEMORY_MB = 1_132_000
DISK_GB = 10_000
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
WARMUP = LIFETIME[1] + 1  # batches before the skew is measured
SEEDS = range(5)

#: Policies compared: name -> (weighers, host_subset_size).
POLICIES = {
    "allocation": (["RAMWeigher"], 1),
    "allocation+spread": (["RAMWeigher"], 3),
    "balanced": (["BalancedWeigher"], 1),
}


def workload(seed, batches=BATCHES):
    """BATCH_SIZE arrivals a batch, drawn from ``seed`` alone."""
    rng = random.Random(seed)
    return [
        Arrival(
            batch * BATCH_SECONDS,
            VM_MEMORY_MB,
            VM_VCPUS,
            0,
            rng.randint(*LIFETIME) * BATCH_SECONDS,
            1.0 if rng.random() < BUSY_FRACTION else 0.0,
        )
        for batch in range(batches)
        for _ in range(BATCH_SIZE)
    ]


def policy_conf(weigher_names, subset):
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-simulation", default_config_files=[])
    for name, value in {
        "enabled_filters": ["RamFilter", "CoreFilter"],
        "weighers": weigher_names,
        "cpu_allocation_ratio": CPU_RATIO,
        "ram_allocation_ratio": RAM_RATIO,
        "host_subset_size": subset,
    }.items():
        conf.set_override(name, value, "filter_scheduler")
    return conf


def run(policy, seed, batches=BATCHES):
    """The real-load skew of ``policy`` on the workload of ``seed``: a dict of figures."""
    hosts = generate_fleet(HOSTS, [(MEMORY_MB, CORES, DISK_GB)], hidden_cores=HIDDEN_CORES)
    result = engine.run(
        policy,
        policy_conf(*POLICIES[policy]),
        hosts,
        workload(seed, batches),
        report_interval=BATCH_SECONDS,
        seed=seed,
        concurrent=True,
    )
    skews = [skew for at, skew in zip(result.times, result.skews, strict=True) if at > WARMUP * BATCH_SECONDS]
    return {
        "policy": policy,
        "seed": seed,
        "skew": float(np.mean(skews)) if skews else float("nan"),
        "worst": float(np.max(skews)) if skews else float("nan"),
        "failed": result.refused_total,
    }
