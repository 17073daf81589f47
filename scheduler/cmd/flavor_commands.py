"""``berth flavor ...``: the flavors the scheduler keeps, which ``berth server create --flavor NAME`` and
``berth server resize --flavor NAME`` request.

Every command is one RPC call to the scheduler (scheduler.admin.flavors.FlavorEndpoint, admin API
1.1); the scheduler checks the flavor as it checks a request's and changes nothing when it is wrong.
"""

import argparse

from scheduler.cmd import arguments, output
from scheduler.cmd.arguments import positive, whole

COLUMNS = ["NAME", "RAM MB", "DISK GB", "EPHEMERAL GB", "VCPUS", "PROPERTIES"]


def _property(text):
    """``key=value``: (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"a property is KEY=VALUE, got {text!r}")
    return key.strip(), value


def _key(text):
    if not text.strip() or "=" in text:
        raise argparse.ArgumentTypeError(f"give the property's KEY alone, got {text!r}")
    return text.strip()


def add_commands(subparsers):
    # oslo.config's sub-command keeps "name" for the command itself: no dest may be "name".
    actions = arguments.actions(subparsers, "flavor", "Flavors: named sizes and properties (extra specs).",
                                "flavor_action")

    create = actions.add_parser("create", help="Create a flavor.")
    create.add_argument("flavor_name", metavar="NAME")
    create.add_argument("--ram", type=positive, required=True, metavar="MB", help="memory")
    create.add_argument("--disk", type=whole, required=True, metavar="GB", help="root disk (0: none)")
    create.add_argument("--vcpus", type=positive, required=True, metavar="N", help="virtual CPUs")
    create.add_argument("--ephemeral", type=whole, default=0, metavar="GB", help="ephemeral disk (default 0)")
    create.add_argument("--property", dest="properties", type=_property, action="append", default=[],
                        metavar="KEY=VALUE", help="an extra spec, e.g. hw:cpu_policy=dedicated; repeat "
                        "for several")
    output.add_options(create)
    create.set_defaults(func=create_command)

    listing = actions.add_parser("list", help="Every flavor.")
    output.add_options(listing)
    listing.set_defaults(func=list_command)

    show = actions.add_parser("show", help="One flavor.")
    show.add_argument("flavor_name", metavar="NAME")
    output.add_options(show)
    show.set_defaults(func=show_command)

    set_ = actions.add_parser("set", help="Set properties (extra specs) of a flavor.")
    set_.add_argument("flavor_name", metavar="NAME")
    set_.add_argument("--property", dest="properties", type=_property, action="append", required=True,
                      metavar="KEY=VALUE", help="repeat for several")
    output.add_options(set_)
    set_.set_defaults(func=set_command)

    unset = actions.add_parser("unset", help="Remove properties (extra specs) of a flavor.")
    unset.add_argument("flavor_name", metavar="NAME")
    unset.add_argument("--property", dest="keys", type=_key, action="append", required=True, metavar="KEY",
                       help="repeat for several")
    output.add_options(unset)
    unset.set_defaults(func=unset_command)

    delete = actions.add_parser("delete", help="Delete a flavor (its instances keep their sizes).")
    delete.add_argument("flavor_name", metavar="NAME")
    delete.set_defaults(func=delete_command)


def _properties(flavor):
    return ",".join(f"{k}={v}" for k, v in sorted(flavor["extra_specs"].items()))


def print_flavors(flavors, out, args=None):
    output.emit(args, COLUMNS, [
        [f["name"], f["memory_mb"], f["root_gb"], f["ephemeral_gb"], f["vcpus"], _properties(f)]
        for f in flavors], out)


def print_flavor(flavor, out, args):
    record = {key: flavor.get(key) for key in ("name", "memory_mb", "root_gb", "ephemeral_gb", "vcpus")}
    record["properties"] = dict(sorted(flavor["extra_specs"].items()))
    record.update(created_at=flavor.get("created_at"), updated_at=flavor.get("updated_at"))
    output.emit_one(args, record, out, text={"properties": _properties_text})


def _properties_text(properties):
    return "\n".join(f"{key}={value}" for key, value in properties.items())


def _repeated(pairs, what):
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise arguments.CommandError(f"{what} {', '.join(twice)} given more than once")
    return dict(pairs)


def create_command(client, args, out):
    flavor = {"name": args.flavor_name, "memory_mb": args.ram, "root_gb": args.disk,
              "ephemeral_gb": args.ephemeral, "vcpus": args.vcpus,
              "extra_specs": _repeated(args.properties, "--property")}
    print_flavor(client.admin_call({}, "create_flavor", flavor=flavor), out, args)
    return 0


def list_command(client, args, out):
    print_flavors(client.admin_call({}, "list_flavors"), out, args)
    return 0


def show_command(client, args, out):
    print_flavor(client.admin_call({}, "show_flavor", name=args.flavor_name), out, args)
    return 0


def set_command(client, args, out):
    properties = _repeated(args.properties, "--property")
    print_flavor(client.admin_call({}, "set_flavor_properties", name=args.flavor_name,
                                   properties=properties), out, args)
    return 0


def unset_command(client, args, out):
    keys = list(dict.fromkeys(args.keys))
    print_flavor(client.admin_call({}, "unset_flavor_properties", name=args.flavor_name, keys=keys),
                 out, args)
    return 0


def delete_command(client, args, out):
    client.admin_call({}, "delete_flavor", name=args.flavor_name)
    print(f"flavor {args.flavor_name} deleted", file=out)
    return 0
