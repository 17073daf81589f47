"""HostState, and the columnar host table behind it.

The fleet lives in a HostTable: one row per compute host, one numpy array
per resource, so that filters and weighers can read every host at once as
vectors. A HostState is a view of one row: what plugins written for one
host at a time, and operators, see.

A row is refreshed from its agent's resource reports and consumed locally
by every placement the scheduler makes on it. A report is the agent's truth
for the instances it already holds; placements the agent has not reported
yet stay consumed on top of it until a report includes them, so an old
report never gives back room the scheduler has promised.
"""

import math
import time

import numpy as np

_GROW = 2


class HostTable:
    #: column name -> numpy dtype; every column has one entry per row.
    COLUMNS = {
        "total_ram_mb": np.float64,
        "free_ram_mb": np.float64,
        "total_disk_gb": np.float64,
        "free_disk_gb": np.float64,
        "vcpus_total": np.float64,
        "vcpus_used": np.float64,
        "num_instances": np.float64,
        "updated": np.float64,  # monotonic time of the last report; -inf before the first
        "disabled": np.bool_,
    }

    def __init__(self, capacity=64):
        self.size = 0
        self.names = []
        self.nodenames = []
        self.index = {}
        # Sparse per-row state: most rows have none of it.
        self.pending = {}  # row -> {uuid: (Flavor, monotonic time)}
        self.extra = {}  # row -> {"hypervisor_type", "reported_at", ...}
        self._views = {}
        self._capacity = 0
        self._grow(max(capacity, 1))

    def _grow(self, capacity):
        for name, dtype in self.COLUMNS.items():
            fresh = np.zeros(capacity, dtype=dtype)
            if name == "updated":
                fresh[:] = -np.inf
            if self._capacity:
                fresh[: self.size] = getattr(self, "_" + name)[: self.size]
            setattr(self, "_" + name, fresh)
        self._capacity = capacity
        self._bind_columns()

    def _bind_columns(self):
        for name in self.COLUMNS:
            setattr(self, name, getattr(self, "_" + name)[: self.size])

    def __len__(self):
        return self.size

    def add(self, host, nodename=None):
        """The row of ``host``, added empty if it is new."""
        row = self.index.get(host)
        if row is not None:
            return row
        if self.size == self._capacity:
            self._grow(self._capacity * _GROW)
        row = self.size
        self.size += 1
        self.index[host] = row
        self.names.append(host)
        self.nodenames.append(nodename or host)
        self._bind_columns()
        return row

    def row_numbers(self, rows):
        """``rows`` (an index array or a slice) as an index array."""
        return np.arange(self.size)[rows] if isinstance(rows, slice) else rows

    def view(self, row):
        view = self._views.get(row)
        if view is None:
            view = self._views[row] = HostState(self.names[row], table=self, row=row)
        return view

    def views(self, rows=None):
        return [self.view(int(r)) for r in (range(self.size) if rows is None else rows)]

    def update_from_report(self, row, resources, now, pending_ttl=None):
        """Write an agent's report (validated by the caller) into ``row``."""
        self.nodenames[row] = resources.get("nodename") or self.names[row]
        self._total_ram_mb[row] = resources["memory_mb"]
        self._free_ram_mb[row] = resources["free_ram_mb"]
        self._total_disk_gb[row] = resources["local_gb"]
        self._free_disk_gb[row] = resources["free_disk_gb"]
        self._vcpus_total[row] = resources["vcpus"]
        self._vcpus_used[row] = resources["vcpus_used"]
        uuids = resources.get("instance_uuids") or ()
        self._num_instances[row] = resources.get("running_vms", len(uuids))
        self._updated[row] = now
        self.extra[row] = {
            "hypervisor_type": resources.get("hypervisor_type"),
            "reported_at": resources.get("reported_at"),
        }
        pending = self.pending.get(row)
        if pending:
            reported = set(uuids)
            kept = {
                uuid: (flavor, since)
                for uuid, (flavor, since) in pending.items()
                if uuid not in reported and (pending_ttl is None or now - since < pending_ttl)
            }
            if kept:
                self.pending[row] = kept
                for flavor, _ in kept.values():
                    self._take(row, flavor, +1)
            else:
                del self.pending[row]

    def consume(self, row, instance_uuid, flavor, now=None):
        """Reserve ``flavor`` on ``row`` for ``instance_uuid`` until the agent reports it."""
        pending = self.pending.setdefault(row, {})
        if instance_uuid in pending:
            return
        pending[instance_uuid] = (flavor, time.monotonic() if now is None else now)
        self._take(row, flavor, +1)

    def release(self, row, instance_uuid):
        """Give back a placement the agent refused or that was rolled back."""
        pending = self.pending.get(row)
        entry = pending.pop(instance_uuid, None) if pending else None
        if entry is not None:
            self._take(row, entry[0], -1)
            if not pending:
                del self.pending[row]

    def _take(self, row, flavor, sign):
        self._free_ram_mb[row] -= sign * flavor.memory_mb
        self._free_disk_gb[row] -= sign * flavor.disk_gb
        self._vcpus_used[row] += sign * flavor.vcpus
        self._num_instances[row] += sign


