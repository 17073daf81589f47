"""``berth server create``, ``delete``, ``instances`` and ``show``: instances.

``boot`` casts one request for all its instances (placed all or none), after the calls that
find the instances and the server group its hints name; ``delete`` finds every instance it
names before it casts a delete for any. With ``--wait`` both poll until the instances settle.
"""

import argparse
import logging
import sys
import uuid as uuidlib

from berth_contract.request_spec import MAX_INSTANCES_PER_REQUEST, check_display_names, display_name
from scheduler import rpc, states
from scheduler.cmd import move_history, output
from scheduler.cmd.arguments import CommandError, UsageError, hint, positive
from scheduler.cmd.references import (
    as_uuid,
    group_uuid,
    hinted_instance,
    instance_uuid,
    instances_by_uuid,
    unknown_host,
)
from scheduler.cmd.waiting import wait_for
from scheduler.exception import InvalidRequest

LOG = logging.getLogger(__name__)


def _non_negative(text):
    value = int(text) if text.lstrip("-").isdigit() else None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def _count(text):
    value = positive(text)
    if value > MAX_INSTANCES_PER_REQUEST:
        raise argparse.ArgumentTypeError(f"at most {MAX_INSTANCES_PER_REQUEST} instances a request "
                                         f"(the scheduler refuses more), got {value}")
    return value


def _name_template(text):
    try:
        return display_name(text, "--name")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--name: ")) from None


def _image_property(text):
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"an image property is KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_boot_and_delete(subparsers):
    boot = subparsers.add_parser("boot", help="Request instances and print their UUIDs.")
    boot.add_argument("--flavor", help="a flavor the scheduler keeps, by name (berth flavor list)")
    boot.add_argument("--flavor-ram", type=positive, metavar="MB", help="memory of an unnamed flavor")
    boot.add_argument("--flavor-disk", type=_non_negative, metavar="GB", help="root disk")
    boot.add_argument("--flavor-vcpus", type=positive, metavar="N", help="vCPUs of an unnamed flavor")
    boot.add_argument("--image", dest="image_id", metavar="IMAGE",
                      help="the image to boot (request_spec.image.id): with the qemu driver, an image of "
                      "[qemu] images_path by name; the fake and host drivers boot none")
    boot.add_argument("--image-property", dest="image_properties", type=_image_property, action="append",
                      default=[], metavar="KEY=VALUE",
                      help="a property of the image booted (request_spec.image.properties), e.g. "
                      "hw_architecture=x86_64; repeat for several")
    boot.add_argument("--count", "--max-count", "--max", dest="count", type=_count, default=1,
                      metavar="N", help=f"how many instances, 1 to {MAX_INSTANCES_PER_REQUEST} (placed all "
                      "or none, unless --min-count)")
    boot.add_argument("--min-count", "--min", dest="min_count", type=_count, metavar="M",
                      help="boot as many of the --count instances as fit, at least M (as Nova's min_count "
                      "and max_count); fewer than M fit: none booted, and the reason said. Those that "
                      "do not fit are not booted (DELETED, with the reason), never left in ERROR")
    # oslo.config keeps the dest "name" for the sub-command itself.
    boot.add_argument("--name", dest="display_name", type=_name_template, metavar="NAME",
                      help="the instances' name; %%d in it becomes each one's index from 1 (web-%%d: "
                      "web-1, web-2...); without %%d several instances are NAME-1, NAME-2... as in Nova")
    boot.add_argument("--hint", type=hint, action="append", default=[], metavar="KEY=VALUE",
                      help="a scheduler hint (group=UUID or NAME, same_host=UUID or NAME, different_host="
                      "UUID or NAME, query=JSON, ...); repeat for several, a repeated key makes a list")
    # dest differs from the option name, as for --host below.
    boot.add_argument("--availability-zone", dest="boot_zone", metavar="AZ",
                      help="only hosts of this availability zone (AvailabilityZoneFilter)")
    boot.add_argument("--project", default="admin", help="the project of the instances (default admin)")
    boot.add_argument("--wait", action="store_true", help="wait until every instance settles")
    boot.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                      help="with --wait: give up after this long (default 300)")
    output.add_options(boot)  # of the listing --wait prints
    boot.set_defaults(func=boot_command)

    delete = subparsers.add_parser("delete", help="Delete instances.")
    delete.add_argument("references", nargs="+", metavar="INSTANCE",
                        help="a UUID, or the name of exactly one instance not DELETED")
    delete.add_argument("--wait", action="store_true", help="wait until every instance is DELETED")
    delete.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                        help="with --wait: give up after this long (default 300)")
    output.add_options(delete)  # of the listing --wait prints
    delete.set_defaults(func=delete_command)


