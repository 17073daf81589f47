"""A command's unknown option is refused by the command's own parser: its usage, the option
named, and the option it most likely means.

argparse leaves what a sub-command's parser does not know to the top-level parser, which
prints the usage of ``berth`` itself (with every logging flag) and no hint. The parsers'
actions are read from argparse's ``_actions``, unchanged since Python 3.2; where a Python
lacks it, the commands keep argparse's own refusal (tests/unit/cmd/test_unknown_options.py
tells which)."""

import argparse
import difflib


def refuse_in_place(subparsers: argparse.Action, before: tuple[str, ...] = ()) -> None:
    """Make every parser under ``subparsers`` (commands and their actions) refuse its own
    unknown arguments; one of ``before`` (the program's own options) is said to go before the
    command's words."""
    for parser in (subparsers.choices or {}).values():
        actions = getattr(parser, "_actions", None)
        if actions is None:
            return
        nested = [a for a in actions if isinstance(a.choices, dict) and a.nargs == argparse.PARSER]
        for action in nested:
            refuse_in_place(action, before)
        if not nested:
            parser.parse_known_args = _strict(parser, actions, before)


def _strict(parser, actions, before=()):
    known = type(parser).parse_known_args

    def parse_known_args(args=None, namespace=None):
        unknown = _unknown_options(actions, args or [])
        if unknown:  # before argparse's own checks, which would ask for a required option first
            parser.error(_message(actions, unknown, before))
        namespace, extras = known(parser, args, namespace)
        if extras:
            parser.error(_message(actions, extras, before))
        return namespace, extras

    return parse_known_args


def _unknown_options(actions: list, args: list[str]) -> list[str]:
    """The ``--options`` of ``args`` that are neither an option of ``actions`` nor the start
    of one (argparse takes an unambiguous abbreviation)."""
    options = _long_options(actions)
    unknown = []
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name.startswith("--") and not any(o.startswith(name) for o in options):
            unknown.append(arg)
    return unknown


def _long_options(actions: list) -> list[str]:
    return [o for a in actions for o in a.option_strings if o.startswith("--")]


def _message(actions: list, extras: list[str], before: tuple[str, ...] = ()) -> str:
    said = f"unrecognized arguments: {' '.join(extras)}"
    options = _long_options(actions)
    for extra in extras:
        option = extra.split("=", 1)[0]
        if option in before:
            return f"{said}: {option} is an option of every command: give it before the command"
    for extra in extras:
        if extra.startswith("--"):
            near = difflib.get_close_matches(extra.split("=", 1)[0], options, n=1, cutoff=0.75)
            if near:
                return f"{said}: did you mean {near[0]}?"
    return said
