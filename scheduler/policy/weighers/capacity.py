"""VMware Cloud Director's capacity ranking, as its placement engine documents it.

For CPU, memory and storage, with ``unreserved = total * allocation_ratio -
reserved`` (reserved: the agent's ``*_reserved`` figure, else what is
allocated) and ``requirement`` the flavor's size::

    capacityScore       = (unreserved - burst * burst_ratio) / requirement
    futureCapacityScore = (unreserved - undeployed_reservation * future_deploy_ratio) / requirement
    reservationScore    = unreserved / requirement   # stands in for either when its figure is missing
    weighted            = capacityScore * current_score_weight
                          + futureCapacityScore * (1 - current_score_weight)

Storage has no burst: all three are ``usable free disk / requirement``. The
weight of a host is its most constrained resource, the minimum of the three
weighted scores (a resource the flavor does not ask for is left out). Higher
is less constrained, hence first.

A host that reports none of a resource the flavor asks for (0 vCPUs, say)
has no room at all on it: its ``unreserved`` there counts as at most 0, so
that resource scores at most 0 and the host ranks behind every host with
room left, and it lacks headroom. It is not left out of the comparison,
where it would rank on its other resources alone and draw every placement.

The tiers (``tier``, 0 best) are Cloud Director's four lists:
``preferred + acceptable + noHeadRoom + avoid``. A host is *avoid* when soft
anti-affinity (or a scheduler hint) says so; otherwise *noHeadRoom* when any
resource has no more than its headroom share available now, as Cloud
Director tests it (headroom is ok when ``total * headroom < available``,
available being the unreserved CPU and memory and the free storage, before
this placement); with ``capacity_headroom_after_placement`` the test is on
what the placement would leave, ``available - requirement``; otherwise
*preferred* when soft affinity or a hint prefers it; otherwise *acceptable*.
"""

import numpy as np
from oslo_config import cfg

from scheduler.conf import filter_scheduler
from scheduler.policy import weighers
from scheduler.policy.weighers import Columns

try:  # the server groups of ``group`` hints (spec.group), where the tree has them
    from scheduler.policy import server_groups
except ImportError:  # pragma: no cover
    server_groups = None

opts = [
    weighers.multiplier_opt("capacity_weight_multiplier",
                            "CapacityWeigher: multiplier of the weighted capacity score; positive prefers "
                            "the least constrained hosts."),
    cfg.FloatOpt(
        "capacity_current_score_weight",
        default=0.5,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: weight of the current capacity score against the future "
        "one (currentScoreWeight). 1 ranks on the current score only, 0 on the future one.",
    ),
    cfg.FloatOpt(
        "capacity_cpu_burst_ratio",
        default=0.67,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of the CPU burst (use above reservation) the "
        "current score counts as taken (cpuBurstRatio).",
    ),
    cfg.FloatOpt(
        "capacity_memory_burst_ratio",
        default=0.67,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of the memory burst the current score counts as "
        "taken (memoryBurstRatio).",
    ),
    cfg.FloatOpt(
        "capacity_future_deploy_ratio",
        default=0.5,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of the undeployed (powered-off) reservations "
        "expected to be deployed, taken from the future score (futureDeployRatio).",
    ),
    cfg.FloatOpt(
        "capacity_cpu_headroom",
        default=0.2,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of CPU capacity (vcpus * cpu_allocation_ratio) that "
        "must be unreserved; hosts with no more rank in the noHeadRoom tier (cpuHeadRoom).",
    ),
    cfg.FloatOpt(
        "capacity_memory_headroom",
        default=0.2,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of memory capacity that must be unreserved "
        "(memoryHeadRoom).",
    ),
    cfg.FloatOpt(
        "capacity_storage_headroom",
        default=0.2,
        min=0.0,
        max=1.0,
        help="CapacityWeigher: share of disk capacity that must be free (storageHeadRoom).",
    ),
    cfg.BoolOpt(
        "capacity_headroom_after_placement",
        default=False,
        help="CapacityWeigher: test the headroom on what the placement would leave "
        "(available - the flavor's size) instead of, as VMware Cloud Director does, on what "
        "is available now. Stricter: a large flavor cannot take a host's last headroom.",
    ),
]

