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
        return orjson.dumps(value, default=_to_primitive, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, default=_to_primitive)


def loads(text):
    """The value of the JSON ``text`` (str or bytes).

    What orjson refuses but the json module reads (bytes in UTF-16 or -32,
    NaN and Infinity, deeper nesting) is read by the json module, whose
    result or error stands. An integer beyond 64 bits is read as the nearest
    float, as RFC 8259 allows.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
