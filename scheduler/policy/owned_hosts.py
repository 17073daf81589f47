"""When one of several live schedulers places on the hosts it owns, and when on the whole fleet.

N schedulers that each take the heaviest host of the whole fleet race for the same
hosts (their claims conflict). Each taking the heaviest of its own share (the
rendezvous share whose reports it writes, scheduler.fleet.report_owner) decides on
disjoint hosts instead. That is a preference: when none of its own hosts passes the
filters it takes another's, and it weighs the whole fleet, as a lone scheduler does,
for

- a move (migration, evacuation, drain, resize to another host): many moves at once
  would otherwise pile onto one share's emptiest hosts;
- a request whose spread matters: a server group member of any policy, a
  same_host or different_host hint, or a hint a weigher reads (preferred_hosts):
  the host they prefer may be another's;
- a fleet too small for its shares to stand for it: fewer than MIN_PASSING x N x
  host_subset_size passing hosts, N live schedulers.

Its own hosts are not held to a rank in the whole fleet's order: a scheduler sees its
own placements at once and the others' only with their reports, so its own hosts look
fuller than they are against the others', and any such window sent it back to racing for
the others' hosts (end to end, 2 schedulers at 1,000 hosts: 0.24 claim conflicts per
placement with the heaviest 3/8; simulated, 16 schedulers at 1,000 hosts: 14% with the
heaviest quarter).
"""

#: The fewest passing hosts, per live scheduler and host_subset_size, for the preference.
MIN_PASSING = 16


def smallest_fleet(live, host_subset_size):
    """The fewest passing hosts with which each of ``live`` schedulers prefers its own."""
    return MIN_PASSING * live * host_subset_size


def spread_matters(spec, weighers):
    """Whether ``spec`` is weighed on the whole fleet whoever owns the hosts: a server group
    member, a same_host or different_host hint, or a hint one of ``weighers`` reads."""
    if spec.group or spec.same_host_hosts or spec.different_host_hosts:
        return True
    hints = spec.scheduler_hints
    return any(key in hints for weigher in weighers for key in weigher.reads_hints)


def narrow(rows, weights, owned, live, host_subset_size):
    """(rows, weights) to pick from: those of ``rows`` this scheduler owns (``owned``, a mask over
    the table's rows), or all of them when none is, or when the fleet is too small."""
    if len(rows) < smallest_fleet(live, host_subset_size):
        return rows, weights
    mine = owned[rows]
    if not mine.any():
        return rows, weights
    return rows[mine], weights[mine]