def add_listings(subparsers):
    instances = subparsers.add_parser("instances", help="List instances.")
    # dest differs from the option name: oslo.config's [DEFAULT] host shadows "host".
    instances.add_argument("--host", dest="on_host", metavar="HOST", help="only the instances on HOST")
    instances.add_argument("--state", type=str.upper, choices=states.ALL, metavar="STATE",
                           help=f"only the instances in STATE, any case: {', '.join(states.ALL).lower()}")
    instances.add_argument("--all", action="store_true", help="include deleted instances")
    output.add_options(instances)
    instances.set_defaults(func=instances_command)

    show = subparsers.add_parser("show", help="One instance: name, state, host, zone, fault reason, "
                                  "the request id it was booted by, moves.")
    show.add_argument("reference", metavar="INSTANCE",
                      help="a UUID, or the name of exactly one instance not DELETED")
    output.add_options(show)
    show.set_defaults(func=show_command)


#: The fields of a flavor a request carries (berth_contract.request_spec.Flavor).
FLAVOR_FIELDS = ("name", "memory_mb", "root_gb", "ephemeral_gb", "vcpus", "extra_specs")


def named_flavor(client, name):
    """The flavor ``name`` as the scheduler keeps it, in the form a request carries it."""
    try:
        found = client.admin_call({}, "show_flavor", name=name)
    except rpc.RemoteError as exc:
        raise CommandError(str(exc.value)) from None
    return {key: found[key] for key in FLAVOR_FIELDS}


def flavor_from_args(client, args):
    sizes = (args.flavor_ram, args.flavor_disk, args.flavor_vcpus)
    if args.flavor:
        if any(v is not None for v in sizes):
            raise UsageError("give either --flavor or --flavor-ram/--flavor-disk/--flavor-vcpus")
        return named_flavor(client, args.flavor)
    if args.flavor_ram is None or args.flavor_vcpus is None:
        raise UsageError("give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)")
    return {
        "memory_mb": args.flavor_ram,
        "root_gb": args.flavor_disk or 0,
        "ephemeral_gb": 0,
        "vcpus": args.flavor_vcpus,
    }


def build_request(flavor, count, hints=(), project="admin", availability_zone=None, name=None,
                  image_properties=None, min_count=None, image_id=None):
    """``hints``: (key, value) pairs or a dict; a key given more than once becomes a list.
    ``name``: the instances' display_name (the scheduler numbers them: instance_names).
    ``min_count``: as many of the ``count`` as fit, at least this many (else all or none)."""
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    properties = {"project_id": project}
    if availability_zone:
        properties["availability_zone"] = availability_zone
    if name is not None:
        properties["display_name"] = name
    request_spec = {
        "instance_uuids": uuids,
        "num_instances": count,
        "instance_type": flavor,
        "instance_properties": properties,
        "image": {"properties": dict(image_properties or {})},
    }
    if image_id is not None:
        request_spec["image"]["id"] = image_id
    if min_count is not None:
        request_spec["min_num_instances"] = min_count
    scheduler_hints = {}
    for key, value in hints.items() if isinstance(hints, dict) else hints:
        if key in scheduler_hints:
            previous = scheduler_hints[key]
            scheduler_hints[key] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            scheduler_hints[key] = value
    filter_properties = {"scheduler_hints": scheduler_hints}
    return request_spec, filter_properties


