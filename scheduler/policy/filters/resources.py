"""RAM, disk and vCPU: the host must have room under its allocation ratio.

Each filter gives the limit it applied through ``limits()``; the agent
claims against the same limit, so the scheduler and the agent agree on
what "full" means even though the agent never reads these options.

As in Nova, an instance is overcommitted against other instances, never
against itself: one larger than the host's whole usable RAM, disk or vCPUs
does not fit there, whatever the ratio.

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


def moved_off(wanted, figure):
    """Whether the flavor's extra specs take none of the class its ``figure`` would (resources:X=0,
    hw:cpu_policy=dedicated): nothing to check, as Placement checks nothing. A flavor whose figure
    is 0 by itself (a disk of 0 GB) is checked as Nova's filter checks it: an overcommitted host
    takes not even that."""
    return not wanted and figure != 0


class RamFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        self.ratio = filter_scheduler.allocation_ratio(conf, "ram")

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_ram_mb, spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        return wanted <= total and total * self.ratio - host_state.ram_used_mb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_ram_mb[rows], spec.flavor.amounts[MEMORY_MB]
        if moved_off(wanted, spec.flavor.memory_mb):
            return True
        return (wanted <= total) & (total * self.ratio - (total - table.free_ram_mb[rows]) >= wanted)

    def limits(self, host_state):
        return {"memory_mb": host_state.total_usable_ram_mb * self.ratio}


class DiskFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        self.ratio = filter_scheduler.allocation_ratio(conf, "disk")

    def host_passes(self, host_state, spec):
        total, wanted = host_state.total_usable_disk_gb, spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        return wanted <= total and total * self.ratio - host_state.disk_used_gb >= wanted

    def filter_vector(self, table, rows, spec):
        total, wanted = table.total_disk_gb[rows], spec.flavor.amounts[DISK_GB]
        if moved_off(wanted, spec.flavor.disk_gb):
            return True
        return (wanted <= total) & (total * self.ratio - (total - table.free_disk_gb[rows]) >= wanted)

    def limits(self, host_state):
        return {"disk_gb": host_state.total_usable_disk_gb * self.ratio}


class CoreFilter(filters.BaseHostFilter):
    def __init__(self, conf):
        super().__init__(conf)
        self.ratio = filter_scheduler.allocation_ratio(conf, "cpu")

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
        return total * self.ratio - host_state.vcpus_used >= wanted

    def filter_vector(self, table, rows, spec):
        wanted = spec.flavor.amounts[VCPU]
        if moved_off(wanted, spec.flavor.vcpus):
            return True
        total = table.vcpus_total[rows]
        fits = (wanted <= total) & (total * self.ratio - table.vcpus_used[rows] >= wanted)
        return (total > 0) & fits

    def limits(self, host_state):
        if not host_state.vcpus_total:
            return {}
        return {"vcpu": host_state.vcpus_total * self.ratio}
