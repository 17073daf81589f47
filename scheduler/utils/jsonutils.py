"""JSON for messages and database columns: orjson, with the json module behind it."""

import datetime
import decimal
import json
import uuid

import orjson


def _to_primitive(value):
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable: {value!r}")


# Datetimes and dataclasses go to _to_primitive as they do with json.dumps;
# keys that are not strings become strings as they do there.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(value):
    """JSON text of ``value``; datetimes, UUIDs, sets and decimals are converted.

    orjson does it about ten times faster than the json module; what it
    refuses (integers beyond 64 bits, lone surrogates) and what raises (a
    type nothing converts) go to the json module, whose result or error
    stands.
    """
    try:
        return dumps_strict(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, default=_to_primitive)


def dumps_strict(value):
    """``dumps``' text where orjson writes it; raises orjson.JSONEncodeError (a TypeError) where
    ``dumps`` would take the json module's text instead (spaces after its separators)."""
    return orjson.dumps(value, default=_to_primitive, option=_ORJSON_OPTIONS).decode()


def loads(text):
    """The value of the JSON ``text`` (str or bytes).

    What orjson refuses but the json module reads (bytes in UTF-16 or -32,
    NaN and Infinity, deeper nesting) is read by the json module, whose
    result or error stands, except that a string holding a lone surrogate
    (``"\\ud800"``, which orjson refuses too) raises ValueError: it is not
    text, and no queue name, log line or database column can hold it. An
    integer beyond 64 bits is read as the nearest float, as RFC 8259 allows.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        value = json.loads(text)
    _refuse_surrogates(value)
    return value


def _refuse_surrogates(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"a string holds a lone surrogate: {_escaped(item)}") from None
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _escaped(text, limit=80):
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(text if len(text) <= limit else text[:limit] + "...")