def _resolve_hints(client, hints):
    """``hints`` ((key, value) pairs) with the instances and the server group they name by
    name replaced by their UUIDs. A group named by UUID is looked up too: refused here,
    before any instance exists, when it does not."""
    if sum(1 for key, _ in hints if key == "group") > 1:
        raise UsageError("give one --hint group=UUID or NAME")
    resolved = []
    for key, value in hints:
        if key == "group":
            uuid = as_uuid(value)
            if uuid is None:
                uuid = group_uuid(client, value)  # found by its name: it exists
            else:
                client.admin_call({}, "show_server_group", group_uuid=uuid)
            value = uuid
        elif key in ("same_host", "different_host"):
            value = hinted_instance(client, key, value)
        resolved.append((key, value))
    return resolved


def formats_with_wait(args, command):
    """-f and -c shape the listing --wait prints: refused without --wait, before anything is done."""
    if output.wants_format(args) and not args.wait:
        raise CommandError(f"-f and -c go with --wait (the listing it prints); without it {command} prints "
                           "one line per instance")


def boot_command(client, args, out):
    formats_with_wait(args, "boot")
    keys = [key for key, _ in args.image_properties]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise CommandError(f"--image-property {', '.join(twice)} given more than once")
    if args.min_count is not None and args.min_count > args.count:
        raise CommandError(f"--min-count {args.min_count} is more than --count {args.count}; nothing booted")
    flavor = flavor_from_args(client, args)
    try:
        check_display_names(args.display_name, args.count, "--name")
    except InvalidRequest as exc:
        raise CommandError(str(exc)) from None
    request_spec, filter_properties = build_request(
        flavor, args.count, _resolve_hints(client, args.hint), args.project, availability_zone=args.boot_zone,
        name=args.display_name, image_properties=dict(args.image_properties), min_count=args.min_count,
        image_id=args.image_id,
    )
    uuids = request_spec["instance_uuids"]
    ctxt = {"project_id": args.project, "request_id": rpc.new_request_id()}
    with rpc.handling(ctxt):
        LOG.debug("Booting %s as request %s", ", ".join(uuids), ctxt["request_id"])
        client.run_instance(ctxt, request_spec, filter_properties)
    if not args.wait:
        for u in uuids:
            print(u, file=out)
        return 0
    found = wait_for(client, uuids, args.timeout)
    faults = {(found[u]["state"], found[u].get("fault_reason")) for u in uuids}
    # Asked for as many as fit: those that did not are DELETED, never built.
    left_out = [u for u in uuids if found[u]["state"] == states.DELETED] if args.min_count else []
    booted = [u for u in uuids if u not in left_out]
    if (len(uuids) > 1 or not booted) and len(faults) == 1 and next(iter(faults))[0] in (states.ERROR,
                                                                                       states.DELETED):
        # One refusal of the whole request: said once, not once per instance.
        which = f"none of the {len(uuids)} instances" if len(uuids) > 1 else "the instance was not"
        raise CommandError(f"{which} booted: {next(iter(faults))[1]}")
    print_instances([found[u] for u in booted], out, args)
    if left_out:  # after a listing in a format, on standard error: what reads it parses the listing only
        print(f"{len(booted)} of {len(uuids)} booted; the other {len(left_out)} not: "
              f"{found[left_out[0]].get('fault_reason')}",
              file=sys.stderr if output.wants_format(args) else out)
    return 1 if any(found[u]["state"] == states.ERROR for u in uuids) else 0


