"""berth: the operator's command line, over the same transport as the services.

This module builds the parser from the commands' modules and runs the command asked for;
the commands and what they share live in those modules, none of which imports this one.
"""

import sys

from oslo_config import cfg

from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.cmd import (
    admin_commands,
    fake_load_commands,
    flavor_commands,
    host_commands,
    instance_commands,
    instance_metric_commands,
    move_commands,
    output,
    power_commands,
    rebalance_commands,
    scaling_commands,
    simulate_command,
    unknown_options,
)
from scheduler.cmd.arguments import CommandError
from scheduler.process import startup as config

PROG = "berth"


def add_commands(subparsers):
    """Every command, in the order ``berth --help`` lists them."""
    instance_commands.add_boot_and_delete(subparsers)  # boot, delete
    host_commands.add_usage(subparsers)  # hosts
    instance_commands.add_listings(subparsers)  # instances, show
    power_commands.add_commands(subparsers)  # stop, start, reboot, console-log
    move_commands.add_commands(subparsers)  # resize, migrate, migrations
    flavor_commands.add_commands(subparsers)  # flavor create|list|show|set|unset|delete
    admin_commands.add_commands(subparsers)  # aggregate ..., server-group ...
    host_commands.add_commands(subparsers)  # host ... (evacuate, drain), service list
    rebalance_commands.add_commands(subparsers)  # rebalance plan|show|list|apply|stop
    scaling_commands.add_commands(subparsers)  # scaling-group create|list|show|set|...|what-if
    instance_metric_commands.add_commands(subparsers)  # instance-metric push|show
    fake_load_commands.add_commands(subparsers)  # fake-load set|clear (the fake agents' load)
    simulate_command.add_commands(subparsers)  # simulate (offline)
    unknown_options.refuse_in_place(subparsers)


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
    argv = sys.argv[1:] if argv is None else argv
    conf = config.load(
        argv,
        PROG,
        cli_opts=cli_opts + [cfg.SubCommandOpt("command", title="commands", handler=add_commands)],
    )
    if "--debug" in argv:  # asked for on this command line, not by a shared config file: show it
        conf.set_override("use_stderr", True)
    config.setup_command_logging(conf, PROG)
    if getattr(conf.command, "offline", False):  # needs no broker: build no transport
        return conf.command.func(None, conf.command, out)
    try:
        transport = rpc.get_transport(conf)
    except ValueError as exc:  # the URL in it is masked
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    client = SchedulerClient(transport, check_consumers=True, require_queue=True,
                             notice=lambda text: print(f"{PROG}: {text}", file=sys.stderr, flush=True))
    try:
        transport.reach(conf.connect_timeout)
        return conf.command.func(client, conf.command, out)
    except BrokenPipeError:  # e.g. `berth instances | head -3`: the reader has all it wanted
        output.quiet_stdout()
        return 0
    except CommandError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except rpc.NoConsumer as exc:
        print(f"{PROG}: no scheduler is consuming {exc.queue!r} on {exc.url}: start berth-scheduler "
              "(or berth-all-in-one) on this transport_url", file=sys.stderr)
        return 1
    except rpc.NoQueue as exc:
        print(f"{PROG}: no scheduler queue {exc.routing_key!r} exists yet on exchange {exc.exchange!r} of "
              f"{exc.url} (no scheduler has run there): the broker dropped the request, nothing was done. "
              "Start berth-scheduler (or berth-all-in-one) on this transport_url and control_exchange once "
              "(it declares the queue, where requests then wait for a scheduler), and send it again",
              file=sys.stderr)
        return 1
    except rpc.MessagingTimeout:
        kept = (" The request expired with the wait: a scheduler that starts later drops it, unrun" if (
            transport.queues_for_servers) else "")
        print(
            f"{PROG}: the scheduler did not answer within {conf.rpc_response_timeout} s: "
            f"is berth-scheduler (or berth-all-in-one) running on {transport.safe_url}?{kept}",
            file=sys.stderr,
        )
        return 1
    except rpc.RemoteError as exc:
        print(f"{PROG}: {exc.value}", file=sys.stderr)
        return 1
    except rpc.RPCVersionCapError as exc:  # [upgrade_levels] keeps the call from being sent
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except (rpc.BrokerUnreachable, rpc.MessageDeliveryFailure) as exc:  # the URL in it is masked
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        transport.cleanup()


if __name__ == "__main__":
    sys.exit(main())
