"""When one of several live schedulers places on the hosts it owns, and when on the whole fleet.

N schedulers that each take the heaviest host of the whole fleet race for the same
hosts (their claims conflict). Each taking the heaviest of its own share (the
rendezvous share whose reports it writes, scheduler.fleet.report_owner) decides on
disjoint hosts instead. That is a preference, never a rule: it only chooses among
hosts a lone scheduler would rank near the top, so that it never leaves a request
with no host where a lone scheduler would have found one.

The whole fleet is weighed, as by a lone scheduler, for

- a move (migration, evacuation, drain, resize to another host): many moves at once
  would otherwise pile onto one share's emptiest hosts;
- a request whose spread matters: a server group member of any policy, a
  same_host or different_host hint, or a hint a weigher reads (preferred_hosts):
  the host they prefer may be another's;
- a request none of whose owned hosts ranks among the heaviest 3/4 x (N - 1) / N of the
  passing hosts, N live schedulers: three quarters as many as the others own. When every
  other scheduler's host is emptier than its own (a scheduler placing alone while its
  peers are silent, one owning few hosts) that window holds none of its own, and it
  places as a lone scheduler would;
- a fleet too small for its shares to stand for it: fewer than MIN_PASSING x N x
  host_subset_size passing hosts.

Its own hosts may also look fuller than the others' only because it sees its own
placements at once and the others' with their reports: a narrower window sent it to the
others' hosts, racing for them, once it had placed a few (benchmarks/scale_out.py at
1,000 hosts: 45% claim conflicts per placement with 2 schedulers and the 8 heaviest; with
16, 14% with the heaviest quarter and 1.7% with half the others' share; none with this).
"""

import numpy as np

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
    the table's rows) among the heaviest 3/4 x (live - 1) / live of them, or all of them when
    none is, or when the fleet is too small for the preference."""
    if len(rows) < smallest_fleet(live, host_subset_size):
        return rows, weights
    span = len(rows) * (live - 1) * 3 // (4 * live)
    heaviest = np.argpartition(-weights, span - 1)[:span]
    mine = heaviest[owned[rows[heaviest]]]
    if not len(mine):
        return rows, weights
    mine.sort()  # ties in weight still go to the earlier rows
    return rows[mine], weights[mine]
