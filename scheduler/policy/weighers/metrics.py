"""MetricsWeigher: a weighted sum of the metrics the agents report.

``[metrics] weight_setting = cpu.percent=-1.0, memory.used_mb=1.0`` weighs
each host by ``sum(ratio * metric)`` over the ``metrics`` of its last
report. A host lacking one of the metrics weighs ``weight_of_unavailable``
(a very low weight: last), unless that metric's ratio (or the multiplier) is
0. With ``required`` the MetricsFilter should run too, so that such hosts
are removed rather than ranked last.
"""

import logging

import numpy as np
from oslo_config import cfg

from scheduler.policy import weighers

LOG = logging.getLogger(__name__)

opts = [
    weighers.multiplier_opt("weight_multiplier",
                            "MetricsWeigher: multiplier of the metrics' weight. Aggregates override it "
                            "with metadata metrics_weight_multiplier."),
    cfg.ListOpt(
        "weight_setting",
        default=[],
        help="MetricsWeigher: name=ratio pairs, e.g. 'cpu.percent=-1.0, memory.used_mb=1.0'; "
        "a host weighs the sum of ratio * metric over these metrics.",
    ),
    cfg.BoolOpt(
        "required",
        default=True,
        help="Whether every metric of weight_setting is required: MetricsFilter removes the "
        "hosts lacking one. Without the filter, such hosts weigh weight_of_unavailable.",
    ),
    cfg.FloatOpt(
        "weight_of_unavailable",
        default=-10000.0,
        help="MetricsWeigher: the weight of a host that lacks one of the metrics of weight_setting.",
    ),
]


def list_opts():
    return [("metrics", opts)]


def parse_setting(entries):
    """[(metric, ratio)] from 'name=ratio' entries; malformed entries are logged and skipped."""
    setting = []
    for entry in entries:
        name, sep, ratio = entry.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError(entry)
            setting.append((name.strip(), float(ratio)))
        except ValueError:
            LOG.warning("[metrics] weight_setting: ignoring %r (not name=number)", entry)
    return setting


class MetricsWeigher(weighers.BaseHostWeigher):
    multiplier_option = "weight_multiplier"
    multiplier_group = "metrics"
    aggregate_key = "metrics_weight_multiplier"

    def __init__(self, conf):
        super().__init__(conf)
        self.setting = parse_setting(conf.metrics.weight_setting)
        self.unavailable = conf.metrics.weight_of_unavailable

    def _weight(self, metrics, multiplier):
        value = 0.0
        for name, ratio in self.setting:
            metric = metrics.get(name)
            if metric is None:
                if ratio * multiplier != 0:
                    return self.unavailable
                continue
            value += metric * ratio
        return value

    def weigh(self, host_state, spec):
        return self._weight(host_state.metrics, self.weight_multiplier(host_state))

    def weigh_vector(self, table, rows, spec):
        n = len(table.row_numbers(rows))
        multipliers = self.multipliers(table, rows)
        value = np.zeros(n)
        unavailable = np.zeros(n, dtype=bool)
        for name, ratio in self.setting:
            metric = table.metric(name)
            missing = np.ones(n, dtype=bool) if metric is None else np.isnan(metric[rows])
            unavailable |= missing & (ratio * multipliers != 0)
            if metric is not None:
                value += np.where(missing, 0.0, metric[rows] * ratio)
        return np.where(unavailable, self.unavailable, value)
