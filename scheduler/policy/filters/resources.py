"""RAM, disk and vCPU: the host must have room under its allocation ratio, as Placement counts it.

Placement (and so Nova since it decides by Placement) gives a host's instances
``(total - reserved) * allocation_ratio`` of each class: the reserve is kept out
before the ratio applies. The agents' "used" figures count their reserve
(``reserved_host_memory_mb``, ``reserved_host_disk_mb``, ``reserved_host_cpus``,
reported with them), so each filter checks ``used + amount <= (total - reserved) *
ratio + reserve counted``, which is Placement's ``instances + amount <= (total -
reserved) * ratio``. The disk's reserve is whole GB to Placement (Nova rounds
``reserved_host_disk_mb`` up) and MB / 1024 in the agent's figure. Nova's filters
before Placement (RamFilter, DiskFilter, CoreFilter) overcommitted the reserve too,
``total * ratio - used``: ``reserved * (ratio - 1)`` more than Placement gives.

Each filter gives the limit it applied through ``limits()``; the agent
claims against the same limit, so the scheduler and the agent agree on
what "full" means even though the agent never reads these options.

As in Nova, an instance is overcommitted against other instances, never
against itself: one larger than the host's whole usable RAM, disk or vCPUs
does not fit there, whatever the ratio (Placement's max_unit, the total).

What each filter checks is the flavor's amount of its class (``spec.flavor.amounts``):
the flavor's vcpus, memory_mb and disk_gb unless its extra specs say otherwise, so
``resources:DISK_GB=0`` (booted from a volume) and ``hw:cpu_policy=dedicated`` (its
vCPUs taken as PCPU, which ResourceClassFilter checks) ask nothing of DiskFilter and
CoreFilter, as with Placement. A filter asked for 0 units passes every host.

Where Berth knowingly differs from Nova: CoreFilter refuses a host that
reports no vCPUs, where Nova's passed it ("fail safe"). Such a host would
otherwise take instances it has no CPUs for, and, looking roomy to the
weighers, draw them all.
"""

from berth_contract.resource_classes import DISK_GB, MEMORY_MB, VCPU
from scheduler.conf import filter_scheduler
from scheduler.policy import filters


def kept_out(reserved, counted, ratio):
    """What Placement keeps out of ``total * ratio`` beyond the reserve the agent's used figure
    counts: its room for instances is ``(total - reserved) * ratio``, so a used figure (``counted``
    of reserve in it) may reach ``total * ratio - kept_out``. 0 with no reserve, or at ratio 1."""
    return reserved * ratio - counted


def scaled(total, ratio):
    """``total * ratio``; ``total`` itself at a ratio of 1.0 (the same figures, one pass fewer)."""
    return total if type(ratio) is float and ratio == 1.0 else total * ratio


def less(figures, kept):
    """``figures - kept``; ``figures`` themselves when nothing is kept out (``kept`` 0.0)."""
    return figures if type(kept) is float and kept == 0.0 else figures - kept


def moved_off(wanted, figure):
    """Whether the flavor's extra specs take none of the class its ``figure`` would (resources:X=0,
    hw:cpu_policy=dedicated): nothing to check, as Placement checks nothing. A flavor whose figure
    is 0 by itself (a disk of 0 GB) is checked as Nova's filter checks it: an overcommitted host
    takes not even that."""
    return not wanted and figure != 0


