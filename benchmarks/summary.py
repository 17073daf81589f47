"""The figures the benchmarks summarise their samples with, and their text."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), inclusive method; one value is all three."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def percentile(values: Sequence[float], q: float) -> float:
    """The value of rank ``q`` x n among the sorted ``values`` (0 <= q <= 1), not interpolated."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spread(values: Sequence[float], digits: int = 1, counted: str = "") -> str:
    """'median (min-max)' of ``values``; with ``counted``, 'median (min-max, n counted)'."""
    fmt = f",.{digits}f"
    count = f", {len(values)} {counted}" if counted else ""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}}{count})"


def alternated(ways: dict, rounds: int, unit: str, digits: int = 2, counted: str = "") -> None:
    """Time each of ``ways`` ({name: a function returning its figure for one round}) ``rounds``
    times, alternated (A B A B ...), and print each one's 'median (IQR q1-q3, counted)' ``unit``."""
    took = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            took[name].append(way())
    width = max(len(name) for name in ways)
    for name, values in took.items():
        q1, median, q3 = quartiles(values)
        print(f"{name:{width}} {median:.{digits}f} {unit} (IQR {q1:.{digits}f}-{q3:.{digits}f}, "
              f"{rounds} rounds{counted})")
