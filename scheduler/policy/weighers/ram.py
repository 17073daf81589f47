
from scheduler.policy import weighers

opts = [
    weighers.multiplier_opt("ram_weight_multiplier",
                            "RAMWeigher: positive spreads instances onto the hosts with the most free RAM, "
                            "negative stacks them onto the fullest."),
]


def list_opts():
    return [("filter_scheduler", opts)]


class RAMWeigher(weighers.BaseHostWeigher):
    multiplier_option = "ram_weight_multiplier"
    minval = 0  # as Nova: scaled from 0, not from the least free host
    ranks_by = "free_ram_mb"

    def weigh(self, host_state, spec):
        return host_state.free_ram_mb

    def weigh_vector(self, table, rows, spec):
        return table.free_ram_mb[rows]
