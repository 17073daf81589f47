"""AllHostsFilter: every host passes (Nova's no-op filter)."""

from scheduler.policy import filters


class AllHostsFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        return True

    def filter_vector(self, table, rows, spec):
        return True
