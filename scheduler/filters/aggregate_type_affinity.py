"""AggregateTypeAffinityFilter: aggregates that name flavors take only those flavors.

A host in an aggregate with ``instance_type`` metadata (flavor names,
comma-separated, spaces around each ignored) takes a flavor only if one of
its aggregates names it; a host in no such aggregate takes any flavor. As
Nova's, the values of all the host's aggregates count: a host in two
aggregates naming ``m1.small`` and ``m1.large`` takes both. A flavor with no
name matches no aggregate that names flavors.
"""

import numpy as np

from scheduler import aggregates, filters

KEY = "instance_type"


class AggregateTypeAffinityFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        values = aggregates.metadata_values(host_state.aggregates, KEY)
        if not values:
            return True
        return any(spec.flavor.name in aggregates.pieces(value) for value in values)

    def filter_vector(self, table, rows, spec):
        index = table.aggregate_index
        name = spec.flavor.name

        def compute():
            named = [a for a in index.aggregates if KEY in a.metadata]
            if not named:
                return None
            restricted = np.zeros(table.size, dtype=bool)
            allowed = np.zeros(table.size, dtype=bool)
            for aggregate in named:
                mask = index.mask(aggregate)
                restricted |= mask
                if name in aggregates.pieces(aggregate.metadata[KEY]):
                    allowed |= mask
            return ~restricted | allowed

        found = index.memo((KEY, name), compute)
        return True if found is None else found[rows]