class _Ratio(filters.BaseHostFilter):
    """The allocation ratio of [filter_scheduler] ``resource``_allocation_ratio, the same for every
    host (the Aggregate filters give each host its aggregates'), and what Placement keeps out of
    ``total * ratio`` for the host's reserve (``reserve``: the table's column of it)."""

    abstract = True
    resource = ""
    reserve = ""

    def __init__(self, conf):
        super().__init__(conf)
        self.ratio = filter_scheduler.allocation_ratio(conf, self.resource)

    def ratio_of(self, host_state):
        return self.ratio

    def ratios_of(self, table, rows):
        return self.ratio

    def kept(self, reserved, ratio):
        """kept_out() of the class, for its reserve as the table holds it (a number or an array)."""
        return kept_out(reserved, reserved, ratio)

    def kept_of(self, host_state):
        return self.kept(getattr(host_state, self.reserve), self.ratio_of(host_state))

    def kept_vector(self, table, rows):
        """kept_of() of each row of ``rows``; 0 when no host keeps anything out. Worked out once for
        the whole table until a host's reserve changes (the table counts its changes): most reports
        keep their reserve, and a decision at 10,000 hosts cannot afford the arithmetic each time."""
        key = (self.reserve, self.ratio, table.reserves_version, len(table))
        cached = table.derived.get(key)
        if cached is None:
            for old in [k for k in table.derived if k[:2] == key[:2]]:
                del table.derived[old]
            column = self.kept(getattr(table, self.reserve), self.ratio)
            cached = table.derived[key] = column if column.any() else 0.0
        return cached if isinstance(cached, float) else cached[rows]


class RamFilter(_Ratio):
    resource, reserve = "ram", "reserved_ram_mb"

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_ram_mb, spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        usable = total * self.ratio_of(host_state) - self.kept_of(host_state)
        return wanted <= total and usable - host_state.ram_used_mb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_ram_mb[rows], spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        usable = scaled(total, self.ratios_of(table, rows)) - (total - table.free_ram_mb[rows])
        return (wanted <= total) & (less(usable, self.kept_vector(table, rows)) >= wanted)

    def limits(self, host_state):
        total = host_state.total_usable_ram_mb
        return {"memory_mb": float(total * self.ratio_of(host_state) - self.kept_of(host_state))}


class DiskFilter(_Ratio):
    resource, reserve = "disk", "reserved_disk_mb"

    def kept(self, reserved, ratio):
        """Placement's disk reserve is whole GB (Nova rounds up); the agent's figure counts MB / 1024."""
        return kept_out(-(-reserved // 1024), reserved / 1024, ratio)

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_disk_gb, spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        usable = total * self.ratio_of(host_state) - self.kept_of(host_state)
        return wanted <= total and usable - host_state.disk_used_gb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_disk_gb[rows], spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        usable = scaled(total, self.ratios_of(table, rows)) - (total - table.free_disk_gb[rows])
        return (wanted <= total) & (less(usable, self.kept_vector(table, rows)) >= wanted)

    def limits(self, host_state):
        total = host_state.total_usable_disk_gb
        return {"disk_gb": float(total * self.ratio_of(host_state) - self.kept_of(host_state))}


class CoreFilter(_Ratio):
    resource, reserve = "cpu", "reserved_vcpus"

    def host_passes(self, host_state, spec):
        wanted = spec.flavor.amounts[VCPU]
        if moved_off(wanted, spec.flavor.vcpus):
            return True
        total = host_state.vcpus_total
        if not total > 0:
            return False  # the agent reports no CPUs: none to give (Nova passed it)
        # An instance may be overcommitted against other instances, never against itself.
        if wanted > total:
            return False
        usable = total * self.ratio_of(host_state) - self.kept_of(host_state)
        return usable - host_state.vcpus_used >= wanted

    def filter_vector(self, table, rows, spec):
        wanted = spec.flavor.amounts[VCPU]
        if moved_off(wanted, spec.flavor.vcpus):
            return True
        total = table.vcpus_total[rows]
        room = less(scaled(total, self.ratios_of(table, rows)) - table.vcpus_used[rows],
                    self.kept_vector(table, rows))
        fits = (wanted <= total) & (room >= wanted)
        # Asked for at least one vCPU, a host that fits has some; otherwise say it has.
        return fits if wanted > 0 else (total > 0) & fits

    def limits(self, host_state):
        if not host_state.vcpus_total:
            return {}
        return {"vcpu": float(host_state.vcpus_total * self.ratio_of(host_state) - self.kept_of(host_state))}
