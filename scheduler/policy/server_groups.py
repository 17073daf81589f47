"""Server-group policies, and how many members of a request's group each host holds.

The scheduler resolves a ``group`` hint before selection (scheduler.planning.lookups):
``spec.group["hosts"]`` counts the group's members already placed, per host.
Members of the request itself placed earlier in the same selection are
pending on their rows of the HostTable, and count too, so that the instances
of one multi-instance request spread (or pack) among themselves.
"""

import numpy as np

AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)
#: Rules a policy accepts: only anti-affinity limits the members per host.
RULES = {ANTI_AFFINITY: ("max_server_per_host",)}


def policy(spec):
    return (spec.group or {}).get("policy")


def _counted_pending(spec):
    """Member uuids that count where they are pending: the request's own, and members
    whose placement the database does not show yet."""
    group = spec.group or {}
    return (set(group.get("members") or ()) | set(spec.instance_uuids)) - set(group.get("placed") or ())


def members_on_host(host_state, spec):
    """Members of ``spec``'s group on ``host_state``: placed before, or pending from this request."""
    group = spec.group or {}
    placed = (group.get("hosts") or {}).get(host_state.host, 0)
    counted = _counted_pending(spec)
    return placed + sum(1 for u in host_state.pending if u in counted)


def members_on_rows(table, rows, spec):
    """:func:`members_on_host` of every row of ``rows``, as a numpy array."""
    counts = np.zeros(table.size)
    group = spec.group or {}
    for host, placed in (group.get("hosts") or {}).items():
        row = table.index.get(host)
        if row is not None:
            counts[row] += placed
    counted = _counted_pending(spec)
    for row, pending in table.pending.items():
        if not counted.isdisjoint(pending):
            counts[row] += len(counted.intersection(pending))
    return counts[rows]


def any_member_placed(table, spec):
    """Whether the group has a member on some host (placed before or in this request)."""
    group = spec.group or {}
    if any(n > 0 for n in (group.get("hosts") or {}).values()):
        return True
    counted = _counted_pending(spec)
    return any(not counted.isdisjoint(pending) for pending in table.pending.values())
