"""Server-group affinity and anti-affinity, and the same_host / different_host hints.

The scheduler resolves the hints before selection (scheduler.planning.lookups): the
group's policy, rules and the hosts of its members; the hosts of the
instances same_host / different_host name.

- ServerGroupAffinityFilter (policy ``affinity``): once a member is placed,
  every other member goes to a host that holds one.
- ServerGroupAntiAffinityFilter (policy ``anti-affinity``): a host takes at
  most the group's ``max_server_per_host`` rule (default 1) of its members.
- SameHostFilter: only the hosts of the instances in the ``same_host`` hint
  (none pass when those instances are on no host).
- DifferentHostFilter: none of the hosts of the instances in ``different_host``.
"""

import numpy as np

from scheduler.policy import filters, server_groups


class ServerGroupAffinityFilter(filters.BaseHostFilter):
    group_policies = (server_groups.AFFINITY,)
    def host_passes(self, host_state, spec):
        if server_groups.policy(spec) != server_groups.AFFINITY:
            return True
        if not server_groups.any_member_placed(host_state.table, spec):
            return True
        return server_groups.members_on_host(host_state, spec) > 0

    def filter_vector(self, table, rows, spec):
        if server_groups.policy(spec) != server_groups.AFFINITY:
            return True
        if not server_groups.any_member_placed(table, spec):
            return True
        return server_groups.members_on_rows(table, rows, spec) > 0


def max_per_host(spec):
    rules = (spec.group or {}).get("rules") or {}
    return int(rules.get("max_server_per_host") or 1)


class ServerGroupAntiAffinityFilter(filters.BaseHostFilter):
    group_policies = (server_groups.ANTI_AFFINITY,)
    def host_passes(self, host_state, spec):
        if server_groups.policy(spec) != server_groups.ANTI_AFFINITY:
            return True
        return server_groups.members_on_host(host_state, spec) < max_per_host(spec)

    def filter_vector(self, table, rows, spec):
        if server_groups.policy(spec) != server_groups.ANTI_AFFINITY:
            return True
        return server_groups.members_on_rows(table, rows, spec) < max_per_host(spec)


def _holds(table, rows, hosts):
    """Whether each row of ``rows`` is one of ``hosts``."""
    mask = np.zeros(table.size, dtype=bool)
    mask[[table.index[h] for h in hosts if h in table.index]] = True
    return mask[rows]


class SameHostFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_hints = ("same_host",)

    def host_passes(self, host_state, spec):
        if spec.same_host_hosts is None:
            return True
        return host_state.host in spec.same_host_hosts

    def filter_vector(self, table, rows, spec):
        if spec.same_host_hosts is None:
            return True
        return _holds(table, rows, spec.same_host_hosts)


class DifferentHostFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_hints = ("different_host",)

    def host_passes(self, host_state, spec):
        if not spec.different_host_hosts:
            return True
        return host_state.host not in spec.different_host_hosts

    def filter_vector(self, table, rows, spec):
        if not spec.different_host_hosts:
            return True
        return ~_holds(table, rows, spec.different_host_hosts)