def delete_command(client, args, out):
    """Delete the instances named (by UUID or name); none at all when one of them does not exist."""
    formats_with_wait(args, "delete")
    uuids = []
    for reference in args.references:
        try:
            uuids.append(instance_uuid(client, reference))
        except CommandError as exc:
            raise CommandError(f"{exc}; nothing deleted") from None
    uuids = list(dict.fromkeys(uuids))
    known = instances_by_uuid(client, uuids)
    missing = [u for u in uuids if u not in known]
    if missing:
        raise CommandError(f"No instance {', '.join(missing)}; nothing deleted")
    ctxt = {"request_id": rpc.new_request_id()}
    for u in uuids:
        if known[u]["state"] == states.DELETED:
            print(f"{u} deleted already", file=out)
            continue
        with rpc.handling(ctxt):
            LOG.debug("Deleting %s as request %s", u, ctxt["request_id"])
            client.delete_instance(ctxt, u)
    if args.wait:
        found = wait_for(client, uuids, args.timeout, settled=(states.DELETED,))
        print_instances(found.values(), out, args)
    else:
        for u in uuids:
            if known[u]["state"] != states.DELETED:
                print(f"{u} deleting", file=out)
    return 0


def instances_command(client, args, out):
    found = client.list_instances({}, host=args.on_host, state=args.state, include_deleted=args.all)
    # A misspelt host would list nothing, as an empty one does: say which it is.
    host = args.on_host
    refusal = unknown_host(client, host, ", and no instance is on it") if not found and host else None
    if refusal is not None:
        raise refusal
    print_instances(found, out, args)
    return 0


#: What ``berth server show`` prints, in this order (then move_host while the instance moves, then its moves).
SHOWN = ("uuid", "name", "state", "host", "node", "zone", "flavor_name", "memory_mb", "root_gb",
         "ephemeral_gb", "vcpus", "project", "server_group", "hints", "attempts", "fault_reason",
         "request_id", "created_at", "updated_at", "scheduled_at", "launched_at", "deleted_at")


def show_command(client, args, out):
    instance = client.show_instance({}, instance_uuid(client, args.reference))
    hints = requested_hints(instance)
    shown = dict(instance, name=instance.get("display_name"), zone=requested_zone(instance),
                 project=instance.get("project_id"), server_group=hints.pop("group", None),
                 hints=", ".join(f"{key}={value}" for key, value in sorted(hints.items())) or None)
    moves_of = move_history.history(client, instance["uuid"])
    record = {key: shown.get(key) for key in SHOWN}
    if output.wants_format(args):
        # One object: the fields above, every other field of the instance, and its moves (a list,
        # null when the scheduler cannot tell them).
        record.update((key, value) for key, value in instance.items()
                      if key not in record and key != "display_name")
    elif instance.get("move_host"):  # moving: held on this host too until the move ends
        record["move_host"] = instance["move_host"]
    record["moves"] = None if moves_of is None else move_history.records(moves_of)
    output.emit_one(args, record, out, text={"moves": move_history.lines})
    return 0


def requested_hints(instance):
    """The scheduler hints the instance's request gave (a copy), {} when it gave none."""
    properties = instance.get("filter_properties")
    hints = properties.get("scheduler_hints") if isinstance(properties, dict) else None
    return dict(hints) if isinstance(hints, dict) else {}


def requested_zone(instance):
    """The availability zone the instance's request asked for (in its stored request), or None."""
    request_spec = instance.get("request_spec")
    properties = request_spec.get("instance_properties") if isinstance(request_spec, dict) else None
    return properties.get("availability_zone") if isinstance(properties, dict) else None


def print_instances(instances, out, args=None):
    # NAME, FLAVOR and ZONE come last: scripts read the first six columns by position, and
    # the fault reason (free text) from the seventh on.
    output.emit(
        args,
        ["UUID", "STATE", "HOST", "RAM MB", "DISK GB", "VCPUS", "FAULT", "NAME", "FLAVOR", "ZONE"],
        [
            [i["uuid"], i["state"], i.get("host"), i["memory_mb"],
             (i.get("root_gb") or 0) + (i.get("ephemeral_gb") or 0), i["vcpus"], i.get("fault_reason"),
             i.get("display_name"), i.get("flavor_name"), requested_zone(i)]
            for i in instances
        ],
        out,
    )

