"""``berth fake-load set|clear``: the simulated load of the fake driver's instances.

For tests and demonstrations of the scaling groups on a fleet of fake agents: each
instance's load (the cpu and memory its agent reports in ``instance_usage``) is set at
run time. The scheduler says where the instances are (``list_instances``) or which hosts
there are (``list_hosts``), and each agent concerned is called on its own topic
(``compute.<host>``: ``set_fake_load``, ``clear_fake_load``). An agent whose driver is not
the fake one refuses; an override lives in the agent's memory until cleared or the agent
restarts.
"""

import argparse
import sys

from compute_agent.client import ComputeClient
from scheduler import rpc, states
from scheduler.cmd import arguments
from scheduler.cmd.arguments import CommandError
from scheduler.cmd.references import instance_uuid, instances_by_uuid

PREFIX = "berth fake-load"


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 <= value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a fraction from 0 to 1 (0.9: 90 %), got {text!r}")
    return value


def add_commands(subparsers):
    actions = arguments.actions(
        subparsers, "fake-load",
        "Set the load the fake driver's instances report (tests and demonstrations).", "fake_load_action")

    put = actions.add_parser(
        "set", help="Simulate this load on the instances named, or on every instance of every host (--all).")
    put.add_argument("--cpu", type=_fraction, required=True, metavar="FRACTION",
                     help="of each instance's vCPUs in use, 0 to 1")
    put.add_argument("--memory", type=_fraction, metavar="FRACTION",
                     help="of each instance's memory in use, 0 to 1 (default: as the busy/idle model has it)")
    _add_targets(put, "every instance of every host up, now and built later (drops the instances' own "
                      "overrides)")
    put.set_defaults(func=fake_load_set)

    clear = actions.add_parser(
        "clear", help="Back to the busy/idle model of [compute_agent] fake_* options.")
    _add_targets(clear, "every override of every host up")
    clear.set_defaults(func=fake_load_clear)


def _add_targets(parser, every):
    parser.add_argument("references", nargs="*", metavar="INSTANCE",
                        help="a UUID, or the name of exactly one instance not DELETED")
    parser.add_argument("--all", dest="every_instance", action="store_true", help=every)


def _targets(client, args):
    """``{host: [uuids] or None (every instance)}``, and the hosts skipped as down."""
    if args.references and args.every_instance:
        raise CommandError("name the instances or give --all, not both")
    if not args.references and not args.every_instance:
        raise CommandError("name the instances, or give --all for every instance of every host")
    if args.every_instance:
        hosts = client.list_hosts({})
        up = {h["host"]: None for h in hosts if h["state"] != "down"}
        if not up:
            raise CommandError(f"no compute host is up ({len(hosts)} known); nothing changed")
        return up, [h["host"] for h in hosts if h["state"] == "down"]
    uuids = list(dict.fromkeys(instance_uuid(client, reference) for reference in args.references))
    found = instances_by_uuid(client, uuids)
    by_host = {}
    for uuid in uuids:
        instance = found.get(uuid)
        if instance is None:
            raise CommandError(f"No instance {uuid}; nothing changed")
        if instance["state"] == states.DELETED or not instance.get("host"):
            raise CommandError(f"instance {uuid} is {instance['state']} on no host; nothing changed")
        by_host.setdefault(instance["host"], []).append(uuid)
    return by_host, []


def _each_agent(client, args, call):
    """``call(agents, host, uuids)`` for each host concerned; (the agents' answers, status)."""
    targets, down = _targets(client, args)
    agents = ComputeClient(client.transport)
    answers, failed = [], 0
    for host in down:
        print(f"{PREFIX}: {host} skipped: it is down (no report for service_down_time)", file=sys.stderr)
    for host, uuids in sorted(targets.items()):
        try:
            answers.append((uuids, call(agents, host, uuids)))
        except rpc.RemoteError as exc:
            failed += 1
            print(f"{PREFIX}: {host}: {exc.value}", file=sys.stderr)
        except rpc.MessagingTimeout:
            failed += 1
            print(f"{PREFIX}: {host}: its agent did not answer; is berth-compute-agent running there?",
                  file=sys.stderr)
    return answers, 1 if failed else 0


def _load(load):
    memory = "as modelled" if load.get("memory") is None else f"{load['memory']:g}"
    return f"cpu {load['cpu']:g}, memory {memory}"


def fake_load_set(client, args, out):
    def call(agents, host, uuids):
        return agents.set_fake_load({}, host, args.cpu, args.memory, uuids)

    answers, status = _each_agent(client, args, call)
    for uuids, state in answers:
        if uuids is None:
            print(f"{state['host']}: {_load(state['every'])} for every instance ({state['held']} now)",
                  file=out)
        else:
            for uuid in uuids:
                print(f"{state['host']}: {_load(state['instances'][uuid])} for {uuid}", file=out)
    return status


def fake_load_clear(client, args, out):
    def call(agents, host, uuids):
        return agents.clear_fake_load({}, host, uuids)

    answers, status = _each_agent(client, args, call)
    for uuids, state in answers:
        every = state["every"]
        still = f"; the override for every instance ({_load(every)}) still applies" if every else ""
        if uuids is None:
            print(f"{state['host']}: every override cleared", file=out)
        else:
            for uuid in uuids:
                print(f"{state['host']}: {uuid} cleared{still}", file=out)
    return status
