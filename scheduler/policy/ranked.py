"""The pick of a request that one column of the host table ranks: found among the hosts with
the most of it, without filtering the whole fleet.

When the only weigher that weighs a request ranks hosts by a column of the table (its
``ranks_by``: RAMWeigher's free RAM), from a fixed lower bound (``minval``) and with one
positive multiplier for every host, a host's weight never falls as its value of the column
rises: the ``host_subset_size`` heaviest hosts that pass the filters are among those with the
most of it. The filters then run on the rows at or above a threshold (at first the ``BATCH``
with the most; then the value of the ``PASSING`` x ``host_subset_size``-th passing host of the
decision before), and the pick is made among those that pass, as the whole fleet's would be made,
once no host below the threshold can weigh as much as the lightest of the subset: the same
host, the same random draw. Where the lightest weighs what a host at the threshold would (many
hosts of one value: a fleet of equal hosts), the greatest value below the threshold tells. When
that cannot be shown (too few passed, a host below as heavy), a batch four times larger is
looked at, and after ``LOOKS`` of them the whole fleet is filtered after all (Selector.select).
A fleet of fewer than ``MIN_HOSTS`` is filtered whole at once.

A filter's answer for a host depends on that host alone (``host_passes``), so the batch's
answers are those the whole fleet's filtering gives its rows.
"""

import numpy as np

from scheduler.policy import weighers as weighers_mod

#: Rows the first look takes: those at or above a threshold that held about this many.
BATCH = 64
#: Looks, each at four times the rows of the one before, before the whole fleet is filtered.
LOOKS = 4
#: Hosts below which the whole fleet is filtered: its few passes over the whole table cost less
#: than the looks' (one random decision at 1,000 hosts: 72 us filtering the whole fleet, 119 us
#: ranked; alike at 2,000; ranked the cheaper from 2,500: 102 against 120 us).
MIN_HOSTS = 2_000
#: Passing hosts per host_subset_size that the next decision's first batch keeps.
PASSING = 8


def ranking(weighers, table, spec):
    """(the weigher that alone weighs ``spec`` by a column, its multiplier), or None when the
    weights are not one column's order: another weigher weighs the request, a weigher cannot
    say that it does not, the lower bound is the candidates' own, or the aggregates give hosts
    different multipliers (or a multiplier that is not positive)."""
    ranker = None
    for weigher in weighers:
        if weigher.ranks_by is not None and ranker is None:
            ranker = weigher
        elif weigher.idle is None or not weigher.idle(spec):
            return None
    if ranker is None or ranker.minval is None:
        return None
    multiplier = ranker.multipliers(table, slice(0, 0))
    if not isinstance(multiplier, float) or not multiplier > 0:  # an array: the aggregates set some
        return None
    return ranker, multiplier


def in_order(weigher, table, rows, spec):
    """Weights of ``rows`` in the order, ties included, of those Selector.weigh gives them when
    ``weigher`` alone weighs ``spec`` by a column (ranking()): its raw weights held within its
    bounds, as normalize() holds them. The scaling from the lower bound and the one positive
    multiplier keep that order, and Selector.pick reads nothing else of the weights."""
    return weighers_mod.bounded(weigher.weigh_vector(table, rows, spec), weigher.minval, weigher.maxval)


class Thresholds:
    """Per column, the threshold the last decision's batch began at: the next one looks at the
    rows at or above it (their values change a little from one decision to the next)."""

    def __init__(self):
        self._of = {}

    def pick(self, selector, table, spec, weigher, multiplier):
        """(the row ``selector.pick`` would choose among the candidates of ``table`` for ``spec``
        (selection.candidates: not disabled, not ignored, none forced) that pass the filters, the
        rows the filters ran on, those that passed), or None when the batches looked at cannot
        show which it is."""
        values = getattr(table, weigher.ranks_by)
        count = len(values)
        ignored = [table.index[h] for h in spec.ignore_hosts if h in table.index]
        size = selector.host_subset_size
        threshold = self._of.pop(weigher.ranks_by, None)
        wanted = BATCH
        for _ in range(LOOKS):
            if threshold is None:
                threshold = -np.inf if wanted >= count else _at_rank(values, wanted)
            inside = values >= threshold
            at = inside.nonzero()[0]
            passing = selector.passing(table, _candidates(table, at, ignored), spec)
            if len(passing) >= size:
                raw = weigher.weigh_vector(table, passing, spec)
                weights, bound = _weights(weigher, multiplier, raw, threshold)
                lightest = _at_rank(weights, size)
                if bound < lightest or threshold == -np.inf or _lighter_below(
                        weigher, multiplier, raw, values[~inside], lightest):
                    self._of[weigher.ranks_by] = _next(raw, size, threshold)
                    return selector.pick(passing, weights), len(at), len(passing)
            if threshold == -np.inf:
                return None
            threshold, wanted = None, max(wanted, len(at)) * 4
        return None


def _lighter_below(weigher, multiplier, raw, below, lightest):
    """Whether every row left out of the batch (``below``: their values, all under the threshold)
    weighs less than ``lightest``, the subset's lightest, when that weighs what a host at the
    threshold would (hosts tied at it, as many are in a fleet of equal hosts): told by the
    greatest of them, which no other outweighs, weighed on the scale of the batch's (set by its
    heaviest). True when every row is in the batch."""
    if not len(below):
        return True
    _, bound = _weights(weigher, multiplier, raw.max(keepdims=True), below.max())
    return bound < lightest


def _candidates(table, rows, ignored):
    """The rows of ``rows`` that are neither disabled nor of ``ignored``, in order."""
    disabled = table.disabled[rows]
    if disabled.any():
        rows = rows[~disabled]
    return rows[~np.isin(rows, ignored)] if ignored else rows


def _next(passing_values, size, threshold):
    """The threshold for the next decision: as high as keeps PASSING x ``size`` of this one's
    passing hosts (``passing_values``, their values of the column) in its batch."""
    keep = PASSING * size
    return threshold if len(passing_values) <= keep else _at_rank(passing_values, keep)


def _at_rank(values, rank):
    """The ``rank``-th greatest of ``values`` (1: the greatest), the least when they are fewer."""
    if rank >= len(values):
        return values.min()
    return np.partition(values, len(values) - rank)[len(values) - rank]


def _weights(weigher, multiplier, raw, threshold):
    """(the weights Selector.weigh gives the hosts of raw weights ``raw``, the weight of a host at
    ``threshold``): normalized with the passing hosts' greatest value, which is in ``raw``."""
    scaled = weighers_mod.normalize(np.concatenate([raw, [threshold]]), weigher.minval, weigher.maxval)
    if multiplier != 1.0:
        scaled = multiplier * scaled
    return scaled[:-1], scaled[-1]
