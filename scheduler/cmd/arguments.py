"""Argument types shared by the berth CLI's commands, the parser of a command's actions, and the
error every command refuses with."""

import argparse


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1.

    Defined here, not in the ``berth`` module (cli.py), which no command module imports: run as
    ``python -m scheduler.cmd.cli``, that module is ``__main__``, and a second copy of it
    would raise a class its ``main`` does not catch."""

    #: The exit status of the command that raises it.
    exit_code = 1


class UsageError(CommandError):
    """Options that do not go together, or one missing that the command needs: status 2, as
    argparse gives the usage errors it finds itself."""

    exit_code = 2


class Interrupted(CommandError):
    """Ctrl-C in a wait or a long command: one line saying what was left doing, exit status 130
    (128 + SIGINT, as a shell reports it)."""

    exit_code = 130


def actions(subparsers, command, help, dest, **parser_options):
    """The sub-parsers of ``berth COMMAND ACTION``: one ACTION must be given."""
    parser = subparsers.add_parser(command, help=help, **parser_options)
    found = parser.add_subparsers(dest=dest, metavar="ACTION")
    found.required = True
    return found


def whole(text, low=0):
    """A whole number of at least ``low``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def positive(text):
    """A whole number of at least 1."""
    return whole(text, 1)


def hint(text):
    """A scheduler hint, ``key=value``: (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a hint is key=value, got {text!r}")
    return key, value
