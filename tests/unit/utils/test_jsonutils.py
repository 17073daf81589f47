"""JSON as the json module reads and writes it, done faster by orjson where it can."""

import datetime
import decimal
import json
import uuid

import pytest

from scheduler.utils import jsonutils


class Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"when": datetime.datetime(2024, 1, 2, 3, 4, 5, 600000), "day": datetime.date(2024, 1, 2)},
        {"id": uuid.UUID(int=7), "tags": {"a"}, "price": decimal.Decimal("1.5")},
        {1: "int key", None: "null key", False: "bool key", 2.5: "float key"},
        {"big": 2**70, "negative big": -(2**70)},
        {"text": "lone \udc80 surrogate", "accents": "été ☃"},
        {"nested": [1, [2, [3, {"x": None}]]], "float": 0.1},
    ],
    ids=["times", "uuid-set-decimal", "keys-not-strings", "big-integers", "surrogates", "nested"],
)
def test_dumps_writes_what_the_json_module_would(value):
    expected = json.loads(json.dumps(value, default=jsonutils._to_primitive))
    assert json.loads(jsonutils.dumps(value)) == expected


def test_dumps_refuses_what_nothing_converts_naming_it():
    with pytest.raises(TypeError, match="Opaque is not JSON serializable"):
        jsonutils.dumps({"x": Opaque()})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b'{"a": [1, 2.5, null, "\\u00e9"]}', {"a": [1, 2.5, None, "é"]}),
        ('{"a": "été"}'.encode("utf-16"), {"a": "été"}),
        ('{"a": "x"}'.encode("utf-32-le"), {"a": "x"}),
        (b'{"big": 18446744073709551615, "small": -9223372036854775808}',
         {"big": 2**64 - 1, "small": -(2**63)}),
        ('{"a": "str, not bytes"}', {"a": "str, not bytes"}),
    ],
    ids=["utf-8", "utf-16", "utf-32", "64-bit-integers", "str"],
)
def test_loads_reads_what_the_json_module_reads(text, value):
    assert jsonutils.loads(text) == value


def test_loads_reads_an_integer_beyond_64_bits_as_the_nearest_float():
    # As RFC 8259 allows; no message of the protocol carries one.
    assert jsonutils.loads(b'{"big": 123456789012345678901234567890}') == {"big": 1.2345678901234568e29}


def test_loads_refuses_what_is_not_json():
    for text in (b"{", b"\xff\xfe\x00", b'{"a": 1} trailing'):
        with pytest.raises(ValueError):
            jsonutils.loads(text)


@pytest.mark.parametrize(
    "text", ['"\\ud800"', '{"a": ["x\\udfff"]}', '{"\\ud800": 1}', b'["\\\\", "\\ud83d"]'])
def test_loads_refuses_a_lone_surrogate_anywhere(text):
    with pytest.raises(ValueError, match="lone surrogate"):
        jsonutils.loads(text)


def test_loads_reads_a_surrogate_pair_as_its_character():
    assert jsonutils.loads('"\\ud83d\\ude00"') == "\U0001f600"
