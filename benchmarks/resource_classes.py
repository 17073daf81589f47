"""One decision when requests ask for resource classes and traits: a fleet of ``--hosts``
hosts (default 10,000), each with a random inventory of PCPU and three other classes
(VGPU, CUSTOM_FPGA, SRIOV_NET_VF, each on about 80% of the hosts, random use, min/max
unit and step) and random traits (eight, each on about 80%), a few aggregates requiring
a trait; each request asks for all three classes, requires three traits and forbids two.
Each placement is given back once timed, so that every decision sees the same fleet.

Policy: the default filters and weighers with IsolatedAggregateFilter added. Figures:
the whole decision (filter, weigh, pick, consume) and, timed apart on the same request
and fleet just before it, the vector forms of the three filters that read classes and
traits (ResourceClassFilter, TraitsFilter, IsolatedAggregateFilter) over the whole
fleet; each as the median with the interquartile range.

Run alone: ``python -m benchmarks.resource_classes [--hosts N] [--decisions D]``.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import numpy as np

from benchmarks import command_line
from benchmarks.decisions import _decide, policy_conf
from benchmarks.fleet import FLAVORS, random_fleet, resource_specs
from benchmarks.summary import quartiles
from berth_contract.request_spec import RequestSpec
from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector

NEW_FILTERS = ("ResourceClassFilter", "TraitsFilter", "IsolatedAggregateFilter")


def requests(seed, count):
    rng = np.random.default_rng(seed + 40_000)
    for i in range(count):
        flavor = dict(FLAVORS[int(rng.integers(0, len(FLAVORS)))],
                      extra_specs=resource_specs(rng, classes=3, required=3, forbidden=2, dedicated=0))
        yield RequestSpec.from_wire({"instance_uuids": [f"00000000-0000-4000-8000-{i:012d}"],
                                     "instance_type": flavor}, {})


def measure(n_hosts=10_000, decisions=500, seed=0):
    conf = policy_conf({})
    conf.set_override("enabled_filters", [*conf.filter_scheduler.enabled_filters,
                                          "IsolatedAggregateFilter"], "filter_scheduler")
    built = time.monotonic()
    table = random_fleet(n_hosts, seed=seed, resources=True, presence=0.8)
    table.updated += time.monotonic() - built
    selector = Selector(filters.enabled_filters(conf), weighers.enabled_weighers(conf), 1,
                        random.Random(seed))
    new = [f for f in selector.filters if f.name in NEW_FILTERS]
    specs = list(requests(seed, decisions + 20))
    for spec in specs[:20]:  # warm caches and allocators
        _decide(selector, table, spec)
    for row, pending in list(table.pending.items()):
        for instance_uuid in list(pending):
            table.release(row, instance_uuid)
    whole, share, passed, refused = [], [], [], 0
    clock = time.perf_counter
    everything = slice(None)
    for spec in specs[20:]:
        start = clock()
        mask = True
        for host_filter in new:
            mask = mask & host_filter.filter_vector(table, everything, spec)
        share.append(clock() - start)
        passed.append(int(np.count_nonzero(mask)))
        start = clock()
        try:
            placed = selector.select(table, spec)
        except NoValidHost:  # a decision too (the filters ran), counted apart
            placed = ()
            refused += 1
        whole.append(clock() - start)
        for host, instance_uuid in zip(placed, spec.instance_uuids, strict=False):
            table.release(host.row, instance_uuid)
    decision = quartiles([s * 1e3 for s in whole])
    filtering = quartiles([s * 1e3 for s in share])
    return {
        "bench": "traits",
        "n_hosts": n_hosts,
        "policy": "default+isolated, 3 classes 5 traits",
        "decisions": len(whole),
        "median_ms": decision[1],
        "decision_ms_q1": decision[0],
        "decision_ms_q3": decision[2],
        "p99_ms": sorted(whole)[min(len(whole) - 1, int(0.99 * len(whole)))] * 1e3,
        "new_filters_ms_median": filtering[1],
        "new_filters_ms_q1": filtering[0],
        "new_filters_ms_q3": filtering[2],
        "hosts_passing_new_filters_median": statistics.median(passed),
        "no_valid_host": refused,
    }


def describe(row):
    """The row's figures as the table prints them."""
    return (f"decision {row['median_ms']:.3f} ms (IQR {row['decision_ms_q1']:.3f}-"
            f"{row['decision_ms_q3']:.3f}), of which the class and trait filters "
            f"{row['new_filters_ms_median']:.3f} ms (IQR {row['new_filters_ms_q1']:.3f}-"
            f"{row['new_filters_ms_q3']:.3f}); {row['hosts_passing_new_filters_median']:,.0f} hosts "
            f"pass them (median), {row['no_valid_host']} of {row['decisions']} found none")


def main(argv=None):
    parser = command_line.parser("python -m benchmarks.resource_classes", __doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--decisions", type=int, default=500)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    row = measure(args.hosts, args.decisions)
    print(f"{row['n_hosts']:,} hosts, {row['decisions']} decisions: {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
