"""berth: the operator's command line, over the same transport as the services.

This module reads the command's words (scheduler.cmd.grammar), builds the parser of that
command alone from its module (scheduler.cmd.parsers) and runs it; the commands and what they
share live in those modules, none of which imports this one.
"""

import argparse
import contextlib
import io
import sys

from oslo_config import cfg

from scheduler import conf as berth_conf
from scheduler.cmd import grammar, output, parsers, unknown_options
from scheduler.cmd.arguments import CommandError
from scheduler.process import startup as config

PROG = "berth"

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
    """Run the command ``argv`` names; its exit status. Ctrl-C anywhere is one line, status 130."""
    try:
        return _main(sys.argv[1:] if argv is None else list(argv), out or sys.stdout)
    except KeyboardInterrupt:  # the terminal echoed ^C where a line may have been: a line of its own
        print(("\n" if sys.stderr.isatty() else "") + f"{PROG}: interrupted", file=sys.stderr)
        return 130


def load(argv, conf=None, out=None):
    """``argv`` parsed in the grammar's words (an earlier release's verbs too) into a ConfigOpts
    whose ``command`` is the command's. Exits as argparse does when nothing is left to run:
    status 0 once help is printed, 2 for words no command has."""
    start = _command_start(argv)
    words = grammar.canonical(argv[start:])
    if words[:1] == [grammar.HELP]:
        words = grammar.canonical(words[1:]) + ["--help"] if len(words) > 1 else []
        if not words:
            raise SystemExit(_print_help(out or sys.stdout))
    elif not words and "--version" not in argv[:start]:
        raise SystemExit(_print_help(out or sys.stdout))
    argv = argv[:start] + words
    routes = _routes(words) if words else []
    if routes is None:
        print(f"{PROG}: {grammar.unknown(words)}", file=sys.stderr)
        raise SystemExit(2)
    if tuple(words) in grammar.GROUPS:
        argv.append("--help")  # a group and no action: what it holds

    def declare(subparsers):
        subparsers.metavar = "COMMAND"
        tree = parsers.build(subparsers, routes)
        _refuse_unknown_words(subparsers, tree, words)
        unknown_options.refuse_in_place(subparsers, before=GLOBAL_VALUES + GLOBAL_FLAGS)

    return config.load(argv, PROG, conf=conf, areas=berth_conf.CLI_AREAS, cli_opts=cli_opts + [
        cfg.SubCommandOpt("command", title="commands", handler=declare)])


def _main(argv, out):
    from scheduler import rpc  # the transport: not for help, nor for the commands that need no broker
    from scheduler.client import SchedulerClient

    conf = load(argv, out=out)
    if "--debug" in argv:  # asked for on this command line, not by a shared config file: show it
        conf.set_override("use_stderr", True)
    config.setup_command_logging(conf, PROG)
    if getattr(conf.command, "offline", False):  # needs no broker: build no transport
        try:
            return conf.command.func(None, conf.command, out)
        except CommandError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return getattr(exc, "exit_code", 1)
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
    except BrokenPipeError:  # e.g. `berth server list | head -3`: the reader has all it wanted
        output.quiet_stdout()
        return 0
    except CommandError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
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


def _routes(words):
    """The routes to build for ``words``: one command's, or every route under the group asked
    for (its help lists them all); None when ``words`` name nothing the grammar knows."""
    route = grammar.route_of(words)
    if route is not None and route.words not in grammar.GROUPS:
        return [route]
    group = route.words if route is not None else grammar.group_of(words)
    return grammar.routes_under(group) if group else None


#: The options every command takes before its words (``berth help`` lists them): those whose value
#: is the next argument, and the flags.
GLOBAL_VALUES = ("--config-file", "--config-dir", "--connect-timeout", "--log-config-append",
                 "--log-config", "--log_config", "--log-date-format", "--log-file", "--logfile",
                 "--log-dir", "--logdir", "--syslog-log-facility", "--shell_completion")
