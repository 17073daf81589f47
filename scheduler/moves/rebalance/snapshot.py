"""A fleet as the make-room planner reads it: a HostTable the filters judge, and who is where.

The table holds each host's totals and what is used of them; the snapshot adds the instances
on each host (uuid, flavor, the request each was built with) and the allocation ratios that
give each host its limits (total x ratio, as the agents' claims check them). Moves are tried
on the table itself and always taken back (``moved``): the caller's table is left as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from berth_contract.request_spec import Flavor, RequestSpec
from berth_contract.resource_classes import DISK_GB, MEMORY_MB, VCPU
from scheduler.policy.host_state import HostTable

#: The classes whose limits the planner keeps, in the order of its arrays' columns.
CLASSES = (VCPU, MEMORY_MB, DISK_GB)


def amounts_of(flavor: Flavor) -> NDArray[np.float64]:
    """What ``flavor`` takes of each class of CLASSES."""
    amounts = flavor.amounts
    return np.array([amounts[c] for c in CLASSES], dtype=float)


@dataclasses.dataclass(frozen=True)
class Resident:
    """An instance on a host: what it takes there, and the request a destination must accept."""

    uuid: str
    host: str
    spec: RequestSpec  # as it was built: flavor, zone, hints, server group
    movable: bool = True  # False: the planner never proposes to move it
    load: float = 0.0  # vCPUs it keeps busy, as its agent measures them (instance_usage cpu)
    memory_load: float = 0.0  # MB it uses, as its agent measures them (instance_usage memory)

    @property
    def flavor(self) -> Flavor:
        return self.spec.flavor

    @property
    def amounts(self) -> tuple[float, float, float]:
        amounts = self.spec.flavor.amounts
        return (amounts[VCPU], amounts[MEMORY_MB], amounts[DISK_GB])

    @property
    def group(self) -> str | None:
        return (self.spec.group or {}).get("uuid")


@dataclasses.dataclass(frozen=True)
class PlannedMove:
    instance: str  # uuid
    source: str
    destination: str
    reason: str
    memory_mb: float = 0.0


class Snapshot:
    """``table`` and the ``residents`` on its hosts; ``ratios``: {class: allocation ratio}.

    ``load`` and ``memory_load``: each host's measured use, busy vCPUs and MB in use, what its
    instances do not account for (its background) included: a move takes the instance's own
    figures along and leaves the background where it is. Not given: the agents' moving averages
    where measured (scheduler.policy.host_load), the residents' sums elsewhere."""

    def __init__(self, table: HostTable, residents: Iterable[Resident],
                 ratios: dict[str, float] | None = None, load: Sequence[float] | None = None,
                 memory_load: Sequence[float] | None = None) -> None:
        self.table: Any = table  # its columns are bound at run time (HostTable.COLUMNS)
        self.ratios = {VCPU: 16.0, MEMORY_MB: 1.5, DISK_GB: 1.0, **(ratios or {})}
        self.residents: dict[str, Resident] = {}
        self.on_host: dict[int, list[Resident]] = {}
        #: {group uuid: {host: members}} as the instances stand now
        self._groups: dict[str, dict[str, int]] = {}
        self._load_of_residents = False  # whether ``load`` counts the residents, to count those added
        #: How the instances' own figures were had, when not all measured (said in a plan's note).
        self.estimated = ""
        self.add(residents)
        self.load = self._measured(0) if load is None else np.array(load, dtype=float)
        self.memory_load = self._measured(1) if memory_load is None else np.array(memory_load, dtype=float)
        for name, figures in (("load", self.load), ("memory_load", self.memory_load)):
            if figures.shape != (len(table),):
                raise ValueError(f"{name} has {figures.size} figures for {len(table)} hosts")
        self._load_of_residents = load is None and memory_load is None

    def add(self, residents: Iterable[Resident]) -> None:
        """Take in more ``residents`` (instances not held already), as when the instances of a few
        more hosts are read."""
        for resident in residents:
            row = self.table.index.get(resident.host)
            if row is None:
                raise ValueError(f"instance {resident.uuid} is on {resident.host}, which the table "
                                 "does not hold")
            if resident.uuid in self.residents:
                raise ValueError(f"instance {resident.uuid} is held already")
            self.residents[resident.uuid] = resident
            self.on_host.setdefault(row, []).append(resident)
            if resident.group is not None:
                hosts = self._groups.setdefault(resident.group, {})
                hosts[resident.host] = hosts.get(resident.host, 0) + 1
        if self._load_of_residents:
            self.load, self.memory_load = self._measured(0), self._measured(1)

    def _measured(self, column: int) -> NDArray[np.float64]:
        """Busy vCPUs (``column`` 0) or MB in use (1) of each host."""
        table = self.table
        load = np.zeros(len(table))
        for row, residents in self.on_host.items():
            load[row] = sum(r.load if column == 0 else r.memory_load for r in residents)
        measured = np.asarray(table.util_measured, dtype=bool)
        if column == 0:
            load[measured] = (table.cpu_util * table.vcpus_total)[measured]
        else:
            load[measured] = (table.mem_util * table.total_ram_mb)[measured]
        return load

    def capacity(self) -> NDArray[np.float64]:
        """Each host's vCPUs: its utilisation is its ``load`` over them."""
        return np.asarray(self.table.vcpus_total, dtype=float)

    def memory(self) -> NDArray[np.float64]:
        """Each host's memory, MB: what ``memory_load`` is measured against."""
        return np.asarray(self.table.total_ram_mb, dtype=float)

    def utilisation(self) -> NDArray[np.float64]:
        """Each host's ``load`` over its vCPUs (0 where it has none)."""
        capacity = self.capacity()
        return np.divide(self.load, capacity, out=np.zeros(len(capacity)), where=capacity > 0)

    def __len__(self) -> int:
        return len(self.table)

    @classmethod
    def from_conf(cls, table: HostTable, residents: Iterable[Resident], conf: Any,
                  load: Sequence[float] | None = None,
                  memory_load: Sequence[float] | None = None) -> Snapshot:
        """With the allocation ratios of ``conf`` ([filter_scheduler] *_allocation_ratio)."""
        from scheduler.conf import filter_scheduler

        ratios = {VCPU: filter_scheduler.allocation_ratio(conf, "cpu"),
                  MEMORY_MB: filter_scheduler.allocation_ratio(conf, "ram"),
                  DISK_GB: filter_scheduler.allocation_ratio(conf, "disk")}
        return cls(table, residents, ratios, load, memory_load)

    # -- figures, one row per host and one column per class of CLASSES --------

    def totals(self) -> NDArray[np.float64]:
        t = self.table
        return np.column_stack([t.vcpus_total, t.total_ram_mb, t.total_disk_gb])

    def limits(self) -> NDArray[np.float64]:
        """What each host may hold of each class: total x allocation ratio."""
        return self.totals() * np.array([self.ratios[c] for c in CLASSES])

    def used(self) -> NDArray[np.float64]:
        t = self.table
        return np.column_stack([t.vcpus_used, t.total_ram_mb - t.free_ram_mb,
                                t.total_disk_gb - t.free_disk_gb])

    def room(self) -> NDArray[np.float64]:
        return self.limits() - self.used()

    # -- what the filters read -------------------------------------------------

    def spec_of(self, resident: Resident, *, away: bool = True) -> RequestSpec:
        """The request a destination of ``resident`` must pass: its own, its source left out
        (``away``), its server group's members counted where they are now."""
        spec = resident.spec
        changes: dict[str, Any] = {"instance_uuids": [resident.uuid], "force_hosts": [], "force_nodes": [],
                                   "ignore_hosts": [resident.host] if away else []}
        if spec.group is not None:
            hosts = self._groups.get(resident.group or "", {})
            changes["group"] = dict(spec.group, hosts={h: n for h, n in hosts.items() if n})
        return dataclasses.replace(spec, **changes)

    def members(self, group: str) -> dict[str, int]:
        return dict(self._groups.get(group, {}))

    @contextlib.contextmanager
    def moved(self, migrations: Sequence[PlannedMove]) -> Iterator[None]:
        """The snapshot as after ``migrations`` (taken in order) while the block runs."""
        done: list[Resident] = []
        try:
            for migration in migrations:
                done.append(self.move(migration.instance, migration.destination))
            yield
        finally:
            for before in reversed(done):
                self.move(before.uuid, before.host)

    def planned(self, next_step: Callable[[list[PlannedMove]], PlannedMove | None],
                limit: int) -> list[PlannedMove]:
        """Up to ``limit`` migrations, each ``next_step(those so far)`` (None: no more) asked once
        those before it are made on the snapshot; all taken back before they are returned."""
        migrations: list[PlannedMove] = []
        try:
            while len(migrations) < limit:
                step = next_step(migrations)
                if step is None:
                    break
                migrations.append(step)
                self.move(step.instance, step.destination)
        finally:
            for migration in reversed(migrations):
                self.move(migration.instance, migration.source)
        return migrations

    def move(self, uuid: str, destination: str) -> Resident:
        """Move instance ``uuid`` to ``destination`` in the snapshot; returns it as it was."""
        resident = self.residents[uuid]
        table = self.table
        source_row, destination_row = table.index[resident.host], table.index[destination]
        table.shift(source_row, resident.flavor, -1)
        table.shift(destination_row, resident.flavor, +1)
        self.load[source_row] -= resident.load
        self.load[destination_row] += resident.load
        self.memory_load[source_row] -= resident.memory_load
        self.memory_load[destination_row] += resident.memory_load
        moved = dataclasses.replace(resident, host=destination)
        self.residents[uuid] = moved
        self.on_host[source_row].remove(resident)
        self.on_host.setdefault(destination_row, []).append(moved)
        if resident.group is not None:
            hosts = self._groups[resident.group]
            hosts[resident.host] -= 1
            hosts[destination] = hosts.get(destination, 0) + 1
        return resident
