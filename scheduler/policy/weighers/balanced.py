"""CloudStack's balanced weighting (its ``balancedweighted`` allocator proposal).

Each host gets a score in [0, 1], lower is better; every term is clamped to
[0, 1]::

    cpu_alloc = vcpus_used / (vcpus_total * cpu_allocation_ratio)
    mem_alloc = (total - free RAM) / (total RAM * ram_allocation_ratio)
    cpu_util, mem_util = moving averages of the measured load (scheduler.policy.host_load)
    vm_count = instances / expected_vms_per_host
    recent   = placements made on the host within recent_window / expected_vms_per_host
    mean     = sum(w_i * term_i) / sum(w_i)       # negative weights count as 0
    dominant = max(cpu_alloc, cpu_util, mem_alloc, mem_util)
    score    = (mean + w_dom * dominant) / (1 + w_dom)

A host without a usable (fresh) sample leaves both ``used`` terms out of the
mean and the dominant term. A host that reports no CPUs (or no memory)
counts as fully allocated on it, ``alloc = 1``, the worst the term can be:
left at 0 it would look idle and draw every placement. The weight is
``1 - score``.

Tiers: healthy 0, unmeasured 1, held back 2 (measured with cpu_util above
its threshold or mem_util above its threshold): the selector uses a tier
only when no better one has a host.

Selection, as CloudStack's: the first N healthy hosts in score order are
shuffled, every other host follows in order (healthy, then unmeasured, then
held back), and the first that fits is taken. ``spread_rows`` names those N
(N: the selector's host_subset_size, at least ``balanced_selection_spread``)
among the hosts the request may use at all (the selector passes the hosts
that pass the filters run once per request, such as ComputeFilter and
AvailabilityZoneFilter); the selector picks at random among those of them
that pass every filter, and takes the best host when none does. So the
pick is random only among the best healthy hosts: when the two best do not
fit, the third is taken, and among unmeasured or held-back hosts the best.
"""

import numpy as np
from oslo_config import cfg

from scheduler.conf import filter_scheduler
from scheduler.policy import host_load, selection, weighers
from scheduler.policy.weighers import Columns

opts = [
    weighers.multiplier_opt("balanced_weight_multiplier",
                            "BalancedWeigher: multiplier of its weight (1 - score); positive prefers the "
                            "least loaded hosts."),
    cfg.FloatOpt(
        "balanced_cpu_allocated_weight",
        default=1.0,
        help="BalancedWeigher: weight of allocated CPU (of vcpus * cpu_allocation_ratio) "
        "in the mean. Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_memory_allocated_weight",
        default=1.0,
        help="BalancedWeigher: weight of allocated memory (of RAM * ram_allocation_ratio) "
        "in the mean. Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_cpu_used_weight",
        default=2.0,
        help="BalancedWeigher: weight of the measured CPU utilisation (moving average, "
        "fraction of real cores). Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_memory_used_weight",
        default=2.0,
        help="BalancedWeigher: weight of the measured memory in use (moving average, "
        "fraction of real memory). Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_vm_count_weight",
        default=1.0,
        help="BalancedWeigher: weight of the instance count (of expected_vms_per_host). "
        "Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_recent_starts_weight",
        default=2.0,
        help="BalancedWeigher: weight of the placements made on the host within "
        "balanced_recent_window (of expected_vms_per_host). Negative counts as 0.",
    ),
    cfg.FloatOpt(
        "balanced_dominant_weight",
        default=1.0,
        help="BalancedWeigher: weight of the dominant term, the largest of allocated "
        "and measured CPU and memory, added to the mean. Negative counts as 0.",
    ),
    cfg.IntOpt(
        "balanced_expected_vms_per_host",
        default=50,
        min=1,
        help="BalancedWeigher: instance count at which the vm_count and recent terms reach 1.",
    ),
    cfg.FloatOpt(
        "balanced_recent_window",
        default=300.0,
        min=0.0,
        max=host_load.STARTS_HORIZON,
        help="BalancedWeigher: seconds during which a placement counts as a recent start.",
    ),
    cfg.FloatOpt(
        "balanced_cpu_util_threshold",
        default=0.85,
        min=0.0,
        help="BalancedWeigher: hosts whose measured CPU utilisation is above this are "
        "held back, used only when no other host fits.",
    ),
    cfg.FloatOpt(
        "balanced_memory_util_threshold",
        default=0.90,
        min=0.0,
        help="BalancedWeigher: hosts whose measured memory in use is above this are held "
        "back, used only when no other host fits.",
    ),
    cfg.IntOpt(
        "balanced_selection_spread",
        default=3,
        min=1,
        help="BalancedWeigher: the instance goes to a host chosen at random among those of "
        "this many best healthy hosts that fit (the selector uses the larger of this and "
        "host_subset_size), so that concurrent requests do not all pick the same host. When "
        "none of them fits, the best host that fits is taken.",
    ),
    cfg.FloatOpt(
        "load_half_life",
        default=host_load.DEFAULT_HALF_LIFE,
        min=0.0,
        help="Half-life (seconds) of the moving average of the load the agents measure; "
        "the average weighs samples by the time elapsed between them.",
    ),
    cfg.FloatOpt(
        "load_stale_after",
        default=host_load.DEFAULT_STALE_AFTER,
        min=0.0,
        help="Seconds after its last new load sample a host counts as unmeasured "
        "(BalancedWeigher ranks it behind measured hosts).",
    ),
]

