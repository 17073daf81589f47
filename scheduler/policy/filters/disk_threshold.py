"""Red and yellow thresholds on free disk (VMware Cloud Director's datastore thresholds).

A host passes a threshold when its free disk is strictly above it, whatever
the instance's own size (as Cloud Director's datastore thresholds do). Below
or at the red threshold the host is filtered out; below or at the yellow one
it passes but ranks in a later tier, used only when no host above the yellow
threshold is left. A threshold is in bytes (``50GB``, ``512MiB``, ``1T``,
``1073741824``; K/M/G/T are powers of 1024, like the GiB the agents report)
or in percent of the host's total disk (``10%``); ``0`` disables it.

Berth's reading, not Cloud Director's letter, on two points. Cloud Director
applies the yellow threshold to its background job that copies templates
for fast provisioning, and also says that yellow clusters get lower
preference; Berth has no such job and takes the second reading for every
placement. And a threshold of 0 is off here, where "free space above 0"
would still drop a host with no free disk (DiskFilter decides whether the
instance fits).
"""

import re

import numpy as np
from oslo_config import cfg

from scheduler.policy import filters, weighers

opts = [
    cfg.StrOpt(
        "disk_red_threshold",
        default="0",
        help="DiskThresholdFilter: hosts whose free disk is not above this are filtered "
        "out. Bytes with an optional unit (50GB, 512MiB, 1T: powers of 1024) or percent "
        "of the host's disk (10%). 0 disables it.",
    ),
    cfg.StrOpt(
        "disk_yellow_threshold",
        default="0",
        help="DiskThresholdFilter: hosts whose free disk is not above this still pass "
        "but rank behind every host above it. Same units as disk_red_threshold; 0 "
        "disables it.",
    ),
]

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%|[kmgtp]?(?:i?b)?)\s*$", re.IGNORECASE)
GIB = 2**30
GREEN, YELLOW = 0, 1


def list_opts():
    return [("filter_scheduler", opts)]


def parse_threshold(value, option="threshold"):
    """``(amount, is_percent)``: bytes, or a percentage; ValueError naming ``option``."""
    match = _THRESHOLD.match(str(value))
    if not match:
        raise ValueError(
            f"[filter_scheduler] {option}: {value!r} is neither bytes (50GB) nor a percentage (10%)"
        )
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit == "%":
        if number > 100:
            raise ValueError(f"[filter_scheduler] {option}: {value!r} is more than 100%")
        return number, True
    return number * _UNITS[unit[:1] if unit[:1] in "kmgtp" else ""], False


def _above(threshold, free_gb, total_gb):
    """Whether free disk is strictly above ``threshold`` (arrays or scalars)."""
    amount, percent = threshold
    if not amount:
        return np.ones(np.shape(free_gb), dtype=bool)
    if percent:
        # A host that reports no disk at all has no percentage to fall short of.
        share = weighers.divide(free_gb * 100.0, total_gb, np.inf)
        return share > amount
    return free_gb * GIB > amount


class DiskThresholdFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        opts = conf.filter_scheduler
        self.red = parse_threshold(opts.disk_red_threshold, "disk_red_threshold")
        self.yellow = parse_threshold(opts.disk_yellow_threshold, "disk_yellow_threshold")

    @staticmethod
    def _host(host_state):
        table, row = host_state.table, host_state.row
        return table._free_disk_gb[row : row + 1], table._total_disk_gb[row : row + 1]

    def host_passes(self, host_state, spec):
        return bool(_above(self.red, *self._host(host_state))[0])

    def filter_vector(self, table, rows, spec):
        return _above(self.red, table.free_disk_gb[rows], table.total_disk_gb[rows])

    def tier(self, host_state, spec):
        return GREEN if _above(self.yellow, *self._host(host_state))[0] else YELLOW

    def tier_vector(self, table, rows, spec):
        above = _above(self.yellow, table.free_disk_gb[rows], table.total_disk_gb[rows])
        return np.where(above, GREEN, YELLOW).astype(np.int64)