GLOBAL_FLAGS = ("-h", "--help", "--version", "-d", "--debug", "--nodebug", "--use-syslog", "--nouse-syslog",
                "--use-journal", "--nouse-journal", "--use-json", "--nouse-json")


def _command_start(argv):
    """The index in ``argv`` of the command's first word (after the global options); an option
    before it that no command takes is refused there, with the nearest."""
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        given = argv[index].split("=", 1)[0]
        known = [o for o in GLOBAL_VALUES + GLOBAL_FLAGS if o == given] or [
            o for o in GLOBAL_VALUES + GLOBAL_FLAGS if given.startswith("--") and o.startswith(given)]
        if len(known) != 1:
            near = known or grammar.close(given, list(GLOBAL_VALUES + GLOBAL_FLAGS))[:1]
            said = "ambiguous option" if known else "unknown option"
            hint = f": did you mean {' or '.join(near)}?" if near else ""
            print(f"{PROG}: {said} {given} before the command{hint} (berth help lists the options every "
                  "command takes)", file=sys.stderr)
            raise SystemExit(2)
        index += 2 if known[0] in GLOBAL_VALUES and "=" not in argv[index] else 1
    return min(index, len(argv))


def _refuse_unknown_words(subparsers, tree, words):
    """Refuse, with the nearest known word, an action not in the group ``words`` reach."""
    at, found = (), subparsers
    for word in words:
        if word.startswith("-") or found is None:
            return
        if word not in found.choices:
            near = ([f"{' '.join(at + (n,))!r}" for n in
                     grammar.close(word, list(found.choices))] if found.choices else [])
            said = " ".join(at + (word,))
            hint = f": did you mean {' or '.join(near)}?" if near else ""
            listing = " ".join((PROG, grammar.HELP) + at)
            print(f"{PROG}: {said!r} is not a command{hint} ({listing} lists them)", file=sys.stderr)
            raise SystemExit(2)
        at += (word,)
        found = tree.groups.get(at)


def _print_help(out):
    """``berth help``: the commands first, the aliases, then the options every command takes."""
    top = argparse.ArgumentParser(prog=PROG, add_help=False).add_subparsers()
    tree = parsers.build(top, grammar.ROUTES)
    rows = list(_commands(tree, ()))
    width = max(len(words) for words, _ in rows) + 2
    print(f"usage: {PROG} [OPTIONS] COMMAND [ARGUMENTS]\n\n"
          "Schedule, move and scale instances on a Berth fleet. `berth help COMMAND` says what a "
          "command takes.\n\ncommands:", file=out)
    for words, text in rows:
        print(f"  {words:<{width}}{text or ''}", file=out)
    aliases = ", ".join(f"{' '.join(old)} = {' '.join(new)}" for old, new in grammar.ALIASES.items())
    print(f"\nearlier releases' words, still taken: {aliases}\n", file=out)
    print(_global_options(), file=out, end="")
    return 0


def _no_command(subparsers):
    subparsers.metavar = "COMMAND"


def _commands(tree, group):
    """(words, help) of every command under ``group``, in the order help lists them."""
    for choice in tree.groups[group]._choices_actions:
        words = group + (choice.dest,)
        if words in tree.groups:
            yield from _commands(tree, words)
        else:
            yield " ".join(words), _first_sentence(choice.help or "")


def _first_sentence(text):
    return text.split(". ", 1)[0].split("; ", 1)[0].rstrip(".") + "."


def _global_options():
    """The options section of ``berth``'s own argparse help (config files, logging)."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.suppress(SystemExit):
        config.load(["--help"], PROG, areas=berth_conf.CLI_AREAS, cli_opts=cli_opts + [
            cfg.SubCommandOpt("command", title="commands", handler=_no_command)])
    text = said.getvalue()
    options = text[text.find("options:"):] if "options:" in text else ""
    options = options.split("\ncommands:", 1)[0].rstrip() + "\n"  # argparse's own, listed above
    return options.replace("options:", "options (before the command):", 1)


if __name__ == "__main__":
    sys.exit(main())
