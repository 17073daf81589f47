"""Host weighers: each ranks the hosts that passed the filters.

A weigher returns a raw weight per host; the pipeline normalizes the raw
weights of one weigher to [0, 1] over the candidates (min-max) and adds
them up, each times the weigher's multiplier. Higher is better.

``weigh(host_state, spec)`` weighs one host; a weigher may also provide
``weigh_vector(table, rows, spec)``, the same weights for many rows of the
HostTable at once as a numpy array, or None when it weighs nothing for this
request (every host the same, which normalizes to 0 anyway): the pipeline
then skips it.
"""

import sys

import numpy as np

from scheduler import aggregates, plugins


class BaseHostWeigher:
    abstract = True
    #: The scheduler hints this weigher reads, and the server group policies it enforces.
    reads_hints = ()
    group_policies = ()
    #: Fixed bounds for normalization; None means the candidates' own min or max.
    minval = None
    maxval = None
    weigh_vector = None
    #: Optional ``tier(host_state, spec) -> int`` / ``tier_vector(table, rows, spec)``:
    #: the selector picks among the best tier (0 best) only, by weight within it.
    tier = None
    tier_vector = None

    def __init__(self, conf):
        self.conf = conf

    @property
    def name(self):
        return type(self).__name__

    #: The option holding the multiplier (in ``multiplier_group``); None: 1.0. A host's
    #: aggregates override it with metadata ``aggregate_key`` (default: the option's
    #: name, e.g. ``ram_weight_multiplier=2.0``), the smallest winning, as Nova's
    #: get_weight_multiplier does.
    multiplier_option = None
    multiplier_group = "filter_scheduler"
    aggregate_key = None
    #: Aggregate metadata read as a number (see BaseHostFilter.aggregate_numbers): the multiplier.
    aggregate_numbers = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        key = cls.aggregate_key or cls.multiplier_option
        cls.aggregate_numbers = {key: None} if key else {}

    def default_multiplier(self):
        if self.multiplier_option is None:
            return 1.0
        return getattr(getattr(self.conf, self.multiplier_group), self.multiplier_option)

    def _aggregate_key(self):
        return self.aggregate_key or self.multiplier_option

    def weight_multiplier(self, host_state):
        default = self.default_multiplier()
        if host_state is None or self.multiplier_option is None:
            return default
        values = aggregates.metadata_values(host_state.aggregates, self._aggregate_key())
        return aggregates.min_number(values, default)

    def multipliers(self, table, rows):
        """The multiplier of every row (a scalar when it is the same for all)."""
        if self.multiplier_option is None:
            return self.weight_multiplier(None)
        return aggregates.min_number_vector(table, rows, self._aggregate_key(), self.default_multiplier())

    def weigh(self, host_state, spec):
        raise NotImplementedError

    def weigh_all(self, hosts, spec):
        return [self.weigh(host, spec) for host in hosts]


def normalize(values, minval=None, maxval=None):
    """Min-max scale to [0, 1]; all-equal weights carry no information and become 0.

    A weigher's fixed ``minval`` / ``maxval`` bound its weights first (a weight
    below ``minval`` counts as ``minval``), as Nova's weigh_objects does.
    """
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return values
    if minval is not None or maxval is not None:
        values = np.clip(values, minval, maxval)
    low = values.min() if minval is None else minval
    high = values.max() if maxval is None else maxval
    if high == low:
        return np.zeros(len(values))
    return (values - low) / float(high - low)


def divide(numerator, denominator, fill):
    """``numerator / denominator`` where the denominator is positive, ``fill`` elsewhere.

    The same as ``np.divide(..., where=denominator > 0)``, which is several times slower.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / denominator, fill)


#: Rows per chunk for :func:`chunked`: a chunk's temporaries stay in the CPU cache.
CHUNK_ROWS = 8192


def chunked(compute, table, rows, *per_row):
    """``compute(rows, *per_row)`` over ``rows`` a chunk at a time, concatenated.

    For element-wise formulas over many columns: the same result as one call
    over every row, several times faster on large fleets. ``per_row`` are
    arrays with one entry per row of ``rows``, cut along with them.
    """
    rows = table.row_numbers(rows)
    if len(rows) <= CHUNK_ROWS:
        return compute(rows, *per_row)
    return np.concatenate([
        compute(rows[i : i + CHUNK_ROWS], *(a[i : i + CHUNK_ROWS] for a in per_row))
        for i in range(0, len(rows), CHUNK_ROWS)
    ])


class Columns(dict):
    """Columns of a HostTable by name, each read by ``read(name)`` when first asked for."""

    def __init__(self, read):
        super().__init__()
        self._read = read

    def __missing__(self, name):
        value = self[name] = self._read(name)
        return value

    @classmethod
    def of_rows(cls, table, rows):
        """The columns of ``table`` at ``rows``."""
        return cls(lambda name: getattr(table, name)[rows])

    @classmethod
    def of_host(cls, host_state):
        """The columns of ``host_state``'s row, as arrays of one."""
        table, row = host_state.table, host_state.row
        return cls(lambda name: getattr(table, "_" + name)[row : row + 1])


def all_weighers():
    return plugins.discover(sys.modules[__name__], BaseHostWeigher, "berth.scheduler.weighers")


def enabled_weighers(conf):
    classes = plugins.load(
        conf.filter_scheduler.weighers, all_weighers(), "weigher", "[filter_scheduler] weighers"
    )
    return [cls(conf) for cls in classes]
