"""The VALUES list the PostgreSQL fast paths send: each row stored as SQLAlchemy's own
executemany stores it, awkward values included (quotes, percent signs, NaN, extremes).
Skipped when no PostgreSQL server is reachable (tests/fixtures.py's PG_URL, database ``test``)."""

import datetime
import math

import pytest
import sqlalchemy as sa

from scheduler.db import fastpaths
from scheduler.utils import jsonutils
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
    {"n": 1, "big": 1, "at": None, "text": "%", "doc": "%(x)s", "flag": False, "ratio": 2},
    *({"n": 1, "big": 1, "at": None, "text": "f", "doc": None, "flag": None, "ratio": ratio}
      for ratio in (0.0, 160.0, 1e20, 1e-07, 1099511627776.5, 0.1 + 0.2, 5e-324, 1.7976931348623157e308,
                    -3.25, -1e-07, float("nan"), float("-inf"))),
]


@pytest.fixture
def connection():
    pytest.importorskip("psycopg2")
    # JSON as Berth's engine writes it (scheduler.db.engine).
    engine = sa.create_engine(PG_URL.format(db="test"), connect_args={"connect_timeout": 3},
                              json_serializer=jsonutils.dumps, json_deserializer=jsonutils.loads)
    try:
        with engine.connect() as connection:
            yield connection
    except sa.exc.OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable: {exc}")
    finally:
        engine.dispose()


def _stored(connection, table):
    rows = connection.execute(sa.select(table).order_by(table.c.pos)).all()
    # NaN is stored as NaN both ways, but compares unequal to itself.
    return [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows]


def test_each_row_is_stored_as_sqlalchemys_executemany_stores_it(connection):
    metadata = sa.MetaData()
    tables = [sa.Table(f"rendered_{way}", metadata, sa.Column("pos", sa.Integer),
                       *(sa.Column(c.name, c.type) for c in TABLE.c), prefixes=["TEMPORARY"])
              for way in ("fast", "portable")]
    metadata.create_all(connection)
    rows = [{"pos": pos, **row} for pos, row in enumerate(ROWS)]
    fast, portable = tables
    columns = list(rows[0])
    values = fastpaths._rendered_values(connection, fast, columns, rows)
    connection.exec_driver_sql(f"INSERT INTO {fast.name} ({', '.join(columns)}) VALUES {values}",
                               execution_options={"no_parameters": True})
    connection.execute(portable.insert(), rows)
    assert _stored(connection, fast) == _stored(connection, portable)
    assert _stored(connection, fast)[0][4] == AWKWARD


def test_values_written_without_psycopg2_read_as_psycopg2_writes_them(connection):
    cursor = connection.connection.dbapi_connection.cursor()
    values = [None, 0, -5, 2**63 - 1, -(2**63), 2**70, 1.5, -0.0, 1e20, 1e-07, -1e-07, 5e-324,
              1.7976931348623157e308, 0.1 + 0.2, datetime.datetime(2026, 12, 5, 2, 50, 1, 123456),
              datetime.datetime(999, 1, 1), datetime.datetime(2026, 1, 1)]
    assert [fastpaths._literal(v) for v in values] == [cursor.mogrify("%s", [v]).decode() for v in values]
    # Left to psycopg2: what needs quoting, a zone, or no plain number.
    for value in ("x", True, float("nan"), float("-inf"), datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
                  datetime.date(2026, 1, 1), {"a": 1}):
        assert fastpaths._literal(value) is None, value