HEALTHY, UNMEASURED, HELD_BACK = range(3)

#: What the score weighs, each by its option balanced_<name>_weight.
WEIGHTS = ("cpu_allocated", "memory_allocated", "cpu_used", "memory_used", "vm_count", "recent_starts",
           "dominant")


def list_opts():
    return [("filter_scheduler", opts)]


class BalancedWeigher(weighers.BaseHostWeigher):
    def __init__(self, conf):
        super().__init__(conf)
        o = conf.filter_scheduler
        self.w = {name: max(0.0, getattr(o, f"balanced_{name}_weight")) for name in WEIGHTS}
        self.expected = float(o.balanced_expected_vms_per_host)
        self.window = o.balanced_recent_window
        self.cpu_threshold = o.balanced_cpu_util_threshold
        self.mem_threshold = o.balanced_memory_util_threshold
        self.stale_after = o.load_stale_after
        self.cpu_ratio = filter_scheduler.allocation_ratio(conf, "cpu")
        self.ram_ratio = filter_scheduler.allocation_ratio(conf, "ram")
        #: The selector's host_subset_size is at least this: the size of ``spread_rows``.
        self.subset_size = o.balanced_selection_spread

    def weight_multiplier(self, host_state):
        return self.conf.filter_scheduler.balanced_weight_multiplier

    # -- the formulas, over arrays (the per-host form passes arrays of one) --

    def _measured(self, c, now):
        return host_load.measured(c["util_measured"], c["util_at"], now, self.stale_after)

    def scores(self, c, recent, now):
        """The score (lower is better) of each host of the columns ``c``."""
        cpu_alloc = _fraction(c["vcpus_used"], c["vcpus_total"] * self.cpu_ratio)
        mem_alloc = _fraction(c["total_ram_mb"] - c["free_ram_mb"], c["total_ram_mb"] * self.ram_ratio)
        cpu_util = np.clip(c["cpu_util"], 0.0, 1.0)
        mem_util = np.clip(c["mem_util"], 0.0, 1.0)
        vm_count = np.clip(c["num_instances"] / self.expected, 0.0, 1.0)
        recent = np.clip(recent / self.expected, 0.0, 1.0)
        measured = self._measured(c, now)
        w = self.w
        used = np.where(measured, w["cpu_used"] * cpu_util + w["memory_used"] * mem_util, 0.0)
        total = (
            w["cpu_allocated"] * cpu_alloc
            + w["memory_allocated"] * mem_alloc
            + w["vm_count"] * vm_count
            + w["recent_starts"] * recent
            + used
        )
        weights = (
            w["cpu_allocated"]
            + w["memory_allocated"]
            + w["vm_count"]
            + w["recent_starts"]
            + np.where(measured, w["cpu_used"] + w["memory_used"], 0.0)
        )
        mean = weighers.divide(total, weights, 0.0)
        dominant = np.maximum(cpu_alloc, mem_alloc)
        dominant = np.where(measured, np.maximum(dominant, np.maximum(cpu_util, mem_util)), dominant)
        return (mean + w["dominant"] * dominant) / (1.0 + w["dominant"])

    def tiers(self, c, now):
        measured = self._measured(c, now)
        busy = (c["cpu_util"] > self.cpu_threshold) | (c["mem_util"] > self.mem_threshold)
        return np.where(measured, np.where(busy, HELD_BACK, HEALTHY), UNMEASURED).astype(np.int64)

    # -- the plugin API --

    def weigh(self, host_state, spec):
        now = host_state.table.clock()
        recent = np.array([host_state.recent_starts(self.window, now)], dtype=np.float64)
        return float(1.0 - self.scores(Columns.of_host(host_state), recent, now)[0])

    def weigh_vector(self, table, rows, spec):
        now = table.clock()
        recent = host_load.recent_starts(table, rows, self.window, now)
        return weighers.chunked(
            lambda part, recent: 1.0 - self.scores(Columns.of_rows(table, part), recent, now),
            table, rows, recent,
        )

    def tier(self, host_state, spec):
        return int(self.tiers(Columns.of_host(host_state), host_state.table.clock())[0])

    def tier_vector(self, table, rows, spec):
        now = table.clock()
        return weighers.chunked(lambda part: self.tiers(Columns.of_rows(table, part), now), table, rows)

    def spread_rows(self, table, rows, spec, size):
        """The first ``size`` healthy rows of ``rows`` in score order: those CloudStack shuffles.

        The selector picks at random among those of them that pass its
        filters, and takes the heaviest host when none does. Ties keep the
        earlier rows.
        """
        now = table.clock()
        rows = table.row_numbers(rows)
        multiplier = self.conf.filter_scheduler.balanced_weight_multiplier

        def ranked(part, recent):  # the weight times the multiplier; -inf for hosts not healthy
            c = Columns.of_rows(table, part)
            weight = multiplier * (1.0 - self.scores(c, recent, now))
            return np.where(self.tiers(c, now) == HEALTHY, weight, -np.inf)

        recent = host_load.recent_starts(table, rows, self.window, now)
        order = weighers.chunked(ranked, table, rows, recent)
        first = selection.top(order, min(size, len(rows))) if len(rows) else np.empty(0, dtype=np.intp)
        return rows[first[order[first] > -np.inf]]


def _fraction(used, capacity):
    """used / capacity clamped to [0, 1]; 1 (full) where the host reports no capacity."""
    return np.clip(weighers.divide(used, capacity, 1.0), 0.0, 1.0)