PREFERRED, ACCEPTABLE, NO_HEADROOM, AVOID = range(4)


def list_opts():
    return [("filter_scheduler", opts)]


def _names(value):
    if value is None:
        return set()
    if isinstance(value, str):
        return {v.strip() for v in value.split(",") if v.strip()}
    try:
        return {str(v) for v in value}
    except TypeError:
        return set()


def _group(spec):
    """``(policy, {host: members})`` of the request's server group, read defensively."""
    group = getattr(spec, "group", None) or getattr(spec, "instance_group", None) or {}
    if not isinstance(group, dict):
        group = {"policy": getattr(group, "policy", None), "hosts": getattr(group, "hosts", None)}
    policy = str(group.get("policy") or "").replace("_", "-").lower()
    hosts = group.get("hosts") or {}
    if not isinstance(hosts, dict):
        hosts = dict.fromkeys(_names(hosts), 1)
    return policy, hosts


def _members(table, rows, spec):
    """Members of the request's group on each row (placed before, or pending from this request)."""
    group = getattr(spec, "group", None)
    if server_groups is not None and isinstance(group, dict) and isinstance(group.get("hosts"), dict | None):
        return server_groups.members_on_rows(table, rows, spec)
    counts = np.zeros(table.size)
    for host, placed in _group(spec)[1].items():
        row = table.index.get(host)
        if row is not None and isinstance(placed, int | float):
            counts[row] += placed
    return counts[rows]


def soft_masks(table, rows, spec):
    """``(preferred, avoid)`` boolean arrays over ``rows``.

    Affinity and soft affinity prefer the hosts holding members of the
    request's server group, anti-affinity and soft anti-affinity avoid them;
    the ``preferred_hosts`` and ``avoid_hosts`` scheduler hints (lists, or
    comma-separated) add hosts by name.
    """
    hints = getattr(spec, "scheduler_hints", None) or {}
    masks = []
    for key in ("preferred_hosts", "avoid_hosts"):
        named = np.zeros(table.size, dtype=bool)
        named[[table.index[h] for h in _names(hints.get(key)) if h in table.index]] = True
        masks.append(named[rows])
    policy = _group(spec)[0]
    if policy in PREFER_POLICIES or policy in AVOID_POLICIES:
        holds = _members(table, rows, spec) > 0
        masks[0 if policy in PREFER_POLICIES else 1] |= holds
    return masks


PREFER_POLICIES = ("affinity", "soft-affinity")
AVOID_POLICIES = ("anti-affinity", "soft-anti-affinity")