DOCUMENT_TABLE_COLUMNS = ("pos", "uuid", "n", "big", "at", "text", "doc", "ratio")
CONTROL = "line\nbreak\r\x01\x1f\u2028 \ud7ff \U0001f600 \\u0000 literally"
DOCUMENT_ROWS = [
    {"n": 0, "big": 2**63 - 1, "at": datetime.datetime(2026, 12, 5, 2, 50, 1, 123456), "text": AWKWARD,
     "doc": {"s": AWKWARD, "c": CONTROL, "n": [1, None, -0.5, -0.0, 2**53, 1e20, 5e-324], "t": True},
     "ratio": 1.5},
    {"n": -5, "big": -(2**63), "at": datetime.datetime(2026, 12, 5, 2, 50, 1), "text": CONTROL, "doc": None,
     "ratio": -3.25},
    {"n": None, "big": 7, "at": datetime.datetime(999, 1, 1), "text": None, "doc": {}, "ratio": None},
    {"n": 2**31 - 1, "big": 0, "at": None, "text": "'; DROP TABLE instances; --", "doc": [],
     "ratio": 5e-324},
    {"n": 1, "big": 1, "at": None, "text": "%", "doc": "%(x)s", "ratio": 1.7976931348623157e308},
    {"n": 1, "big": 1, "at": datetime.datetime(2026, 1, 1, 0, 0, 0, 1), "text": "", "doc": 0.1 + 0.2,
     "ratio": 0.1 + 0.2},
]


def _document_tables(connection):
    metadata = sa.MetaData()
    tables = [sa.Table(f"document_{way}", metadata, sa.Column("pos", sa.Integer),
                       sa.Column("uuid", sa.String(36), unique=True), sa.Column("n", sa.Integer),
                       sa.Column("big", sa.BigInteger), sa.Column("at", sa.DateTime),
                       sa.Column("text", sa.Text), sa.Column("doc", sa.JSON), sa.Column("ratio", sa.Float),
                       prefixes=["TEMPORARY"])
                  for way in ("fast", "portable")]
    metadata.create_all(connection)
    return tables


def _as_text(connection, table):
    """Each column as PostgreSQL's own text of what it holds (JSON null and SQL NULL told apart)."""
    columns = ", ".join(f"{name}::text" for name in DOCUMENT_TABLE_COLUMNS)
    rows = connection.exec_driver_sql(f"SELECT {columns} FROM {table.name} ORDER BY pos")
    return [tuple(row) for row in rows]


@pytest.mark.parametrize("odd", [None, {"ratio": float("nan")}, {"ratio": float("-inf")}, {"ratio": -0.0},
                                 {"text": "nul\x00"},
                                 {"at": datetime.datetime(2026, 1, 1, 5, tzinfo=datetime.UTC)},
                                 {"doc": {"big": 2**70}}])
def test_new_instances_are_stored_as_sqlalchemys_executemany_stores_them(connection, odd):
    fast, portable = _document_tables(connection)
    rows = [{"pos": pos, "uuid": f"u{pos}", **row} for pos, row in enumerate(DOCUMENT_ROWS)]
    columns = list(rows[0])
    if odd is not None:
        rows[1].update(odd)
    sent = fastpaths._rows_document(fast, columns, rows)
    assert (sent is None) is (odd is not None)  # a value JSON cannot carry exactly: a VALUES list
    if odd is not None and "\x00" in str(odd.get("text")):
        with pytest.raises(ValueError):
            fastpaths.insert_new_instances_psycopg2(connection, fast, rows)
        return
    assert fastpaths.insert_new_instances_psycopg2(connection, fast, rows) == {row["uuid"] for row in rows}
    connection.execute(portable.insert(), rows)
    assert _as_text(connection, fast) == _as_text(connection, portable)
    stored = _as_text(connection, fast)
    assert stored[0][5] == AWKWARD and stored[2][6] == "{}"
    if odd is None:
        assert stored[1][5:7] == (CONTROL, "null")  # JSON null, as SQLAlchemy stores None
    # Inserted again with one new row: only that one is new, the others are left as they were.
    again = [dict(rows[0], text="changed"), {**rows[0], "pos": 99, "uuid": "new"}]
    assert fastpaths.insert_new_instances_psycopg2(connection, fast, again) == {"new"}
    assert _as_text(connection, fast)[0] == stored[0]
