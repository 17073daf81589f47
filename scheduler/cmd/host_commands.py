"""``berth host list``, ``berth host disable|enable|delete`` and ``berth service list``: hosts and services
(``berth host evacuate|drain`` are move_commands').

Each command is one RPC call to the scheduler (``hosts``: the scheduler's own
list_hosts, the others: scheduler.admin.hosts); the scheduler checks the arguments
and changes nothing when one is wrong.
"""

from scheduler.cmd import arguments, move_commands, output
from scheduler.cmd.references import unknown_host


def add_usage(subparsers):
    hosts = subparsers.add_parser("hosts", help="Per-host RAM, disk and vCPUs, used and free.")
    output.add_options(hosts)
    hosts.set_defaults(func=hosts_command)


def add_commands(subparsers):
    actions = arguments.actions(subparsers, "host",
                                "Take a compute host out of service, empty it, or forget it.", "host_action")

    show = actions.add_parser("show", help="Every field the scheduler keeps of one host: its use, "
                              "inventories (resource classes), traits and measured load.")
    show.add_argument("target_host", metavar="HOST")
    output.add_options(show)
    show.set_defaults(func=host_show)

    disable = actions.add_parser("disable", help="Place no new instance on a host (those on it stay).")
    disable.add_argument("target_host", metavar="HOST")
    disable.add_argument("--reason", metavar="TEXT", help="why, shown by berth host list and service list")
    disable.set_defaults(func=host_disable)

    enable = actions.add_parser("enable", help="Let a disabled host take instances again.")
    enable.add_argument("target_host", metavar="HOST")
    enable.set_defaults(func=host_enable)

    delete = actions.add_parser(
        "delete", help="Forget a host that holds no instance: its last report, its aggregate "
        "memberships. It comes back if its agent reports again.")
    delete.add_argument("target_host", metavar="HOST")
    delete.set_defaults(func=host_delete)

    move_commands.add_host_actions(actions)

    actions = arguments.actions(subparsers, "service", "The schedulers and compute agents Berth knows.",
                                "service_action")
    listing = actions.add_parser("list", help="Each service: host, status, state, last heard, version.")
    output.add_options(listing)
    listing.set_defaults(func=service_list)


def hosts_command(client, args, out):
    hosts = client.list_hosts({})
    # ZONE and AGGREGATES before the reason: free text stays the last column.
    output.emit(args,
                ["HOST", "STATE", "RAM USED/TOTAL MB", "FREE RAM MB", "DISK USED/TOTAL GB",
                 "FREE DISK GB", "VCPUS USED/TOTAL", "INSTANCES", "ZONE", "AGGREGATES", "DISABLED REASON"],
                [[h["host"], h["state"], f"{h['memory_mb_used']}/{h['memory_mb']}", h["free_ram_mb"],
                  f"{_num(h['local_gb_used'])}/{h['local_gb']}", _num(h["free_disk_gb"]),
                  f"{_num(h['vcpus_used'])}/{h['vcpus']}", h["running_vms"], h.get("availability_zone"),
                  ",".join(h.get("aggregates") or []) or None, h.get("disabled_reason")]
                 for h in hosts],
                out)
    return 0


def host_show(client, args, out):
    """Every field the scheduler keeps of one host, as ``berth host list`` sums them up."""
    found = [h for h in client.list_hosts({}) if h["host"] == args.target_host]
    if not found:
        raise unknown_host(client, args.target_host)
    output.emit_one(args, found[0], out, text=HOST_TEXT)
    return 0


#: What ``host show`` says of an agent that reports no inventory, or no trait.
NONE_REPORTED = "none reported"


def _inventories_text(inventories):
    if not inventories:
        return NONE_REPORTED
    return "\n".join(f"{name}: used {_num(i['used'])} of total {i['total']}, reserved {i['reserved']}, "
                     f"allocation_ratio {i['allocation_ratio']:g} (min_unit {i['min_unit']}, max_unit "
                     f"{i['max_unit']}, step_size {i['step_size']})" for name, i in inventories.items())


def _instance_load_text(load):
    lines = [f"{uuid}: cpu {figures['cpu']:g}, memory_mb {figures['memory_mb']:g}"
             for uuid, figures in load["instances"].items()]
    return "\n".join(lines + [f"background: cpu {load['background_cpu']:g}, "
                              f"memory_mb {load['background_memory_mb']:g}"])


#: How ``host show`` prints its list and object fields in the formats of text.
HOST_TEXT = {"aggregates": ", ".join, "traits": lambda names: ", ".join(names) or NONE_REPORTED,
             "inventories": _inventories_text,
             "instance_load": _instance_load_text}


def _num(value):
    return int(value) if float(value).is_integer() else round(value, 1)


def host_disable(client, args, out):
    found = client.admin_call({}, "host_disable", host=args.target_host, reason=args.reason)
    why = f": {found['disabled_reason']}" if found.get("disabled_reason") else ""
    print(f"host {found['host']} disabled{why}", file=out)
    return 0


def host_enable(client, args, out):
    found = client.admin_call({}, "host_enable", host=args.target_host)
    said = "enabled" if found.get("was_disabled", True) else "enabled already: it was not disabled"
    print(f"host {found['host']} {said}", file=out)
    return 0


def host_delete(client, args, out):
    found = client.admin_call({}, "host_delete", host=args.target_host)
    left = found.get("aggregates_left") or 0
    print(f"host {found['host']} deleted" + (f", and removed from {left} aggregate(s)" if left else ""),
          file=out)
    return 0


def service_list(client, args, out):
    output.emit(args, ["BINARY", "HOST", "STATUS", "STATE", "UPDATED AT", "VERSION", "DISABLED REASON"],
                [[s["binary"], s["host"], s["status"], s["state"], s.get("updated_at"), s.get("version"),
                  s.get("disabled_reason")] for s in client.admin_call({}, "list_services")],
                out)
    return 0
