"""HostState: what the scheduler believes about one compute host.

A HostState is refreshed from its agent's resource reports and consumed
locally by every placement the scheduler makes on it. A report is the
agent's truth for the instances it already holds; placements the agent
has not reported yet stay consumed on top of it until a report includes
them, so an old report never gives back room the scheduler has promised.
"""

import time


class HostState:
    def __init__(self, host, nodename=None):
        self.host = host
        self.nodename = nodename or host
        self.hypervisor_type = None
        self.total_usable_ram_mb = 0
        self.free_ram_mb = 0
        self.total_usable_disk_gb = 0
        self.free_disk_gb = 0.0
        self.vcpus_total = 0
        self.vcpus_used = 0.0
        self.num_instances = 0
        self.instance_uuids = frozenset()
        self.stats = {}
        # Set by the filters of the request being placed; the agent claims against them.
        self.limits = {}
        # uuid -> (Flavor, monotonic time) placed here and not yet in a report
        self.pending = {}
        self.disabled = False
        self.updated = None  # monotonic time of the last report
        self.reported_at = None  # the agent's own timestamp of that report

    def __repr__(self):
        return (
            f"<HostState {self.host} ram {self.free_ram_mb}/{self.total_usable_ram_mb} MB "
            f"disk {self.free_disk_gb}/{self.total_usable_disk_gb} GB "
            f"vcpus {self.vcpus_used}/{self.vcpus_total} instances {self.num_instances}>"
        )

    def update_from_report(self, resources, now=None, pending_ttl=None):
        """Take an agent's report (validated by the caller) as the new base.

        Placements older than ``pending_ttl`` seconds that the agent still
        does not report are taken as lost and given back.
        """
        now = time.monotonic() if now is None else now
        self.nodename = resources.get("nodename") or self.host
        self.hypervisor_type = resources.get("hypervisor_type")
        self.total_usable_ram_mb = resources["memory_mb"]
        self.free_ram_mb = resources["free_ram_mb"]
        self.total_usable_disk_gb = resources["local_gb"]
        self.free_disk_gb = resources["free_disk_gb"]
        self.vcpus_total = resources["vcpus"]
        self.vcpus_used = resources["vcpus_used"]
        self.instance_uuids = frozenset(resources.get("instance_uuids", ()))
        self.num_instances = resources.get("running_vms", len(self.instance_uuids))
        self.stats = resources
        self.reported_at = resources.get("reported_at")
        self.updated = now
        self.pending = {
            uuid: (flavor, since)
            for uuid, (flavor, since) in self.pending.items()
            if uuid not in self.instance_uuids and (pending_ttl is None or now - since < pending_ttl)
        }
        for flavor, _ in self.pending.values():
            self._take(flavor, +1)

    def consume(self, instance_uuid, flavor):
        """Reserve ``flavor`` here for ``instance_uuid`` until the agent reports it."""
        if instance_uuid in self.pending or instance_uuid in self.instance_uuids:
            return
        self.pending[instance_uuid] = (flavor, time.monotonic())
        self._take(flavor, +1)

    def release(self, instance_uuid):
        """Give back a placement the agent refused or that was rolled back."""
        entry = self.pending.pop(instance_uuid, None)
        if entry is not None:
            self._take(entry[0], -1)

    def _take(self, flavor, sign):
        self.free_ram_mb -= sign * flavor.memory_mb
        self.free_disk_gb -= sign * flavor.disk_gb
        self.vcpus_used += sign * flavor.vcpus
        self.num_instances += sign

    @property
    def ram_used_mb(self):
        return self.total_usable_ram_mb - self.free_ram_mb

    @property
    def disk_used_gb(self):
        return self.total_usable_disk_gb - self.free_disk_gb
