"""How long one placement decision takes: filter, weigh, select and consume."""

import random
import statistics
import time

from benchmarks.summary import percentile
from scheduler import conf as berth_conf
from scheduler.conf import opts
from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector
from scheduler.simulation.host_tables import random_fleet, random_spec, rich_spec

NOVA_FILTERS = ["ComputeFilter", "RetryFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
                "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter",
                "RamFilter", "DiskFilter", "CoreFilter"]
NOVA_WEIGHERS = ["RAMWeigher", "DiskWeigher", "CPUWeigher", "IoOpsWeigher", "NumInstancesWeigher",
                 "BuildFailureWeigher", "ServerGroupSoftAffinityWeigher",
                 "ServerGroupSoftAntiAffinityWeigher", "MetricsWeigher"]

WARM = 20  # decisions made before any is measured

#: Policies measured: name -> (option overrides in [filter_scheduler], rich fleet and requests).
POLICIES = {
    "default": ({}, False),
    "nova": ({"enabled_filters": NOVA_FILTERS, "weighers": NOVA_WEIGHERS}, True),
    "capacity": ({"enabled_filters": ["ComputeFilter", "RetryFilter", "RamFilter", "DiskFilter",
                                      "CoreFilter", "DiskThresholdFilter"],
                  "weighers": ["CapacityWeigher"]}, True),
    "balanced": ({"weighers": ["BalancedWeigher"]}, True),
    "all": ({"enabled_filters": "ALL", "weighers": "ALL", "host_subset_size": 8}, True),
}


def policy_conf(overrides):
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-bench", default_config_files=[])
    for name, value in overrides.items():
        if value == "ALL":
            value = sorted(filters.all_filters() if name == "enabled_filters" else weighers.all_weighers())
        conf.set_override(name, value, "filter_scheduler")
    return conf


def prepared(n_hosts, policy="default", decisions=500, vectorized=True, seed=0):
    """(selector, table, specs) of ``policy`` on a random fleet of ``n_hosts``: the first WARM
    specs to warm caches and allocators, then ``decisions`` to measure."""
    overrides, rich = POLICIES[policy]
    conf = policy_conf(overrides)
    built = time.monotonic()
    table = random_fleet(n_hosts, seed=seed, rich=rich)
    # Building a large fleet takes longer than service_down_time: make its reports recent again.
    table.updated += time.monotonic() - built
    selector = Selector(
        filters.enabled_filters(conf), weighers.enabled_weighers(conf),
        conf.filter_scheduler.host_subset_size, random.Random(seed), vectorized=vectorized,
    )
    if rich:
        specs = [rich_spec(seed * 1_000_003 + i, table) for i in range(decisions + WARM)]
    else:
        specs = [random_spec(seed * 1_000_003 + i) for i in range(decisions + WARM)]
    return selector, table, specs


def measure(n_hosts, policy="default", decisions=500, vectorized=True, seed=0):
    """One row of figures for ``decisions`` single-instance decisions on a fleet of ``n_hosts``."""
    selector, table, specs = prepared(n_hosts, policy, decisions, vectorized, seed)
    for spec in specs[:WARM]:
        _decide(selector, table, spec)
    samples = []
    refused = 0
    clock = time.perf_counter
    for spec in specs[WARM:]:
        start = clock()
        refused += not _decide(selector, table, spec)
        samples.append(clock() - start)
    return {
        "bench": "decision",
        "n_hosts": n_hosts,
        "policy": policy if vectorized else f"{policy} (per-host reference)",
        "decisions": len(samples),
        "median_ms": statistics.median(samples) * 1e3,
        "p99_ms": percentile(samples, 0.99) * 1e3,
        "decisions_per_s": len(samples) / sum(samples),
        "no_valid_host": refused,
    }


def _decide(selector, table, spec):
    """One decision; a NoValidHost is a decision too (the filters ran), counted apart."""
    try:
        selector.select(table, spec)
    except NoValidHost:
        return False
    return True
