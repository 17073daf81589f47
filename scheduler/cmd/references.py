"""Instances and server groups as the commands name them: by UUID, or by name."""

import difflib
import uuid as uuidlib

from berth_contract.request_spec import MAX_LIST
from scheduler import rpc
from scheduler.cmd.arguments import CommandError

#: The UUIDs an ambiguous name's message lists at most.
AMBIGUOUS_SHOWN = 10


def as_uuid(text):
    """``text`` as a UUID, or None when it is not one (then it is a name)."""
    try:
        return str(uuidlib.UUID(text))
    except ValueError:
        return None


def one_named(kind, name, found):
    """The UUID of the only one of ``found`` (those named ``name``)."""
    if not found:
        raise CommandError(f"No {kind} named {name}")
    if len(found) > 1:
        shown = ", ".join(f["uuid"] for f in found[:AMBIGUOUS_SHOWN])
        more = ", ..." if len(found) > AMBIGUOUS_SHOWN else ""
        raise CommandError(f"Name {name} is ambiguous: {len(found)} {kind}s ({shown}{more}); use a UUID")
    return found[0]["uuid"]


def instance_uuid(client, reference):
    """The UUID of the instance ``reference`` is, or names (one not DELETED)."""
    return as_uuid(reference) or one_named("instance", reference, client.list_instances({}, name=reference))


def hinted_instance(client, key, reference):
    """The UUID of the instance a ``--hint KEY=reference`` (same_host, different_host) names;
    refused naming the hint when there is none such (or the name is not one an instance can have)."""
    refused = CommandError(f"--hint {key}={reference}: no instance named or with UUID {reference}")
    uuid = as_uuid(reference)
    if uuid is not None:
        if uuid not in instances_by_uuid(client, [uuid]):
            raise refused
        return uuid
    try:
        found = client.list_instances({}, name=reference)
    except rpc.RemoteError:  # a name no instance can have (too long, control characters...)
        raise refused from None
    if not found:
        raise refused
    try:
        return one_named("instance", reference, found)
    except CommandError as exc:
        raise CommandError(f"--hint {key}={reference}: {exc}") from None


def group_uuid(client, reference):
    """The UUID of the server group ``reference`` is, or names."""
    return as_uuid(reference) or one_named(
        "server group", reference, client.admin_call({}, "list_server_groups", name=reference))


def instances_by_uuid(client, uuids):
    """{uuid: instance} of those of ``uuids`` the scheduler knows, DELETED included; asked
    for a page at a time."""
    found = {}
    for start in range(0, len(uuids), MAX_LIST):
        page = uuids[start:start + MAX_LIST]
        found.update((i["uuid"], i) for i in client.list_instances({}, include_deleted=True, uuids=page))
    return found


def unknown_host(client, host, what=""):
    """The refusal of ``host`` when no host of that name has reported (``what``: what else is
    not there, said after it), naming the nearest that has; None when it has reported."""
    names = [h["host"] for h in client.list_hosts({})]
    if host in names:
        return None
    near = difflib.get_close_matches(host, names, n=1, cutoff=0.7)
    hint = f": did you mean {near[0]!r}?" if near else " (berth host list names them)"
    return CommandError(f"no host {host!r} has reported{what}{hint}")
