"""Argument types shared by the berth CLI's commands."""

import argparse


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1.

    Defined here, not in the ``berth`` module: run as ``python -m scheduler.cmd.cli``, that
    module is ``__main__`` and a second copy of it, imported by the sub-commands' modules,
    would raise a class its ``main`` does not catch."""


def positive(text):
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
