"""berth: the operator's command line, over the same transport as the services."""

import argparse
import os
import sys
import time
import uuid as uuidlib

from oslo_config import cfg

from scheduler import config, flavors, rpc, states
from scheduler.client import SchedulerClient
from scheduler.cmd import admin_commands, output
from scheduler.cmd.arguments import positive
from scheduler.request_spec import MAX_INSTANCES_PER_REQUEST, MAX_LIST

PROG = "berth"
SETTLED = (states.ACTIVE, states.ERROR, states.DELETED)


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1."""


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


def _hint(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a hint is key=value, got {text!r}")
    return key, value


def _uuid(text):
    try:
        return str(uuidlib.UUID(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an instance UUID: {text!r}") from None


def add_commands(subparsers):
    boot = subparsers.add_parser("boot", help="Request instances and print their UUIDs.")
    boot.add_argument("--flavor", help=f"a named flavor: {', '.join(flavors.FLAVORS)}")
    boot.add_argument("--flavor-ram", type=positive, metavar="MB", help="memory of an unnamed flavor")
    boot.add_argument("--flavor-disk", type=_non_negative, metavar="GB", help="root disk")
    boot.add_argument("--flavor-vcpus", type=positive, metavar="N", help="vCPUs of an unnamed flavor")
    boot.add_argument("--count", type=_count, default=1,
                      help=f"how many instances, 1 to {MAX_INSTANCES_PER_REQUEST} (placed all or none)")
    boot.add_argument("--hint", type=_hint, action="append", default=[], metavar="KEY=VALUE",
                      help="a scheduler hint (group=UUID, same_host=UUID, different_host=UUID, "
                      "query=JSON, ...); repeat for several, a repeated key makes a list")
    # dest differs from the option name, as for --host below.
    boot.add_argument("--availability-zone", dest="boot_zone", metavar="AZ",
                      help="only hosts of this availability zone (AvailabilityZoneFilter)")
    boot.add_argument("--project", default="admin", help="the project of the instances (default admin)")
    boot.add_argument("--wait", action="store_true", help="wait until every instance settles")
    boot.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                      help="with --wait: give up after this long (default 300)")
    boot.set_defaults(func=boot_command)

    delete = subparsers.add_parser("delete", help="Delete instances.")
    delete.add_argument("uuids", nargs="+", type=_uuid, metavar="UUID")
    delete.add_argument("--wait", action="store_true", help="wait until every instance is DELETED")
    delete.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                        help="with --wait: give up after this long (default 300)")
    delete.set_defaults(func=delete_command)

    hosts = subparsers.add_parser("hosts", help="Per-host RAM, disk and vCPUs, used and free.")
    output.add_options(hosts)
    hosts.set_defaults(func=hosts_command)

    instances = subparsers.add_parser("instances", help="List instances.")
    # dest differs from the option name: oslo.config's [DEFAULT] host shadows "host".
    instances.add_argument("--host", dest="on_host", metavar="HOST", help="only the instances on HOST")
    instances.add_argument("--state", type=str.upper, choices=states.ALL, metavar="STATE",
                           help=f"only the instances in STATE, any case: {', '.join(states.ALL).lower()}")
    instances.add_argument("--all", action="store_true", help="include deleted instances")
    output.add_options(instances)
    instances.set_defaults(func=instances_command)

    show = subparsers.add_parser("show", help="One instance: state, host, fault reason.")
    show.add_argument("uuid", type=_uuid, metavar="UUID")
    show.set_defaults(func=show_command)

    admin_commands.add_commands(subparsers)  # aggregate ..., server-group ...


def flavor_from_args(args):
    sizes = (args.flavor_ram, args.flavor_disk, args.flavor_vcpus)
    if args.flavor:
        if any(v is not None for v in sizes):
            raise CommandError("give either --flavor or --flavor-ram/--flavor-disk/--flavor-vcpus")
        try:
            return flavors.get(args.flavor)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    if args.flavor_ram is None or args.flavor_vcpus is None:
        raise CommandError("give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)")
    return {
        "memory_mb": args.flavor_ram,
        "root_gb": args.flavor_disk or 0,
        "ephemeral_gb": 0,
        "vcpus": args.flavor_vcpus,
    }


def build_request(flavor, count, hints=(), project="admin", availability_zone=None):
    """``hints``: (key, value) pairs or a dict; a key given more than once becomes a list."""
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    properties = {"project_id": project}
    if availability_zone:
        properties["availability_zone"] = availability_zone
    request_spec = {
        "instance_uuids": uuids,
        "num_instances": count,
        "instance_type": flavor,
        "instance_properties": properties,
        "image": {"properties": {}},
    }
    scheduler_hints = {}
    for key, value in hints.items() if isinstance(hints, dict) else hints:
        if key in scheduler_hints:
            previous = scheduler_hints[key]
            scheduler_hints[key] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            scheduler_hints[key] = value
    filter_properties = {"scheduler_hints": scheduler_hints}
    return request_spec, filter_properties


def wait_until(predicate, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CommandError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_for(client, uuids, timeout, settled=SETTLED):
    """Poll until every instance is in ``settled``; returns {uuid: instance}.

    Each poll asks only for the instances not settled yet, a page at a time.
    """
    wanted, found = list(dict.fromkeys(uuids)), {}

    def all_settled():
        pending = [u for u in wanted if found.get(u, {}).get("state") not in settled]
        for start in range(0, len(pending), MAX_LIST):
            page = pending[start:start + MAX_LIST]
            found.update((i["uuid"], i) for i in client.list_instances({}, include_deleted=True, uuids=page))
        return all(found.get(u, {}).get("state") in settled for u in wanted)

    pending = len(wanted)
    wait_until(all_settled, timeout, f"{pending} instance(s) to reach {'/'.join(settled)}")
    return dict(found)


def boot_command(client, args, out):
    flavor = flavor_from_args(args)
    request_spec, filter_properties = build_request(
        flavor, args.count, args.hint, args.project, availability_zone=args.boot_zone
    )
    group = filter_properties["scheduler_hints"].get("group")
    if group is not None:
        if isinstance(group, list):
            raise CommandError("give one --hint group=UUID")
        # Refused here, before any instance exists, when the group does not.
        client.admin_call({}, "show_server_group", group_uuid=group)
    client.run_instance({"project_id": args.project}, request_spec, filter_properties)
    uuids = request_spec["instance_uuids"]
    if not args.wait:
        for u in uuids:
            print(u, file=out)
        return 0
    found = wait_for(client, uuids, args.timeout)
    print_instances([found[u] for u in uuids], out)
    return 1 if any(found[u]["state"] == states.ERROR for u in uuids) else 0


def delete_command(client, args, out):
    """Delete the instances named; none at all when one of them does not exist."""
    known = {}
    for start in range(0, len(args.uuids), MAX_LIST):
        page = args.uuids[start:start + MAX_LIST]
        known.update((i["uuid"], i) for i in client.list_instances({}, include_deleted=True, uuids=page))
    missing = [u for u in dict.fromkeys(args.uuids) if u not in known]
    if missing:
        raise CommandError(f"No instance {', '.join(missing)}; nothing deleted")
    for u in args.uuids:
        if known[u]["state"] == states.DELETED:
            print(f"{u} deleted already", file=out)
            continue
        client.delete_instance({}, u)
    if args.wait:
        found = wait_for(client, args.uuids, args.timeout, settled=(states.DELETED,))
        print_instances(found.values(), out)
    else:
        for u in args.uuids:
            if known[u]["state"] != states.DELETED:
                print(f"{u} deleting", file=out)
    return 0


def hosts_command(client, args, out):
    emit(args,
        ["HOST", "STATE", "RAM USED/TOTAL MB", "FREE RAM MB", "DISK USED/TOTAL GB",
         "FREE DISK GB", "VCPUS USED/TOTAL", "INSTANCES"],
        [
            [h["host"], h["state"], f"{h['memory_mb_used']}/{h['memory_mb']}", h["free_ram_mb"],
             f"{_num(h['local_gb_used'])}/{h['local_gb']}", _num(h["free_disk_gb"]),
             f"{_num(h['vcpus_used'])}/{h['vcpus']}", h["running_vms"]]
            for h in client.list_hosts({})
        ],
        out,
    )
    return 0


def instances_command(client, args, out):
    print_instances(
        client.list_instances({}, host=args.on_host, state=args.state, include_deleted=args.all), out, args
    )
    return 0


def show_command(client, args, out):
    instance = client.show_instance({}, args.uuid)
    for key in ("uuid", "state", "host", "node", "flavor_name", "memory_mb", "root_gb",
                "ephemeral_gb", "vcpus", "attempts", "fault_reason", "created_at",
                "scheduled_at", "launched_at", "deleted_at"):
        print(f"{key:13} {_blank(instance.get(key))}", file=out)
    return 0


def print_instances(instances, out, args=None):
    emit(
        args,
        ["UUID", "STATE", "HOST", "RAM MB", "DISK GB", "VCPUS", "FAULT"],
        [
            [i["uuid"], i["state"], i.get("host"), i["memory_mb"],
             (i.get("root_gb") or 0) + (i.get("ephemeral_gb") or 0), i["vcpus"], i.get("fault_reason")]
            for i in instances
        ],
        out,
    )


def emit(args, headers, rows, out):
    try:
        output.emit(args, headers, rows, out)
    except output.UnknownColumn as exc:
        raise CommandError(str(exc)) from None


def _num(value):
    return int(value) if float(value).is_integer() else round(value, 1)


def _blank(value):
    return "-" if value in (None, "") else value


cli_opts = [
    cfg.FloatOpt(
        "connect-timeout",
        default=5.0,
        min=0.0,
        metavar="SECONDS",
        help="Seconds to keep trying to reach the message broker before giving up; "
        "nothing is sent before it answers.",
    ),
]


def main(argv=None, out=None):
    out = out or sys.stdout
    conf = config.load(
        sys.argv[1:] if argv is None else argv,
        PROG,
        cli_opts=cli_opts + [cfg.SubCommandOpt("command", title="commands", handler=add_commands)],
    )
    try:
        transport = rpc.get_transport(conf)
    except ValueError as exc:  # the URL in it is masked
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    client = SchedulerClient(transport)
    try:
        transport.reach(conf.connect_timeout)
        return conf.command.func(client, conf.command, out)
    except BrokenPipeError:  # e.g. `berth instances | head -3`: the reader has all it wanted
        quiet_stdout()
        return 0
    except CommandError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except rpc.MessagingTimeout:
        print(
            f"{PROG}: the scheduler did not answer within {conf.rpc_response_timeout} s: "
            "is berth-scheduler (or berth-all-in-one) running on this transport_url?",
            file=sys.stderr,
        )
        return 1
    except rpc.RemoteError as exc:
        print(f"{PROG}: {exc.value}", file=sys.stderr)
        return 1
    except (rpc.BrokerUnreachable, rpc.MessageDeliveryFailure) as exc:  # the URL in it is masked
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        transport.cleanup()


def quiet_stdout():
    """After a broken pipe, point stdout at /dev/null so that the interpreter's last
    flush finds nothing to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
