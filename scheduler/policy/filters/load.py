"""NumInstancesFilter and IoOpsFilter: hosts that are busy enough take no more.

``num_io_ops`` is the instances being built or deleted on the host as its
agent reports them (``io_workload``), plus the placements the scheduler
has made there that the agent has not reported yet.
"""

from oslo_config import cfg

from scheduler.policy import filters

opts = [
    cfg.IntOpt(
        "max_instances_per_host",
        default=50,
        min=1,
        help="NumInstancesFilter: hosts with this many instances (or more) take no more.",
    ),
    cfg.IntOpt(
        "max_io_ops_per_host",
        default=8,
        min=1,
        help="IoOpsFilter: hosts with this many builds and deletes in progress (or more), "
        "the scheduler's own placements not yet reported included, take no more.",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


class NumInstancesFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        self.maximum = conf.filter_scheduler.max_instances_per_host

    def host_passes(self, host_state, spec):
        return host_state.num_instances < self.maximum

    def filter_vector(self, table, rows, spec):
        return table.num_instances[rows] < self.maximum


class IoOpsFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        self.maximum = conf.filter_scheduler.max_io_ops_per_host

    def host_passes(self, host_state, spec):
        return host_state.num_io_ops < self.maximum

    def filter_vector(self, table, rows, spec):
        return table.num_io_ops[rows] < self.maximum
