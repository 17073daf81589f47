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
- a request none of whose owned hosts ranks in the heaviest quarter of the passing hosts
  (a scheduler owning few hosts, or whose own hosts already took more than their part:
  one placing alone while its peer is silent), or whose quarter holds fewer than
  OWNED_SPAN x host_subset_size hosts per live scheduler (a small fleet): it places as
  a lone scheduler would.

Within that quarter its own hosts may look fuller than the others' only because it sees
its own placements at once and the others' with their reports: a narrower window (the few
heaviest) sends it to the others' hosts, racing for them, as soon as it placed a few.
"""

import numpy as np

#: A scheduler takes its own host when it ranks in the heaviest 1 / OWNED_SPAN of the passing
#: hosts, and only when that many hold at least OWNED_SPAN x host_subset_size per live scheduler.
OWNED_SPAN = 4


def smallest_fleet(live, host_subset_size):
    """The fewest passing hosts with which each of ``live`` schedulers prefers its own."""
    return OWNED_SPAN * OWNED_SPAN * live * host_subset_size


def spread_matters(spec, weighers):
    """Whether ``spec`` is weighed on the whole fleet whoever owns the hosts: a server group
    member, a same_host or different_host hint, or a hint one of ``weighers`` reads."""
    if spec.group or spec.same_host_hosts or spec.different_host_hosts:
        return True
    hints = spec.scheduler_hints
    return any(key in hints for weigher in weighers for key in weigher.reads_hints)


def narrow(rows, weights, owned, live, host_subset_size):
    """(rows, weights) to pick from: those of ``rows`` this scheduler owns (``owned``, a mask over
    the table's rows) in the heaviest quarter, or all of them when none is, or when the fleet
    is too small for the preference."""
    if len(rows) < smallest_fleet(live, host_subset_size):
        return rows, weights
    span = len(rows) // OWNED_SPAN
    heaviest = np.argpartition(-weights, span - 1)[:span]
    mine = heaviest[owned[rows[heaviest]]]
    if not len(mine):
        return rows, weights
    mine.sort()  # ties in weight still go to the earlier rows
    return rows[mine], weights[mine]
