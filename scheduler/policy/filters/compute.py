import time

from scheduler.policy import filters


class ComputeFilter(filters.BaseHostFilter):
    """Pass hosts whose agent is enabled and has reported within service_down_time."""

    run_filter_once_per_request = True

    def __init__(self, conf):
        super().__init__(conf)
        self.down_time = conf.scheduler.service_down_time

    # The table's clock: the daemon's monotonic clock, or a simulation's (berth simulate).
    def host_passes(self, host_state, spec):
        if host_state.disabled or host_state.updated is None:
            return False
        table = getattr(host_state, "table", None)
        now = table.clock() if table is not None else time.monotonic()
        return now - host_state.updated <= self.down_time

    def filter_vector(self, table, rows, spec):
        fresh = table.clock() - table.updated[rows] <= self.down_time
        return fresh & ~table.disabled[rows]
