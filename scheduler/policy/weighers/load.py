"""Weighers of how busy a host is: IoOpsWeigher, NumInstancesWeigher, BuildFailureWeigher.

- IoOpsWeigher: builds and deletes in progress (``num_io_ops``); the
  default multiplier -1.0 prefers the quietest hosts.
- NumInstancesWeigher: instances on the host; 0.0 by default (off), negative
  spreads by count, positive packs.
- BuildFailureWeigher: builds that failed in a row on the host (the agent
  counts them and resets on a success), weighed negatively: with Nova's
  default multiplier of 1000000.0 a failing host sinks below every healthy one.
"""


from scheduler.policy import weighers

opts = [
    weighers.multiplier_opt("io_ops_weight_multiplier",
                            "IoOpsWeigher: negative prefers hosts with fewer builds and "
                            "deletes in progress, positive prefers the busiest.", default=-1.0),
    weighers.multiplier_opt("num_instances_weight_multiplier",
                            "NumInstancesWeigher: negative prefers hosts with fewer "
                            "instances, positive packs them; 0.0 turns it off.", default=0.0),
    weighers.multiplier_opt("build_failure_weight_multiplier",
                            "BuildFailureWeigher: how hard hosts whose recent builds "
                            "failed sink; large, so that they come after every host "
                            "without failures. 0.0 turns it off.", default=1000000.0),
]


def list_opts():
    return [("filter_scheduler", opts)]


class IoOpsWeigher(weighers.BaseHostWeigher):
    multiplier_option = "io_ops_weight_multiplier"
    minval = 0

    def weigh(self, host_state, spec):
        return host_state.num_io_ops

    def weigh_vector(self, table, rows, spec):
        return table.num_io_ops[rows]


class NumInstancesWeigher(weighers.BaseHostWeigher):
    multiplier_option = "num_instances_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.num_instances

    def weigh_vector(self, table, rows, spec):
        return table.num_instances[rows]


class BuildFailureWeigher(weighers.BaseHostWeigher):
    """Weighs the recent failed builds, times the multiplier negated (Nova's form: with an
    aggregate's multiplier of 0 on some hosts, negating the weight instead would differ)."""

    multiplier_option = "build_failure_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.failed_builds

    def weigh_vector(self, table, rows, spec):
        return table.failed_builds[rows]

    def weight_multiplier(self, host_state):
        return -super().weight_multiplier(host_state)

    def multipliers(self, table, rows):
        return -super().multipliers(table, rows)
