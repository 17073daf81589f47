"""AggregateIoOpsFilter and AggregateNumInstancesFilter: IoOpsFilter and NumInstancesFilter per aggregate.

The maximum of a host is its aggregates' ``max_io_ops_per_host`` /
``max_instances_per_host`` metadata, else the ``[filter_scheduler]`` option
of that name (declared with IoOpsFilter and NumInstancesFilter). As Nova's
``validate_num_values(..., cast_to=int)``: the distinct values of the host's
aggregates are read with Python's ``int()`` and the smallest is used; if
any one of them is not a whole number (``2.5``, ``abc``), the option is used.
A host passes while its count is below the maximum.
"""


from scheduler.policy import aggregates, filters


def as_int(text):
    """``int(text)`` as Nova casts aggregate metadata, or None when it raises."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


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
        return aggregates.min_number(values, getattr(self.conf.filter_scheduler, self.key), parse=as_int)

    def host_passes(self, host_state, spec):
        return getattr(host_state, self.column) < self.maximum(host_state)

    def filter_vector(self, table, rows, spec):
        default = getattr(self.conf.filter_scheduler, self.key)
        maximum = aggregates.min_number_vector(table, rows, self.key, default, parse=as_int)
        return getattr(table, self.column)[rows] < maximum


class AggregateIoOpsFilter(_AggregateMaximum):
    key = "max_io_ops_per_host"
    column = "num_io_ops"


class AggregateNumInstancesFilter(_AggregateMaximum):
    key = "max_instances_per_host"
    column = "num_instances"
