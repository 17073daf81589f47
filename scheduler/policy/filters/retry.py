import numpy as np

from scheduler.policy import filters


class RetryFilter(filters.BaseHostFilter):
    """Skip the hosts an instance has already been tried on."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        return [host_state.host, host_state.nodename] not in spec.retry.hosts

    def filter_vector(self, table, rows, spec):
        if not spec.retry.hosts:
            return True
        tried = [table.index[h] for h, node in spec.retry.hosts
                 if h in table.index and table.nodenames[table.index[h]] == node]
        return ~np.isin(table.row_numbers(rows), tried)
