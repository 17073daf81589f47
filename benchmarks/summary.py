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
