"""Checks of what the agent's RPC methods receive, before anything is claimed or stored.

Each raises InvalidRequest naming the field; the RPC server then dead-letters
the cast with that reason. The flavor and retry record are read with the
scheduler's own RequestSpec rules, so both sides agree on what is valid.
"""

import json

from berth_contract import amqp_names as names
from berth_contract import host_names
from berth_contract.json_checks import integer, json_object, sized_list
from berth_contract.request_spec import MAX_LIST, Flavor, Retry, is_bounded_number, parse_uuid
from scheduler.exception import InvalidRequest

LIMIT_KEYS = ("memory_mb", "disk_gb", "vcpu")
MAX_LIMIT = 2**53


def run_instance_args(instance, request_spec, filter_properties):
    """The checked ``(instance, request_spec, filter_properties)`` of a build request."""
    return _placement_args("run_instance", instance, request_spec, filter_properties)


def _placement_args(method, instance, request_spec, filter_properties):
    """The checked ``(instance, request_spec, filter_properties)`` of a build or a move in."""
    json_object(instance, f"{method}: instance", optional=False)
    uuid = parse_uuid(instance.get("uuid"), f"{method}: instance.uuid")
    Flavor.from_wire(instance.get("flavor"), f"{method}: instance.flavor")
    project = instance.get("project_id")
    if project is not None and (not isinstance(project, str) or len(project) > 255):
        raise InvalidRequest(f"{method}: instance.project_id must be a string")
    request_spec = json_object(request_spec, f"{method}: request_spec:")
    filter_properties = json_object(filter_properties, f"{method}: filter_properties:")
    limits = json_object(filter_properties.get("limits"), f"{method}: filter_properties.limits:")
    for key, value in limits.items():
        if key not in LIMIT_KEYS:
            continue  # limits of resources this agent does not claim
        if value is None:
            continue
        if not is_bounded_number(value, MAX_LIMIT):
            raise InvalidRequest(
                f"{method}: filter_properties.limits.{key} must be a number >= 0, got {value!r}"[:300]
            )
    Retry.from_wire(filter_properties.get("retry"), f"{method}: filter_properties.retry")
    return dict(instance, uuid=uuid), request_spec, filter_properties


#: The kinds of move a migration record names (scheduler's migrations table).
MOVE_KINDS = ("resize", "migration", "live-migration", "evacuation")
MAX_MIGRATION_ID = 2**53


def migration_id(value, method):
    return integer(value, f"{method}: migration_id", 0, MAX_MIGRATION_ID)


def move_instance_args(instance, request_spec, filter_properties, migration, method="move_instance"):
    """The checked ``(instance, request_spec, filter_properties, migration)`` of a move_instance
    (or a prepare_move): ``migration`` {"id", "kind", "source_host", "live" (default False),
    "old_flavor" (optional)}."""
    instance, request_spec, filter_properties = _placement_args(
        method, instance, request_spec, filter_properties)
    return instance, request_spec, filter_properties, _migration(migration, method)


def _migration(migration, method, dest=False):
    """The checked migration of a move's message; with its ``dest_host`` if ``dest``."""
    migration = json_object(migration, f"{method}: migration", optional=False)
    integer(migration.get("id"), f"{method}: migration.id", 0, MAX_MIGRATION_ID)
    kind = migration.get("kind")
    if kind not in MOVE_KINDS:
        raise InvalidRequest(f"{method}: migration.kind must be one of {', '.join(MOVE_KINDS)}, "
                             f"got {kind!r}"[:300])
    host_names.check(migration.get("source_host"), f"{method}: migration.source_host")
    if dest:
        host_names.check(migration.get("dest_host"), f"{method}: migration.dest_host")
    live = migration.get("live", False)
    if not isinstance(live, bool):
        raise InvalidRequest(f"{method}: migration.live must be true or false, got {live!r}"[:300])
    if migration.get("old_flavor") is not None:
        Flavor.from_wire(migration["old_flavor"], f"{method}: migration.old_flavor")
    return dict(migration, live=live)


def prepare_move_args(instance, request_spec, filter_properties, migration):
    """The checked ``(instance, request_spec, filter_properties, migration)`` of a prepare_move."""
    return move_instance_args(instance, request_spec, filter_properties, migration, "prepare_move")


#: The most a destination's transfer may hold, in characters of JSON.
MAX_TRANSFER = 16384


def migrate_out_args(uuid, migration, transfer):
    """The checked ``(instance_uuid, migration, transfer)`` of a migrate_out."""
    migration = _migration(migration, "migrate_out", dest=True)
    transfer = json_object(transfer, "migrate_out: transfer", optional=False)
    if len(json.dumps(transfer)) > MAX_TRANSFER:
        raise InvalidRequest(f"migrate_out: transfer must hold at most {MAX_TRANSFER} characters of JSON")
    return instance_uuid(uuid, "migrate_out"), migration, transfer


def move_step_args(uuid, migration, method):
    """The checked ``(instance_uuid, migration_id)`` of a finish_move or an abort_move."""
    return instance_uuid(uuid, method), migration_id(migration, method)


def end_resize_args(uuid, migration, confirmed):
    """The checked ``(instance_uuid, migration_id, confirmed)`` of an end_resize."""
    if not isinstance(confirmed, bool):
        raise InvalidRequest(f"end_resize: confirmed must be true or false, got {confirmed!r}"[:300])
    return instance_uuid(uuid, "end_resize"), migration_id(migration, "end_resize"), confirmed


def instance_uuid(value, method):
    return parse_uuid(value, f"{method}: instance_uuid")


#: The longest reason a terminate may give.
MAX_REASON = 1000


def reason(value, method):
    """None, or text of 1 to MAX_REASON characters without control characters (one log line,
    as a host name is: the scheduler's reasons are made of host names, UUIDs and words)."""
    if value is not None and not (isinstance(value, str) and 0 < len(value) <= MAX_REASON
                                  and not names.CONTROL.search(value)):
        raise InvalidRequest(f"{method}: reason must be text of 1 to {MAX_REASON} characters without control "
                             f"characters, got {value!r}"[:300])
    return value


def _fraction(value, where):
    if not is_bounded_number(value, 1.0):
        raise InvalidRequest(f"{where} must be a fraction from 0 to 1, got {value!r}"[:300])
    return float(value)


def instance_uuids(value, method):
    """None (every instance), or a list of 1 to MAX_LIST instance UUIDs."""
    if value is None:
        return None
    sized_list(value, f"{method}: instance_uuids", 1, MAX_LIST, "instance UUIDs, or null for every instance")
    return list(dict.fromkeys(parse_uuid(u, f"{method}: instance_uuids") for u in value))


def fake_load_args(cpu, memory, uuids):
    """The checked ``(cpu, memory, instance_uuids)`` of a set_fake_load."""
    return (_fraction(cpu, "set_fake_load: cpu (of the instance's vCPUs)"),
            None if memory is None else _fraction(memory, "set_fake_load: memory (of the instance's memory)"),
            instance_uuids(uuids, "set_fake_load"))
