"""``berth aggregate ...`` and ``berth server group ...``: host aggregates and server groups.

Every command is one RPC call to the scheduler (scheduler.admin.grouping.AdminEndpoint),
after one that finds a server group named by name;
the scheduler checks the arguments and changes nothing when one is wrong.
"""

import argparse
import json

from scheduler.cmd import arguments, output
from scheduler.cmd.arguments import positive
from scheduler.cmd.references import group_uuid
from scheduler.policy import server_groups


def _metadata(text):
    """``key=value`` (set) or ``key`` / ``key=`` (unset)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not key:
        raise argparse.ArgumentTypeError(f"metadata is key=value (or key to unset it), got {text!r}")
    return key, (value if sep and value != "" else None)


def add_commands(subparsers):
    # oslo.config's sub-command keeps "name" for the command itself: no dest may be "name".
    actions = arguments.actions(subparsers, "aggregate", "Host aggregates: hosts, metadata, zones.",
                                "aggregate_action")

    create = actions.add_parser("create", help="Create an aggregate (in an availability zone).")
    create.add_argument("aggregate_name", metavar="NAME")
    create.add_argument("--zone", metavar="AZ", help="its availability zone")
    output.add_options(create)
    create.set_defaults(func=aggregate_create)

    delete = actions.add_parser("delete", help="Delete an aggregate.")
    delete.add_argument("aggregate_name", metavar="NAME")
    delete.set_defaults(func=aggregate_delete)

    for verb, func, text in (("add-host", aggregate_add_host, "Add a host to an aggregate."),
                             ("remove-host", aggregate_remove_host, "Remove a host from an aggregate.")):
        parser = actions.add_parser(verb, help=text)
        parser.add_argument("aggregate_name", metavar="NAME")
        parser.add_argument("aggregate_host", metavar="HOST")
        output.add_options(parser)
        parser.set_defaults(func=func)

    meta = actions.add_parser(
        "set-metadata", help="Set (key=value) or unset (key) metadata; availability_zone=AZ sets the zone."
    )
    meta.add_argument("aggregate_name", metavar="NAME")
    meta.add_argument("metadata", nargs="+", type=_metadata, metavar="KEY=VALUE")
    output.add_options(meta)
    meta.set_defaults(func=aggregate_set_metadata)

    listing = actions.add_parser("list", help="Every aggregate: zone, hosts, metadata.")
    output.add_options(listing)
    listing.set_defaults(func=aggregate_list)

    show = actions.add_parser("show", help="One aggregate.")
    show.add_argument("aggregate_name", metavar="NAME")
    output.add_options(show)
    show.set_defaults(func=aggregate_show)

    actions = arguments.actions(subparsers, "server-group", "Server groups: affinity and anti-affinity.",
                                "group_action")

    create = actions.add_parser("create", help="Create a server group and print it, as show does.")
    create.add_argument("group_name", metavar="NAME")
    create.add_argument("--policy", required=True, choices=server_groups.POLICIES,
                        help="where its members go relative to each other")
    create.add_argument("--max-server-per-host", type=positive, metavar="N",
                        help="anti-affinity: at most N members per host (default 1)")
    output.add_options(create)
    create.set_defaults(func=group_create)

    listing = actions.add_parser("list", help="Every server group: policy, rules, members.")
    output.add_options(listing)
    listing.set_defaults(func=group_list)

    for verb, func, text in (("show", group_show, "One server group and its members."),
                             ("delete", group_delete, "Delete a server group.")):
        parser = actions.add_parser(verb, help=text)
        parser.add_argument("group_reference", metavar="GROUP",
                            help="a UUID, or the name of exactly one server group")
        if verb == "show":
            output.add_options(parser)
        parser.set_defaults(func=func)


def _print_aggregates(aggregates, out, args=None):
    output.emit(
        args,
        ["NAME", "ZONE", "HOSTS", "METADATA"],
        [[a["name"], a.get("availability_zone"), ",".join(a["hosts"]),
          ",".join(f"{k}={v}" for k, v in sorted(a["metadata"].items()))]
         for a in aggregates],
        out,
    )


def _print_aggregate(aggregate, out, args):
    """One aggregate, as ``aggregate show`` prints it: its fields and their values."""
    output.emit_one(args, {"name": aggregate["name"], "zone": aggregate.get("availability_zone"),
                           "hosts": list(aggregate["hosts"]),
                           "metadata": dict(sorted(aggregate["metadata"].items()))},
                    out, text={"hosts": ", ".join, "metadata": _metadata_text})


def _metadata_text(metadata):
    return "\n".join(f"{key}={value}" for key, value in metadata.items())


def aggregate_create(client, args, out):
    _print_aggregate(client.admin_call({}, "create_aggregate", name=args.aggregate_name,
                                       availability_zone=args.zone), out, args)
    return 0


def aggregate_delete(client, args, out):
    client.admin_call({}, "delete_aggregate", name=args.aggregate_name)
    print(f"aggregate {args.aggregate_name} deleted", file=out)
    return 0


def aggregate_add_host(client, args, out):
    _print_aggregate(client.admin_call({}, "aggregate_add_host", name=args.aggregate_name,
                                       host=args.aggregate_host), out, args)
    return 0


def aggregate_remove_host(client, args, out):
    _print_aggregate(client.admin_call({}, "aggregate_remove_host", name=args.aggregate_name,
                                       host=args.aggregate_host), out, args)
    return 0


def aggregate_set_metadata(client, args, out):
    _print_aggregate(client.admin_call({}, "aggregate_set_metadata", name=args.aggregate_name,
                                       metadata=dict(args.metadata)), out, args)
    return 0


def aggregate_list(client, args, out):
    _print_aggregates(client.admin_call({}, "list_aggregates"), out, args)
    return 0


def aggregate_show(client, args, out):
    _print_aggregate(client.admin_call({}, "show_aggregate", name=args.aggregate_name), out, args)
    return 0


def group_create(client, args, out):
    rules = {"max_server_per_host": args.max_server_per_host} if args.max_server_per_host else {}
    group = client.admin_call({}, "create_server_group", name=args.group_name, policy=args.policy,
                              rules=rules)
    print_group(group, out, args)
    return 0


def _print_groups(groups, out, args=None):
    # The scheduler lists as members only the instances not DELETED.
    output.emit(
        args,
        ["UUID", "NAME", "POLICY", "RULES", "MEMBERS"],
        [[g["uuid"], g["name"], g["policy"], json.dumps(g["rules"]) if g["rules"] else None,
          len(g["members"])] for g in groups],
        out,
    )


def group_list(client, args, out):
    _print_groups(client.admin_call({}, "list_server_groups"), out, args)
    return 0


def group_show(client, args, out):
    group = client.admin_call({}, "show_server_group", group_uuid=group_uuid(client, args.group_reference))
    print_group(group, out, args)
    return 0


def print_group(group, out, args):
    """One server group, as ``server-group show`` prints it: its fields and their values."""
    output.emit_one(args, {key: group.get(key) for key in (
        "uuid", "name", "policy", "project_id", "created_at", "rules", "members")}, out,
        text={"members": "\n".join})


def group_delete(client, args, out):
    uuid = group_uuid(client, args.group_reference)
    client.admin_call({}, "delete_server_group", group_uuid=uuid)
    print(f"server group {uuid} deleted", file=out)
    return 0
