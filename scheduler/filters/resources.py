"""RAM, disk and vCPU: the host must have room under its allocation ratio.

Each filter records the limit it applied in ``host_state.limits``; the
agent claims against the same limit, so the scheduler and the agent agree
on what "full" means even though the agent never reads these options.
"""

from scheduler import filters


class RamFilter(filters.BaseHostFilter):
    def host_passes(self, host_state, spec):
        limit = host_state.total_usable_ram_mb * self.conf.filter_scheduler.ram_allocation_ratio
        usable = limit - host_state.ram_used_mb
        host_state.limits["memory_mb"] = limit
        return usable >= spec.flavor.memory_mb


class DiskFilter(filters.BaseHostFilter):
    def host_passes(self, host_state, spec):
        limit = host_state.total_usable_disk_gb * self.conf.filter_scheduler.disk_allocation_ratio
        usable = limit - host_state.disk_used_gb
        host_state.limits["disk_gb"] = limit
        return usable >= spec.flavor.disk_gb


class CoreFilter(filters.BaseHostFilter):
    def host_passes(self, host_state, spec):
        if not host_state.vcpus_total:
            return True  # the agent does not report CPUs: nothing to check against
        # An instance may be overcommitted against other instances, never against itself.
        if spec.flavor.vcpus > host_state.vcpus_total:
            return False
        limit = host_state.vcpus_total * self.conf.filter_scheduler.cpu_allocation_ratio
        host_state.limits["vcpu"] = limit
        return limit - host_state.vcpus_used >= spec.flavor.vcpus
