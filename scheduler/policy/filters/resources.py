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


def limit(total, reserved, counted, ratio):
    """What a host's used figure, ``counted`` of its reserve in it, may reach: Placement's room
    for instances, ``(total - reserved) * ratio``, plus that reserve."""
    return (total - reserved) * ratio + counted


def ram_limit(total, reserved_mb, ratio):
    return limit(total, reserved_mb, reserved_mb, ratio)


def disk_limit(total, reserved_mb, ratio):
    """Placement's disk reserve is whole GB (Nova rounds up); the agent's figure counts MB / 1024."""
    return limit(total, -(-reserved_mb // 1024), reserved_mb / 1024, ratio)  # a number or an array


def moved_off(wanted, figure):
    """Whether the flavor's extra specs take none of the class its ``figure`` would (resources:X=0,
    hw:cpu_policy=dedicated): nothing to check, as Placement checks nothing. A flavor whose figure
    is 0 by itself (a disk of 0 GB) is checked as Nova's filter checks it: an overcommitted host
    takes not even that."""
    return not wanted and figure != 0


class _Ratio(filters.BaseHostFilter):
    """The allocation ratio of [filter_scheduler] ``resource``_allocation_ratio, the same for every
    host (the Aggregate filters give each host its aggregates')."""

    abstract = True
    resource = ""

    def __init__(self, conf):
        super().__init__(conf)
        self.ratio = filter_scheduler.allocation_ratio(conf, self.resource)

    def ratio_of(self, host_state):
        return self.ratio

    def ratios_of(self, table, rows):
        return self.ratio


class RamFilter(_Ratio):
    resource = "ram"

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_ram_mb, spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        usable = ram_limit(total, host_state.reserved_ram_mb, self.ratio_of(host_state))
        return wanted <= total and usable - host_state.ram_used_mb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_ram_mb[rows], spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        used = total - table.free_ram_mb[rows]
        room = ram_limit(total, table.reserved_ram_mb[rows], self.ratios_of(table, rows)) - used
        return (wanted <= total) & (room >= wanted)

    def limits(self, host_state):
        return {"memory_mb": float(ram_limit(host_state.total_usable_ram_mb, host_state.reserved_ram_mb,
                                             self.ratio_of(host_state)))}


class DiskFilter(_Ratio):
    resource = "disk"

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_disk_gb, spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        usable = disk_limit(total, host_state.reserved_disk_mb, self.ratio_of(host_state))
        return wanted <= total and usable - host_state.disk_used_gb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_disk_gb[rows], spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        used = total - table.free_disk_gb[rows]
        room = disk_limit(total, table.reserved_disk_mb[rows], self.ratios_of(table, rows)) - used
        return (wanted <= total) & (room >= wanted)

    def limits(self, host_state):
        return {"disk_gb": float(disk_limit(host_state.total_usable_disk_gb, host_state.reserved_disk_mb,
                                            self.ratio_of(host_state)))}


class CoreFilter(_Ratio):
    resource = "cpu"

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
        reserved = host_state.reserved_vcpus
        return limit(total, reserved, reserved, self.ratio_of(host_state)) - host_state.vcpus_used >= wanted

    def filter_vector(self, table, rows, spec):
        wanted = spec.flavor.amounts[VCPU]
        if moved_off(wanted, spec.flavor.vcpus):
            return True
        total, reserved = table.vcpus_total[rows], table.reserved_vcpus[rows]
        room = limit(total, reserved, reserved, self.ratios_of(table, rows)) - table.vcpus_used[rows]
        fits = (wanted <= total) & (room >= wanted)
        return (total > 0) & fits

    def limits(self, host_state):
        if not host_state.vcpus_total:
            return {}
        reserved = host_state.reserved_vcpus
        return {"vcpu": float(limit(host_state.vcpus_total, reserved, reserved, self.ratio_of(host_state)))}
