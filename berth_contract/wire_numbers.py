"""Numbers read from the wire: a JSON integer has no bound, and ``math.isfinite`` (or
``float()``) of one beyond a float's range raises OverflowError instead of saying no."""

from __future__ import annotations

import math
import sys
from typing import TypeGuard

_LARGEST = sys.float_info.max


def is_finite(value: object) -> TypeGuard[int | float]:
    """An int or a float (not a bool) that a float holds: finite, and for an int of any
    size, within a float's range (compared exactly, without converting it)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and -_LARGEST <= value <= _LARGEST

