"""The scheduler's fleet as the rebalance planner reads it: a copy of its host table, and every
instance on those hosts with the request it was built with (scheduler.moves.rebalance.Snapshot)."""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import numpy as np

from berth_contract.request_spec import Flavor, RequestSpec, Retry
from scheduler import states
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.moves.planner import MoveRefused, flavor_of
from scheduler.moves.rebalance import Resident, Snapshot
from scheduler.planning import lookups
from scheduler.utils import jsonutils

LOG = logging.getLogger(__name__)


def fleet_snapshot(conf: Any, database: Any, hosts: Any) -> Snapshot:
    """The host table as it is now (a copy: planning never touches the scheduler's own) and the
    instances on its hosts. Only ACTIVE instances may move; the others (building, moving, SHUTOFF
    or their power changing) hold their room where they are. An instance whose stored request cannot
    be read stays put. Each instance carries what its agent measures it uses (moving averages,
    scheduler.policy.instance_load), each host what it uses beyond its instances."""
    with hosts.lock:
        table = hosts.table.copy()
    residents = []
    parsed: dict[Any, RequestSpec | Exception] = {}  # requests that differ only in their instance
    for instance in database.instances_to_plan([states.ACTIVE, states.BUILDING, *states.MOVING,
                                                  *states.POWER]):
        if instance["host"] not in table.index:
            continue
        residents.append(_resident(database, instance, parsed))
    measured, load, memory_load, estimated = with_load(table, residents)
    snapshot = Snapshot.from_conf(table, measured, conf, load, memory_load)
    snapshot.estimated = estimated
    return snapshot


def with_load(table: Any, residents: list[Resident]) -> tuple[list[Resident], Any, Any, str]:
    """(``residents`` each with its measured use, each host's busy vCPUs and MB in use, how the use
    of instances whose agent does not measure them was had: "" when every measured host's does).

    A host whose agent reports each instance's use (``instance_usage``): each instance its own
    average, the host its instances' and its background. A host measured as a whole only (an
    agent of an older release): its load shared among its instances in proportion to their
    vCPUs (memory to their memory), said in the plan's note. An unmeasured host: no load."""
    cpu_total = np.asarray(table.cpu_util * table.vcpus_total, dtype=float)
    memory_total = np.asarray(table.mem_util * table.total_ram_mb, dtype=float)
    measured = np.asarray(table.util_measured, dtype=bool)
    load = np.where(measured, cpu_total, 0.0)
    memory_load = np.where(measured, memory_total, 0.0)
    on_host: dict[int, list[Resident]] = {}
    for resident in residents:
        on_host.setdefault(table.index[resident.host], []).append(resident)
    out: list[Resident] = []
    shared = 0
    for row, here in on_host.items():
        figures = table.instance_load.get(row)
        if figures is not None and measured[row]:
            load[row], memory_load[row] = figures.cpu, figures.memory_mb
            for resident in here:
                cpu, memory = figures.usage.get(resident.uuid, (0.0, 0.0))
                out.append(dataclasses.replace(resident, load=cpu, memory_load=memory))
        elif measured[row]:
            shared += 1
            vcpus = sum(r.flavor.vcpus for r in here) or 1
            memory = sum(r.flavor.memory_mb for r in here) or 1
            out.extend(dataclasses.replace(r, load=load[row] * r.flavor.vcpus / vcpus,
                                           memory_load=memory_load[row] * r.flavor.memory_mb / memory)
                       for r in here)
        else:
            out.extend(here)
    estimated = (f"{shared} host(s) measured as a whole only (their agents report no per-instance use): "
                 "their load shared among their instances by vCPUs" if shared else "")
    return out, load, memory_load, estimated


def _resident(database: Any, instance: dict[str, Any],
              parsed: dict[Any, RequestSpec | Exception]) -> Resident:
    uuid = instance["uuid"]
    movable = instance["state"] == states.ACTIVE
    try:
        spec = copy.copy(_request(instance, parsed))
        spec.instance_uuids = [uuid]
        if lookups.reads_placements(spec):
            lookups.prepare_spec(database, spec, add_members=False)
    except (InvalidRequest, MoveRefused, NoValidHost, TypeError, ValueError) as exc:
        LOG.info("Instance %s stays where it is in rebalance plans: its stored request cannot be read (%s)",
                 uuid, exc)
        spec = RequestSpec(instance_uuids=[uuid], flavor=_bare_flavor(instance))
        movable = False
    return Resident(uuid, instance["host"], spec, movable)


def _request(instance: dict[str, Any], parsed: dict[Any, RequestSpec | Exception]) -> RequestSpec:
    """The instance's stored request with its flavor as its row records it; raises what reading
    it raised. The stored JSON text is decoded once for all instances whose texts are the same
    but for their own uuid, standing once in instance_uuids (most of a fleet's time is decoding)."""
    uuid, text, properties = instance["uuid"], instance["request_spec"], instance["filter_properties"]
    sizes = tuple(instance[c] for c in ("memory_mb", "root_gb", "ephemeral_gb", "vcpus", "flavor_name"))
    shared = text is not None and text.count(uuid) == 1 and (properties is None or uuid not in properties)
    key = (text.replace(uuid, "") if shared else (uuid, text), properties, sizes)
    found = parsed.get(key)
    if found is None:
        try:
            request = _decoded(text)
            spec = RequestSpec.from_wire(request, _decoded(properties) or {})
            found = dataclasses.replace(spec, flavor=flavor_of({**instance, "request_spec": request}),
                                        retry=Retry(), force_hosts=[], force_nodes=[], ignore_hosts=[])
        except (InvalidRequest, MoveRefused, TypeError, ValueError) as exc:
            found = exc
        if shared and isinstance(found, RequestSpec) and found.instance_uuids != [uuid]:
            key = ((uuid, text), properties, sizes)  # its uuid stands elsewhere: read for it alone
        parsed[key] = found
    if isinstance(found, Exception):
        raise found
    return found


def _decoded(text: str | None) -> Any:
    return None if text is None else jsonutils.loads(text)


def _bare_flavor(instance: dict[str, Any]) -> Flavor:
    return Flavor(memory_mb=instance["memory_mb"] or 0, root_gb=instance["root_gb"] or 0,
                  ephemeral_gb=instance["ephemeral_gb"] or 0, vcpus=instance["vcpus"] or 0)
