from scheduler import filters


class RetryFilter(filters.BaseHostFilter):
    """Skip the hosts an instance has already been tried on."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        return [host_state.host, host_state.nodename] not in spec.retry.hosts
