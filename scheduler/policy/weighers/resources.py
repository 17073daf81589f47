"""DiskWeigher and CPUWeigher: free disk and free vCPUs (RAMWeigher is in ram.py).

Positive multipliers spread instances onto the hosts with the most free
room, negative ones stack them onto the fullest. Free vCPUs are
``vcpus_total * cpu_allocation_ratio - vcpus_used``, negative when overcommitted.
"""


from scheduler.conf import filter_scheduler
from scheduler.policy import weighers

opts = [
    weighers.multiplier_opt("disk_weight_multiplier",
                            "DiskWeigher: positive spreads instances onto the hosts with the most free "
                            "disk, negative stacks them onto the fullest."),
    weighers.multiplier_opt("cpu_weight_multiplier",
                            "CPUWeigher: positive spreads instances onto the hosts with the most free "
                            "vCPUs (under cpu_allocation_ratio), negative stacks them."),
]


def list_opts():
    return [("filter_scheduler", opts)]


class DiskWeigher(weighers.BaseHostWeigher):
    multiplier_option = "disk_weight_multiplier"
    minval = 0  # as Nova: scaled from 0, not from the least free host
    ranks_by = "free_disk_gb"

    def weigh(self, host_state, spec):
        return host_state.free_disk_gb

    def weigh_vector(self, table, rows, spec):
        return table.free_disk_gb[rows]


class CPUWeigher(weighers.BaseHostWeigher):
    multiplier_option = "cpu_weight_multiplier"
    minval = 0

    def weigh(self, host_state, spec):
        ratio = filter_scheduler.allocation_ratio(self.conf, "cpu")
        return host_state.vcpus_total * ratio - host_state.vcpus_used

    def weigh_vector(self, table, rows, spec):
        ratio = filter_scheduler.allocation_ratio(self.conf, "cpu")
        return table.vcpus_total[rows] * ratio - table.vcpus_used[rows]
