"""What the benchmarks' command lines share: the parser of one run alone, its comma-separated
arguments, and its rows printed as text or JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from typing import Any


def parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m benchmarks.NAME``, its module's docstring shown as written."""
    return argparse.ArgumentParser(prog=prog, description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: ``print_rows`` prints each row as one JSON object."""
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def counts(noun: str, low: int = 1) -> Callable[[str], list[int]]:
    """The type of an argument listing whole numbers of at least ``low``, such as 1000,10000;
    ``noun`` names them in its refusals."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v]
        except ValueError:
            raise argparse.ArgumentTypeError(f"a comma-separated list of {noun}, got {text!r}") from None
        if not values or min(values) < low:
            least = "positive" if low == 1 else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{noun} must be {least}")
        return values

    return parse


def names(kind: str, known: Iterable[str]) -> Callable[[str], list[str]]:
    """The type of an argument listing some of ``known``, comma-separated; ``kind`` names them in
    its refusals."""
    known = list(known)

    def parse(text: str) -> list[str]:
        values = [v for v in text.split(",") if v]
        if not values or any(v not in known for v in values):
            raise argparse.ArgumentTypeError(f"{kind} are a comma-separated list of {', '.join(known)}, "
                                             f"got {text!r}")
        return values

    return parse


def print_rows(rows: Iterable[dict[str, Any]], as_json: bool, text: Callable[[dict[str, Any]], str]) -> None:
    """Each row as it comes, as one JSON object or as ``text`` says it."""
    for row in rows:
        print(json.dumps(row) if as_json else text(row), flush=True)

