"""What the filters say of a request on some hosts, and a plan checked step by step."""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.exception import NoValidHost
from scheduler.moves.rebalance.snapshot import CLASSES, PlannedMove, Resident, Snapshot
from scheduler.policy.selection import Selector


class Judge:
    """The enabled ``filters`` applied to a snapshot's table, as the Selector applies them."""

    def __init__(self, filters: Sequence[Any]) -> None:
        self.selector = Selector(filters, [])
        #: {request key: boolean column over every row}: what the filters run once per request
        #: answer, which no migration changes (those that read what hosts hold are asked each time)
        self._masks: dict[tuple[Any, ...], NDArray[np.bool_]] = {}

    def passing(self, snapshot: Snapshot, rows: NDArray[np.intp], spec: RequestSpec) -> NDArray[np.intp]:
        """The rows of ``rows`` where every filter accepts ``spec`` (none: an empty array)."""
        if not len(rows):
            return rows
        try:
            return self.selector.filter(snapshot.table, rows, spec)
        except NoValidHost:
            return rows[:0]

    def why_not(self, snapshot: Snapshot, rows: NDArray[np.intp], spec: RequestSpec) -> str | None:
        """None when some row of ``rows`` passes; else the filters' reason."""
        try:
            self.selector.filter(snapshot.table, rows, spec)
        except NoValidHost as exc:
            return str(exc)
        return None

    def accepts(self, snapshot: Snapshot, row: int, spec: RequestSpec) -> bool:
        return bool(len(self.passing(snapshot, np.array([row], dtype=np.intp), spec)))

    def destinations(self, snapshot: Snapshot, resident: Resident) -> NDArray[np.bool_]:
        """Boolean column over every row: where the filters accept ``resident`` now, its own host
        left out. The answer of the filters run once per request is kept for requests that differ
        only in their instance; the others are asked again, as the plan changes what hosts hold."""
        spec = snapshot.spec_of(resident, away=False)
        key = request_key(spec)
        scope = self._masks.get(key)
        if scope is None:
            scope = np.zeros(len(snapshot), dtype=bool)
            scope[self.selector.scope(snapshot.table, np.arange(len(snapshot), dtype=np.intp), spec)] = True
            self._masks[key] = scope
        scope = scope.copy()
        scope[snapshot.table.index[resident.host]] = False
        mask = np.zeros(len(snapshot), dtype=bool)
        mask[self.passing(snapshot, np.flatnonzero(scope).astype(np.intp), spec)] = True
        return mask


def request_key(spec: RequestSpec) -> tuple[Any, ...]:
    group = spec.group or {}
    flavor = spec.flavor
    return (flavor.memory_mb, flavor.root_gb, flavor.ephemeral_gb, flavor.vcpus,
            repr(sorted(flavor.extra_specs.items())),
            spec.project_id, spec.availability_zone, repr(sorted(spec.image_properties.items())),
            repr(sorted(spec.scheduler_hints.items())), group.get("uuid"), repr(group.get("hosts")),
            tuple(spec.same_host_hosts or ()), tuple(spec.different_host_hosts or ()))


def request_for(flavor: Flavor, count: int, zone: str | None = None) -> RequestSpec:
    """The request of ``count`` new instances of ``flavor`` (in availability ``zone``) the room is
    made for."""
    return RequestSpec(instance_uuids=[str(uuidlib.uuid4()) for _ in range(count)], flavor=flavor,
                       availability_zone=zone)


def one_of(request: RequestSpec, index: int) -> RequestSpec:
    return dataclasses.replace(request, instance_uuids=[request.instance_uuids[index]])


def replay(snapshot: Snapshot, judge: Judge, migrations: Sequence[PlannedMove], request: RequestSpec,
           placements: Sequence[str]) -> str | None:
    """None when ``migrations``, taken in order, each go where the filters accept them with no host
    over its limits at any step, and then each instance of ``request`` fits on its host of
    ``placements``; else what goes wrong first. The snapshot is left as it was."""
    table = snapshot.table
    done: list[Resident] = []
    placed: list[int] = []
    try:
        for step, migration in enumerate(migrations, 1):
            resident = snapshot.residents.get(migration.instance)
            if resident is None or resident.host != migration.source:
                return f"step {step}: instance {migration.instance} is not on {migration.source}"
            if not resident.movable:
                return f"step {step}: instance {migration.instance} may not be moved"
            row = table.index.get(migration.destination)
            if row is None or row == table.index[resident.host]:
                return f"step {step}: {migration.destination} is no destination for {migration.instance}"
            if not judge.accepts(snapshot, row, snapshot.spec_of(resident)):
                why = judge.why_not(snapshot, np.array([row], dtype=np.intp), snapshot.spec_of(resident))
                return (f"step {step}: the filters refuse {migration.destination} for {migration.instance} "
                        f"({why})")
            done.append(snapshot.move(migration.instance, migration.destination))
            over = _over_limits(snapshot, row)
            if over:
                return f"step {step}: {over}"
        for index, host in enumerate(placements):
            row = table.index[host]
            spec = one_of(request, index)
            if not judge.accepts(snapshot, row, spec):
                why = judge.why_not(snapshot, np.array([row], dtype=np.intp), spec)
                return f"instance {index + 1} of {request.num_instances} does not fit on {host} ({why})"
            table.shift(row, request.flavor, +1)
            placed.append(row)
            over = _over_limits(snapshot, row)
            if over:
                return f"instance {index + 1} of {request.num_instances} on {host}: {over}"
        return None
    finally:
        for row in placed:
            table.shift(row, request.flavor, -1)
        for before in reversed(done):
            snapshot.move(before.uuid, before.host)


def _over_limits(snapshot: Snapshot, row: int) -> str | None:
    """Which limit host ``row`` is over, if any (a little tolerance for float sums)."""
    used, limits = snapshot.used()[row], snapshot.limits()[row]
    for name, held, limit in zip(CLASSES, used, limits, strict=True):
        if held > limit + 1e-6:
            return f"{snapshot.table.names[row]} holds {held:g} {name}, over its limit {limit:g}"
    return None
