"""The scheduler's fleet as the rebalance planner reads it: a copy of its host table, and every
instance on those hosts with the request it was built with (scheduler.policy.rebalance.Snapshot)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from scheduler import states
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.planning import lookups
from scheduler.planning.moves import MoveRefused, flavor_of
from scheduler.policy.rebalance import Resident, Snapshot
from scheduler.policy.request_spec import Flavor, RequestSpec, Retry
from scheduler.utils import jsonutils

LOG = logging.getLogger(__name__)


def fleet_snapshot(conf: Any, database: Any, hosts: Any) -> Snapshot:
    """The host table as it is now (a copy: planning never touches the scheduler's own) and the
    instances on its hosts. Only ACTIVE instances may move; the others (building, moving) hold
    their room where they are. An instance whose stored request cannot be read stays put."""
    with hosts.lock:
        table = hosts.table.copy()
    residents = []
    parsed: dict[str, RequestSpec | Exception] = {}  # requests that differ only in their instance
    for instance in database.instances_to_plan([states.ACTIVE, states.BUILDING, *states.MOVING]):
        if instance["host"] not in table.index:
            continue
        residents.append(_resident(database, instance, parsed))
    return Snapshot.from_conf(table, _with_load(table, residents), conf)


def _with_load(table: Any, residents: list[Resident]) -> list[Resident]:
    """``residents`` each carrying a share of its host's measured load in proportion to its vCPUs:
    the agents measure hosts, not each instance, and a move takes its share along (balance)."""
    vcpus: dict[str, float] = {}
    for resident in residents:
        vcpus[resident.host] = vcpus.get(resident.host, 0.0) + resident.flavor.vcpus
    shared = []
    for resident in residents:
        row = table.index[resident.host]
        measured = bool(table.util_measured[row]) and vcpus[resident.host] > 0
        load = float(table.cpu_util[row] * table.vcpus_total[row]) if measured else 0.0
        shared.append(dataclasses.replace(resident, load=load * resident.flavor.vcpus / vcpus[resident.host])
                      if measured else resident)
    return shared


def _resident(database: Any, instance: dict[str, Any],
              parsed: dict[str, RequestSpec | Exception]) -> Resident:
    uuid = instance["uuid"]
    movable = instance["state"] == states.ACTIVE
    try:
        spec = dataclasses.replace(_request(instance, parsed), instance_uuids=[uuid])
        if lookups.reads_placements(spec):
            lookups.prepare_spec(database, spec, add_members=False)
    except (InvalidRequest, MoveRefused, NoValidHost, TypeError) as exc:
        LOG.info("Instance %s stays where it is in rebalance plans: its stored request cannot be read (%s)",
                 uuid, exc)
        spec = RequestSpec(instance_uuids=[uuid], flavor=_bare_flavor(instance))
        movable = False
    return Resident(uuid, instance["host"], spec, movable)


def _request(instance: dict[str, Any], parsed: dict[str, RequestSpec | Exception]) -> RequestSpec:
    """The instance's stored request with its flavor as its row records it, read once for every
    instance whose request and flavor are the same but for the instance; raises what reading it raised."""
    stored = {k: v for k, v in (instance["request_spec"] or {}).items() if k != "instance_uuids"} \
        if isinstance(instance["request_spec"], dict) else instance["request_spec"]
    sizes = [instance[c] for c in ("memory_mb", "root_gb", "ephemeral_gb", "vcpus", "flavor_name")]
    key = jsonutils.dumps([stored, instance["filter_properties"], *sizes])
    found = parsed.get(key)
    if found is None:
        try:
            spec = RequestSpec.from_wire(instance["request_spec"], instance["filter_properties"] or {})
            found = dataclasses.replace(spec, flavor=flavor_of(instance), retry=Retry(), force_hosts=[],
                                        force_nodes=[], ignore_hosts=[])
        except (InvalidRequest, MoveRefused, TypeError) as exc:
            found = exc
        parsed[key] = found
    if isinstance(found, Exception):
        raise found
    return found


def _bare_flavor(instance: dict[str, Any]) -> Flavor:
    return Flavor(memory_mb=instance["memory_mb"] or 0, root_gb=instance["root_gb"] or 0,
                  ephemeral_gb=instance["ephemeral_gb"] or 0, vcpus=instance["vcpus"] or 0)
