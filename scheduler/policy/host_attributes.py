"""The attributes of Nova's HostState that flavors and queries may name.

ComputeCapabilitiesFilter (``capabilities:free_disk_mb``) and JsonFilter
(``$hypervisor_version``) read a host by these names, with the values Nova
gives them (``free_disk_mb`` in MB, ``cpu_info`` as JSON text,
``hypervisor_hostname`` the node's name). A name Nova's HostState does not
have reads as nothing, as in Nova; Berth's own attributes and methods are
never reachable from a request. Berth has no PCI, NUMA, cells or
per-node allocation ratios: those read as nothing too.
"""

import json

#: Nova 34's HostState attributes.
NOVA = frozenset({
    "host", "nodename", "uuid", "total_usable_ram_mb", "total_usable_disk_gb", "disk_mb_used",
    "free_ram_mb", "free_disk_mb", "vcpus_total", "vcpus_used", "pci_stats", "numa_topology",
    "num_instances", "num_io_ops", "failed_builds", "host_ip", "hypervisor_type",
    "hypervisor_version", "hypervisor_hostname", "cpu_info", "supported_instances", "limits",
    "metrics", "aggregates", "instances", "ram_allocation_ratio", "cpu_allocation_ratio",
    "disk_allocation_ratio", "cell_uuid", "updated", "allocation_candidates", "stats", "service",
})


def lookup(host_state, name):
    """The value of Nova's HostState attribute ``name`` for this host, None if it has none."""
    if name not in NOVA:
        return None
    return getattr(host_state, name, None)


def walk(value, path):
    """Nova's ComputeCapabilitiesFilter descent: into a dict by key, into JSON text once
    parsed; anything else, or a missing key, is None."""
    for part in path:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return None
    return value
