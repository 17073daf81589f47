"""Matching a value against a flavor extra_spec requirement (Nova's extra_specs_ops).

A requirement is either a plain string (equal to the value) or an operator
followed by its operands::

    "= 4"       value >= 4, as numbers        "s== abc"   equal, as strings
    "== 4"      value == 4, as numbers        "s!= abc"   not equal, as strings
    "!= 4"      value != 4, as numbers        "s< b" "s<= b" "s> b" "s>= b"
    ">= 4"      value >= 4, as numbers        "<in> sse"  the operand is a substring of value
    "<= 4"      value <= 4, as numbers        "<all-in> a b"  every operand is in value
    "<or> a <or> b"   value equals one of the alternatives

A value that is not a number fails a numeric operator; a missing value (None)
fails every operator. A requirement that can match nothing (``<or>`` with no
alternative, a numeric operator on an operand that is no number) is refused
by :func:`check` before any host is tried (Nova raises on it).
"""

import operator

import numpy as np


def _numbers(op):
    return lambda x, y: op(float(x), float(y))


_OPS = {
    "=": _numbers(operator.ge),
    "==": _numbers(operator.eq),
    "!=": _numbers(operator.ne),
    ">=": _numbers(operator.ge),
    "<=": _numbers(operator.le),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
    "<in>": lambda x, y: y in x,
    "<all-in>": lambda x, y: all(v in x for v in y),
}
OPERATORS = tuple(_OPS) + ("<or>",)


def check(req):
    """Raise ValueError naming what is wrong if ``req`` is malformed."""
    words = str(req).split()
    if not words:
        return
    op = words[0]
    if op == "<or>" and len(words) < 2:
        raise ValueError(f"{str(req)[:60]!r}: <or> needs at least one alternative, e.g. '<or> a <or> b'")
    if op in _NUMERIC and len(words) > 1:
        try:
            float(words[1])
        except ValueError:
            raise ValueError(f"{str(req)[:60]!r}: {op} compares numbers and {words[1][:40]!r} is not one; "
                             f"use s== to compare text") from None


def match(value, req):
    """Whether ``value`` (a string, or None) satisfies requirement ``req``."""
    req = str(req)
    words = req.split()
    op = words.pop(0) if words else None
    method = _OPS.get(op)
    if op != "<or>" and method is None:
        return value == req
    if value is None:
        return False
    if op == "<or>":  # <or> v1 <or> v2 <or> v3
        alternatives = words[0::2]
        return value in alternatives
    if not words:
        return False
    try:
        return bool(method(value, words if op == "<all-in>" else words[0]))
    except (TypeError, ValueError):
        return False


_NUMERIC = {"=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
            ">=": np.greater_equal, "<=": np.less_equal}


def match_numbers(values, req):
    """:func:`match` of ``str(v)`` for each number ``v`` of an array, when ``req`` compares
    numbers; None when it does not (match each value then).
    """
    words = str(req).split()
    compare = _NUMERIC.get(words[0]) if words else None
    if compare is None:
        return None
    try:
        operand = float(words[1])
    except (IndexError, ValueError):
        return np.zeros(len(values), dtype=bool)
    return compare(values, operand)
