"""AggregateTypeAffinityFilter: aggregates that name flavors take only those flavors.

A host in an aggregate with ``instance_type`` metadata (flavor names,
comma-separated, spaces around each ignored) takes a flavor only if one of
its aggregates names it; a host in no such aggregate takes any flavor. As
Nova's, the values of all the host's aggregates count: a host in two
aggregates naming ``m1.small`` and ``m1.large`` takes both. A flavor with no
name matches no aggregate that names flavors.
"""

from scheduler.policy import aggregates, filters

KEY = "instance_type"


class AggregateTypeAffinityFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        values = aggregates.metadata_values(host_state.aggregates, KEY)
        if not values:
            return True
        return any(spec.flavor.name in aggregates.pieces(value) for value in values)

    def filter_vector(self, table, rows, spec):
        name = spec.flavor.name
        return aggregates.admitted_rows(table, rows, (KEY, name), lambda a: KEY in a.metadata,
                                        lambda a: name in aggregates.pieces(a.metadata[KEY]))
