"""AggregateIoOpsFilter and AggregateNumInstancesFilter: IoOpsFilter and NumInstancesFilter per aggregate.

The maximum of a host is its aggregates' ``max_io_ops_per_host`` /
``max_instances_per_host`` metadata, else the ``[filter_scheduler]`` option
of that name (declared with IoOpsFilter and NumInstancesFilter). As Nova's
``validate_num_values(..., cast_to=int)``: the distinct values of the host's
aggregates are read with Python's ``int()`` and the smallest is used; if
any one of them is not a whole number (``2.5``, ``abc``), the option is used.
A host passes while its count is below the maximum.
"""

import numpy as np

from scheduler import aggregates, filters

_CLIP = 10**300


def as_int(text):
    """``int(text)`` as Nova casts aggregate metadata, or None when it raises."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def min_int(values, default):
    """The smallest of ``values`` read as ints; ``default`` when none, or when one is not an int."""
    if not values:
        return default
    numbers = [as_int(v) for v in values]
    if any(n is None for n in numbers):
        return default
    return min(numbers)


def min_int_vector(table, rows, key, default):
    """:func:`min_int` of ``key`` over each row's aggregates, for ``rows``; a scalar when none sets it."""
    index = table.aggregate_index

    def compute():
        with_key = [a for a in index.aggregates if key in a.metadata]
        if not with_key:
            return None
        lowest = np.full(table.size, np.inf)
        invalid = np.zeros(table.size, dtype=bool)
        for aggregate in with_key:
            mask = index.mask(aggregate)
            number = as_int(aggregate.metadata[key])
            if number is None:
                invalid |= mask
            else:
                # Clipped (the counts compared are far smaller): float() of a larger int overflows.
                lowest[mask] = np.minimum(lowest[mask], float(max(-_CLIP, min(number, _CLIP))))
        return np.where(invalid | np.isinf(lowest), float(default), lowest)

    found = index.memo(("min_int", key, default), compute)
    return default if found is None else found[rows]


class _AggregateMaximum(filters.BaseHostFilter):
    """Hosts whose ``column`` count is below their maximum (aggregate metadata ``key``, or the option)."""

    abstract = True
    key = None
    column = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # berth aggregate set-metadata: the option's minimum is 1, so the value must exceed 0.
        cls.aggregate_numbers = {cls.key: 0}

    def maximum(self, host_state):
        values = aggregates.metadata_values(host_state.aggregates, self.key)
        return min_int(values, getattr(self.conf.filter_scheduler, self.key))

    def host_passes(self, host_state, spec):
        return getattr(host_state, self.column) < self.maximum(host_state)

    def filter_vector(self, table, rows, spec):
        default = getattr(self.conf.filter_scheduler, self.key)
        return getattr(table, self.column)[rows] < min_int_vector(table, rows, self.key, default)


class AggregateIoOpsFilter(_AggregateMaximum):
    key = "max_io_ops_per_host"
    column = "num_io_ops"


class AggregateNumInstancesFilter(_AggregateMaximum):
    key = "max_instances_per_host"
    column = "num_instances"
