"""The VALUES list the PostgreSQL fast paths send: character for character what psycopg2 renders
of every value, whichever values Berth renders itself. Skipped when no PostgreSQL server is
reachable (tests/fixtures.py's PG_URL, database ``test``)."""

import datetime

import pytest
import sqlalchemy as sa

from scheduler.db import fastpaths
from tests.fixtures import PG_URL

TABLE = sa.Table(
    "rendered", sa.MetaData(),
    sa.Column("n", sa.Integer), sa.Column("big", sa.BigInteger), sa.Column("at", sa.DateTime),
    sa.Column("text", sa.String(255)), sa.Column("doc", sa.JSON), sa.Column("flag", sa.Boolean),
    sa.Column("ratio", sa.Float),
)
AWKWARD = "50% off, %s and %(name)s, 'quoted' \\ back, \"double\", \u00e9t\u00e9 \u2603, \t tab"
ROWS = [
    {"n": 0, "big": 2**63 - 1, "at": datetime.datetime(2026, 12, 5, 2, 50, 1, 123456), "text": AWKWARD,
     "doc": {"s": AWKWARD, "n": [1, None, -0.5]}, "flag": True, "ratio": 1.5},
    {"n": -5, "big": -(2**63), "at": datetime.datetime(2026, 12, 5, 2, 50, 1), "text": "", "doc": None,
     "flag": False, "ratio": -0.0},
    {"n": None, "big": 7, "at": datetime.datetime(999, 1, 1), "text": None, "doc": {}, "flag": None,
     "ratio": None},
    {"n": 2**31 - 1, "big": 0, "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
     "text": "'; DROP TABLE instances; --", "doc": [], "flag": True, "ratio": float("inf")},
    {"n": True, "big": 1, "at": None, "text": "%", "doc": "%(x)s", "flag": False, "ratio": 2},
    *({"n": 1, "big": 1, "at": None, "text": "f", "doc": None, "flag": None, "ratio": ratio}
      for ratio in (0.0, 160.0, 1e20, 1e-07, 1099511627776.5, 0.1 + 0.2, 5e-324, 1.7976931348623157e308,
                    -3.25, -1e-07, float("nan"), float("-inf"))),
]


@pytest.fixture
def connection():
    pytest.importorskip("psycopg2")
    engine = sa.create_engine(PG_URL.format(db="test"), connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            yield connection
    except sa.exc.OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable: {exc}")
    finally:
        engine.dispose()


def test_each_value_is_rendered_as_psycopg2_renders_it(connection):
    columns = list(ROWS[0])
    dialect = connection.dialect
    processors = [TABLE.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns]
    cursor = connection.connection.dbapi_connection.cursor()
    template = "(" + ", ".join(["%s"] * len(columns)) + ")"
    expected = b", ".join(
        cursor.mogrify(template, [row[name] if process is None else process(row[name])
                                  for name, process in zip(columns, processors, strict=True)])
        for row in ROWS).decode()
    assert fastpaths._rendered_values(connection, TABLE, columns, ROWS) == expected
    assert "'2026-12-05T02:50:01.123456'::timestamp" in expected and "( -5, " in expected
    assert ", 0.30000000000000004)" in expected and ",  -3.25)" in expected
