import time

from scheduler import filters


class ComputeFilter(filters.BaseHostFilter):
    """Pass hosts whose agent is enabled and has reported within service_down_time."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        if host_state.disabled or host_state.updated is None:
            return False
        return time.monotonic() - host_state.updated <= self.conf.scheduler.service_down_time
