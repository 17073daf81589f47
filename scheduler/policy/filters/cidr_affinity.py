"""SimpleCIDRAffinityFilter: hints ``build_near_host_ip`` and ``cidr`` (default ``/24``) keep
the hosts whose reported ``host_ip`` is in that network, as Nova's filter does.

A host that reports no address is not in any network. A hint that is not an
address and a prefix is refused before anything is placed (Nova raises).
"""

import ipaddress

import numpy as np

from scheduler.policy import filters


def _network(spec):
    near = spec.scheduler_hints.get("build_near_host_ip")
    if not near:
        return None
    cidr = spec.scheduler_hints.get("cidr") or "/24"
    return ipaddress.ip_network(f"{near}{cidr}", strict=False)


def _inside(host_ip, network):
    try:
        return host_ip is not None and ipaddress.ip_address(host_ip) in network
    except ValueError:
        return False


class SimpleCIDRAffinityFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_hints = ("build_near_host_ip", "cidr")

    def check_hints(self, spec):
        try:
            _network(spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scheduler hints build_near_host_ip and cidr: {exc}") from None

    def host_passes(self, host_state, spec):
        network = _network(spec)
        return network is None or _inside(host_state.host_ip, network)

    def filter_vector(self, table, rows, spec):
        network = _network(spec)
        if network is None:
            return True
        numbers = table.row_numbers(rows)
        return np.fromiter((_inside(table.extra.get(int(r), {}).get("host_ip"), network) for r in numbers),
                           dtype=bool, count=len(numbers))
