"""``berth server stop``, ``start``, ``reboot`` and ``console-log``: an instance's power and its console.

Stop, start and reboot are calls to the scheduler (API 1.6), which refuses with the reason what the
instance cannot take as it is, and otherwise records the action (POWERING_OFF, POWERING_ON,
REBOOTING) and tells the instance's agent; ``--wait`` polls until it is done. ``console-log`` asks the
scheduler where the instance is, then asks that host's agent for the console's last lines (compute
API 2.1), as Nova's API asks the compute host: the scheduler, which serves its queue in one thread,
never waits on an agent.
"""

import sys

from compute_agent.client import CONSOLE_TIMEOUT, ComputeClient
from scheduler import rpc, states
from scheduler.cmd import output
from scheduler.cmd.arguments import CommandError, positive
from scheduler.cmd.instance_commands import formats_with_wait, print_instances
from scheduler.cmd.references import instance_uuid
from scheduler.cmd.waiting import wait_for

#: command: (the client's method, what it does, the state it ends in)
ACTIONS = {
    "stop": ("stop_instance", "Power an ACTIVE instance off (SHUTOFF: its host keeps its resources).",
             states.SHUTOFF),
    "start": ("start_instance", "Power a SHUTOFF instance on (ACTIVE).", states.ACTIVE),
    "reboot": ("reboot_instance", "Reboot an ACTIVE instance (ACTIVE again).", states.ACTIVE),
}


def add_commands(subparsers):
    for command, (_, help_text, _) in ACTIONS.items():
        parser = subparsers.add_parser(command, help=help_text)
        parser.add_argument("reference", metavar="INSTANCE",
                            help="a UUID, or the name of exactly one instance not DELETED")
        if command == "reboot":
            parser.add_argument("--hard", action="store_true",
                                help="reset the instance (power it off and on) rather than ask its guest")
        parser.add_argument("--wait", action="store_true",
                            help=f"wait until the instance is {ACTIONS[command][2]}")
        parser.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                            help="with --wait: give up after this long (default 300)")
        output.add_options(parser)  # of the listing --wait prints
        parser.set_defaults(func=power_command, power_action=command)

    console = subparsers.add_parser("console-log", help="The last lines of an instance's serial console, "
                                    "read from the agent of its host.")
    console.add_argument("reference", metavar="INSTANCE",
                         help="a UUID, or the name of exactly one instance not DELETED")
    console.add_argument("--lines", type=positive, metavar="N",
                         help="only the last N lines (default: all the agent keeps, up to 10000)")
    console.set_defaults(func=console_log_command)


def power_command(client, args, out):
    method, _, done = ACTIONS[args.power_action]
    formats_with_wait(args, args.power_action)
    uuid = instance_uuid(client, args.reference)
    ctxt = {"request_id": rpc.new_request_id()}
    kwargs = {"hard": True} if getattr(args, "hard", False) else {}
    instance = getattr(client, method)(ctxt, uuid, **kwargs)
    if not args.wait:
        print(f"{uuid} {instance['state']}", file=out)
        return 0
    found = wait_for(client, [uuid], args.timeout, settled=(done, states.ERROR, states.DELETED))
    print_instances(found.values(), out, args)
    return 0 if found[uuid]["state"] == done else 1


def console_log_command(client, args, out):
    uuid = instance_uuid(client, args.reference)
    instance = client.show_instance({}, uuid)
    host = instance.get("host")
    if instance["state"] == states.DELETED or not host:
        raise CommandError(f"instance {uuid} is {instance['state']} on no host: it has no console")
    try:
        answer = ComputeClient(client.transport).console_output({}, host, uuid, args.lines)
    except rpc.MessagingTimeout:
        raise CommandError(f"the agent of {host} did not answer within {CONSOLE_TIMEOUT:g} s: is "
                           "berth-compute-agent running there?") from None
    for line in answer["lines"]:
        print(line, file=out)
    if not answer["lines"]:
        print(f"(the console of {uuid} on {host} is empty)", file=sys.stderr)
    return 0