class CapacityWeigher(weighers.BaseHostWeigher):
    reads_hints = ("preferred_hosts", "avoid_hosts")
    def __init__(self, conf):
        super().__init__(conf)
        opts = conf.filter_scheduler
        self.current = opts.capacity_current_score_weight
        self.cpu_burst_ratio = opts.capacity_cpu_burst_ratio
        self.memory_burst_ratio = opts.capacity_memory_burst_ratio
        self.future_ratio = opts.capacity_future_deploy_ratio
        self.headroom = (
            opts.capacity_cpu_headroom,
            opts.capacity_memory_headroom,
            opts.capacity_storage_headroom,
        )
        self.after_placement = opts.capacity_headroom_after_placement
        self.ratios = tuple(filter_scheduler.allocation_ratio(conf, r) for r in ("cpu", "ram", "disk"))

    def weight_multiplier(self, host_state):
        return self.conf.filter_scheduler.capacity_weight_multiplier

    # -- the formulas, over arrays (the per-host form passes arrays of one) --

    def _resources(self, c, spec):
        """[(capacity, unreserved, burst, burst_ratio, undeployed, requirement)] per resource.

        Burst and undeployed are read when first used (None for storage, which has neither).
        """
        cpu_ratio, ram_ratio, disk_ratio = self.ratios
        cpu_cap = c["vcpus_total"] * cpu_ratio
        cpu_reserved = np.where(np.isnan(c["cpu_reserved"]), c["vcpus_used"], c["cpu_reserved"])
        ram_cap = c["total_ram_mb"] * ram_ratio
        ram_reserved = np.where(
            np.isnan(c["memory_reserved_mb"]), c["total_ram_mb"] - c["free_ram_mb"], c["memory_reserved_mb"]
        )
        disk_cap = c["total_disk_gb"] * disk_ratio
        disk_free = disk_cap - (c["total_disk_gb"] - c["free_disk_gb"])
        return [
            (cpu_cap, cpu_cap - cpu_reserved, "cpu_burst", self.cpu_burst_ratio, "cpu_undeployed",
             spec.flavor.vcpus),
            (ram_cap, ram_cap - ram_reserved, "memory_burst_mb", self.memory_burst_ratio,
             "memory_undeployed_mb", spec.flavor.memory_mb),
            # Storage: no burst, no undeployed reservation: every score is the reservation score.
            (disk_cap, disk_free, None, 0.0, None, spec.flavor.disk_gb),
        ]

    def _weights(self, c, spec):
        weight = np.full(len(c["vcpus_total"]), np.inf)
        for capacity, unreserved, burst, burst_ratio, undeployed, requirement in self._resources(c, spec):
            if requirement <= 0:
                continue
            # None of the resource (or an unknown amount): no room at all, not left out.
            unreserved = np.where(capacity > 0, unreserved, np.fmin(unreserved, 0.0))
            reservation = unreserved / requirement
            current = future = reservation
            if burst is not None:
                burst = c[burst]
                current = np.where(
                    np.isnan(burst), reservation, (unreserved - burst * burst_ratio) / requirement
                )
            if undeployed is not None:
                undeployed = c[undeployed]
                taken = undeployed * self.future_ratio
                future = np.where(np.isnan(undeployed), reservation, (unreserved - taken) / requirement)
            weighted = current * self.current + future * (1.0 - self.current)
            weight = np.minimum(weight, weighted)
        return np.where(np.isinf(weight), 0.0, weight)

    def _tiers(self, c, names_mask, spec):
        preferred, avoid = names_mask
        short = np.zeros(len(c["vcpus_total"]), dtype=bool)
        requirements = self._resources(c, spec)
        for (capacity, unreserved, *_, requirement), headroom in zip(
            requirements, self.headroom, strict=True
        ):
            available = unreserved - requirement if self.after_placement else unreserved
            # Cloud Director: headroom is ok when total * headroom < available. A host with
            # none of a resource the flavor asks for has none; one the flavor does not ask
            # for and the host does not have (no local disk, say) does not count.
            short |= np.where(capacity > 0, available <= capacity * headroom, requirement > 0)
        tier = np.full(len(short), ACCEPTABLE, dtype=np.int64)
        tier[preferred] = PREFERRED
        tier[short] = NO_HEADROOM
        tier[avoid] = AVOID
        return tier

    # -- the plugin API --

    def weigh(self, host_state, spec):
        return float(self._weights(Columns.of_host(host_state), spec)[0])

    def weigh_vector(self, table, rows, spec):
        return weighers.chunked(lambda part: self._weights(Columns.of_rows(table, part), spec), table, rows)

    def tier(self, host_state, spec):
        table, row = host_state.table, host_state.row
        masks = soft_masks(table, np.array([row], dtype=np.intp), spec)
        return int(self._tiers(Columns.of_host(host_state), masks, spec)[0])

    def tier_vector(self, table, rows, spec):
        def tiers(part, preferred, avoid):
            return self._tiers(Columns.of_rows(table, part), (preferred, avoid), spec)

        return weighers.chunked(tiers, table, rows, *soft_masks(table, rows, spec))