def _column(name, cast=float):
    def get(self):
        return cast(getattr(self._table, "_" + name)[self._row])

    def set(self, value):
        getattr(self._table, "_" + name)[self._row] = value

    return property(get, set)


def _int_or_float(value):
    return int(value) if float(value).is_integer() else float(value)


class HostState:
    """One host of a HostTable, attribute by attribute (Nova's HostState shape)."""

    def __init__(self, host, nodename=None, table=None, row=None):
        if table is None:
            table = HostTable(capacity=1)
            row = table.add(host, nodename)
        self._table = table
        self._row = row
        self.host = host
        # Set by per-host filters written in Nova's style; the pipeline uses Filter.limits().
        self.limits = {}

    total_usable_ram_mb = _column("total_ram_mb", _int_or_float)
    free_ram_mb = _column("free_ram_mb", _int_or_float)
    total_usable_disk_gb = _column("total_disk_gb", _int_or_float)
    free_disk_gb = _column("free_disk_gb", _int_or_float)
    vcpus_total = _column("vcpus_total", _int_or_float)
    vcpus_used = _column("vcpus_used", _int_or_float)
    num_instances = _column("num_instances", int)
    disabled = _column("disabled", bool)

    @property
    def row(self):
        return self._row

    @property
    def table(self):
        return self._table

    @property
    def nodename(self):
        return self._table.nodenames[self._row]

    @property
    def updated(self):
        value = float(self._table._updated[self._row])
        return None if math.isinf(value) else value

    @updated.setter
    def updated(self, value):
        self._table._updated[self._row] = -np.inf if value is None else value

    @property
    def hypervisor_type(self):
        return self._table.extra.get(self._row, {}).get("hypervisor_type")

    @property
    def reported_at(self):
        return self._table.extra.get(self._row, {}).get("reported_at")

    @property
    def pending(self):
        return self._table.pending.get(self._row, {})

    @property
    def ram_used_mb(self):
        return self.total_usable_ram_mb - self.free_ram_mb

    @property
    def disk_used_gb(self):
        return self.total_usable_disk_gb - self.free_disk_gb

    def update_from_report(self, resources, now=None, pending_ttl=None):
        """Take an agent's report (validated by the caller) as the new base.

        Placements older than ``pending_ttl`` seconds that the agent still
        does not report are taken as lost and given back.
        """
        self._table.update_from_report(
            self._row, resources, time.monotonic() if now is None else now, pending_ttl
        )

    def consume(self, instance_uuid, flavor):
        self._table.consume(self._row, instance_uuid, flavor)

    def release(self, instance_uuid):
        self._table.release(self._row, instance_uuid)

    def __repr__(self):
        return (
            f"<HostState {self.host} ram {self.free_ram_mb}/{self.total_usable_ram_mb} MB "
            f"disk {self.free_disk_gb}/{self.total_usable_disk_gb} GB "
            f"vcpus {self.vcpus_used}/{self.vcpus_total} instances {self.num_instances}>"
        )
