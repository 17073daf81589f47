"""HypervisorVersionWeigher: newer hypervisors first (Nova's, on in Nova by default).

The weight is the reported ``hypervisor_version`` (0 when none), so that
upgraded hosts take new instances first; a negative multiplier prefers older.
"""

import numpy as np

from scheduler.policy import weighers

opts = [
    weighers.multiplier_opt("hypervisor_version_weight_multiplier",
                            "HypervisorVersionWeigher: how strongly newer hypervisors are preferred "
                            "(negative: older ones)."),
]


def list_opts():
    return [("filter_scheduler", opts)]


class HypervisorVersionWeigher(weighers.BaseHostWeigher):
    multiplier_option = "hypervisor_version_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.hypervisor_version or 0

    def weigh_vector(self, table, rows, spec):
        return np.nan_to_num(table.hypervisor_version[rows], nan=0.0)
