"""MetricsFilter: hosts must report every metric named in ``[metrics] weight_setting`` (as Nova's).

Whatever ``[metrics] required`` says: that option tells MetricsWeigher what to do
with a host missing a metric; this filter is how an operator keeps such hosts out.
"""

import numpy as np

from scheduler.policy import filters
from scheduler.policy.weighers.metrics import parse_setting


class MetricsFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def __init__(self, conf):
        super().__init__(conf)
        self.names = {name for name, _ratio in parse_setting(conf.metrics.weight_setting)}

    def host_passes(self, host_state, spec):
        return self.names <= set(host_state.metrics)

    def filter_vector(self, table, rows, spec):
        if not self.names:
            return True
        passed = True
        for name in self.names:
            values = table.metric(name)
            if values is None:
                return False
            passed = passed & ~np.isnan(values[rows])
        return passed
