"""Placement, one instance at a time: candidates, filter, weigh, pick, consume.

Pure policy: it reads and updates HostStates and nothing else, so that the
same code runs in the service, the tests, the benchmarks and simulations.
"""

import random

from scheduler import weighers as weighers_mod
from scheduler.exception import NoValidHost


class Selector:
    def __init__(self, filters, weighers, host_subset_size=1, rng=None):
        self.filters = list(filters)
        self.weighers = list(weighers)
        self.host_subset_size = max(1, host_subset_size)
        self.rng = rng or random.Random()

    def select(self, hosts, spec):
        """Choose and consume a host for each instance of ``spec``, all or none.

        Returns one HostState per instance uuid, in order; raises NoValidHost
        (with nothing consumed) when any instance finds no host.
        """
        hosts, forced = candidates(hosts, spec)
        chosen = []
        try:
            for index, instance_uuid in enumerate(spec.instance_uuids):
                if not forced:
                    hosts = self.filter(hosts, spec, index)
                else:
                    for host in hosts:
                        host.limits = {}
                weighed = self.weigh(hosts, spec)
                host = self.pick(weighed)
                host.consume(instance_uuid, spec.flavor)
                chosen.append(host)
        except NoValidHost:
            for host, instance_uuid in zip(chosen, spec.instance_uuids, strict=False):
                host.release(instance_uuid)
            raise
        return chosen

    def filter(self, hosts, spec, index=0):
        considered = len(hosts)
        removed = []
        for host in hosts:
            host.limits = {}
        for host_filter in self.filters:
            if host_filter.run_filter_once_per_request and index > 0:
                continue
            passed = host_filter.filter_all(hosts, spec)
            if len(passed) != len(hosts):
                removed.append((host_filter.name, len(hosts) - len(passed)))
            hosts = passed
            if not hosts:
                raise NoValidHost(no_valid_host_reason(considered, removed, spec, index))
        return hosts

    def weigh(self, hosts, spec):
        """[(weight, host)], best first."""
        totals = [0.0] * len(hosts)
        for weigher in self.weighers:
            raw = weigher.weigh_all(hosts, spec)
            normalized = weighers_mod.normalize(raw, weigher.minval, weigher.maxval)
            for i, (host, value) in enumerate(zip(hosts, normalized, strict=True)):
                totals[i] += weigher.weight_multiplier(host) * value
        order = sorted(range(len(hosts)), key=totals.__getitem__, reverse=True)
        return [(totals[i], hosts[i]) for i in order]

    def pick(self, weighed):
        if not weighed:
            raise NoValidHost("No valid host was found: no candidate hosts")
        best = weighed[: min(self.host_subset_size, len(weighed))]
        return self.rng.choice(best)[1]


def candidates(hosts, spec):
    """Apply ignore_hosts, then force_hosts / force_nodes; returns (hosts, forced)."""
    hosts = list(hosts)
    if not hosts:
        raise NoValidHost("No valid host was found: no compute host has reported to the scheduler")
    if spec.ignore_hosts:
        ignored = set(spec.ignore_hosts)
        hosts = [h for h in hosts if h.host not in ignored]
    if not (spec.force_hosts or spec.force_nodes):
        return hosts, False
    forced_hosts, forced_nodes = set(spec.force_hosts), set(spec.force_nodes)
    hosts = [
        h for h in hosts
        if (not forced_hosts or h.host in forced_hosts)
        and (not forced_nodes or h.nodename in forced_nodes)
    ]
    if not hosts:
        wanted = ", ".join(sorted(forced_hosts | forced_nodes))
        raise NoValidHost(f"No valid host was found: forced host {wanted} is not a known host")
    return hosts, True


def no_valid_host_reason(considered, removed, spec, index):
    detail = ", ".join(f"{name} removed {count}" for name, count in removed)
    which = f" for instance {index + 1} of {spec.num_instances}" if spec.num_instances > 1 else ""
    return (
        f"No valid host was found{which}: {considered} host{'s' if considered != 1 else ''} "
        f"considered; {detail}; none left"
    )
