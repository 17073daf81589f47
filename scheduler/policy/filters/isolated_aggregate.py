"""IsolatedAggregateFilter: hosts of an aggregate that requires traits take only the requests
that require them too (Nova's ``[scheduler] enable_isolated_aggregate_filtering``).

Opt-in, as Nova's option is: add it to ``[filter_scheduler] enabled_filters``.
An aggregate's metadata ``trait:NAME=required`` keeps its hosts for the requests
whose required traits (their flavor's and image's) include NAME; a host in
several such aggregates takes only the requests that require all of their
traits. ``berth aggregate set-metadata`` refuses any other ``trait:`` entry;
one set before it did (a value other than ``required``, a name that is not a
trait) keeps its aggregate's hosts from taking any request, rather than
opening them to every request.
"""

from berth_contract import traits
from scheduler.exception import InvalidRequest
from scheduler.policy import aggregates as aggregates_mod
from scheduler.policy import filters

#: What an aggregate with a malformed ``trait:`` entry requires: no request can have it.
_UNMET = frozenset({None})


def required_by(aggregate):
    """The traits ``aggregate`` requires of the requests its hosts take."""
    try:
        return traits.of_aggregate(aggregate.metadata, f"aggregate {aggregate.name} metadata")
    except InvalidRequest:
        return _UNMET


class IsolatedAggregateFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        required = spec.required_traits
        return all(required_by(a) <= required for a in host_state.aggregates)

    def filter_vector(self, table, rows, spec):
        required = spec.required_traits

        def compute(index):
            isolating = [a for a in index.aggregates if required_by(a)]
            if not isolating:
                return None
            return ~index.rows_in(a for a in isolating if not required_by(a) <= required)

        return aggregates_mod.cached_rows(table, rows, ("isolated_aggregate", required), compute)
