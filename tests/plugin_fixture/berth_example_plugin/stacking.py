"""StackingWeigher: fill the fullest hosts first (a negative multiplier spreads instead).

Its module has list_opts() and no register_opts(): Berth registers what list_opts gives.
"""

from scheduler.policy import weighers

opts = [
    weighers.multiplier_opt("stacking_weight_multiplier",
                            "StackingWeigher: positive stacks instances onto the hosts with the least "
                            "free RAM, negative spreads them."),
]


def list_opts():
    return [("example_plugin", opts)]


class StackingWeigher(weighers.BaseHostWeigher):
    multiplier_option = "stacking_weight_multiplier"
    multiplier_group = "example_plugin"

    def weigh(self, host_state, spec):
        return -host_state.free_ram_mb
