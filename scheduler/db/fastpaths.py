"""The database's dialect fast paths: statements written for one driver, faster.

Each fast path does for one database or driver, faster, what a portable
statement beside it does for every other; both leave the same rows:

``insert_new_instances_psycopg2``
    new instances sent as one JSON document that PostgreSQL reads into rows
    (``json_populate_recordset``), where a VALUES list costs it half as much
    again to parse; rows JSON cannot carry exactly rendered by psycopg2 in C,
    each column bound by the bind processor SQLAlchemy's type gives for the
    dialect.
``upsert_psycopg2``
    hosts' reports and services' heartbeats inserted or updated in statements
    rendered by psycopg2 in C, instead of SQLAlchemy binding every value of an
    executemany.
``update_versioned_psycopg2``
    a batch of rows each updated if still at its version (version + 1), in one
    UPDATE ... FROM (VALUES ...) rendered by psycopg2 in C, instead of one
    UPDATE per row sent in pages.
``any_of``
    a column matched against one PostgreSQL array parameter instead of a list
    of parameters expanded into the statement each time it runs.
``on_pairs``
    (uuid, host) pairs matched against two unnested PostgreSQL arrays instead
    of a list of row comparisons.

They use public names only: each value is bound by its column type's own bind
processor (SQLAlchemy's public TypeEngine API) and rendered by psycopg2's
``cursor.mogrify``, as ``psycopg2.extras.execute_values`` renders its pages, so
they hold with any SQLAlchemy 2 and psycopg2 2.9. With ``[database]
sqlalchemy_fast_paths = false`` Berth takes the portable statements (``usable``).

SQLAlchemy is imported only where used: scheduler.conf lists this module's
option, and the command-line client loads that without SQLAlchemy.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

if TYPE_CHECKING:
    import sqlalchemy as sa

GROUP = "database"

opts = [
    cfg.BoolOpt(
        "sqlalchemy_fast_paths",
        default=True,
        help="Take Berth's fast paths on PostgreSQL: new instances inserted in one "
        "statement that reads them from one JSON document (PostgreSQL spends about 26 us a row "
        "on it where a VALUES list costs it 37), and batches of instance state changes matched "
        "through two unnested arrays (half the time or less of a list of row "
        "comparisons); the hosts' reports each scheduler saves rendered the same way "
        "(about half the CPU of SQLAlchemy's executemany); for the scaling groups' "
        "controller, a chunk of groups updated in one UPDATE ... FROM (VALUES ...) "
        "with each group's version compared, and id lists matched as one array. "
        "Turned off, Berth uses SQLAlchemy's portable statements: the same rows in the "
        "database, more time for each batch the scheduler writes. Other databases have "
        "no fast paths.",
    ),
]

#: The backends that have fast paths.
BACKENDS = ("postgresql",)


def list_opts() -> list:
    return [(GROUP, opts)]


def usable(enabled: bool | None, backend: str) -> bool:
    """Whether a database of ``backend`` takes the fast paths: ``enabled`` (None: the
    option's default) and it has some."""
    if enabled is None:
        enabled = opts[0].default
    return bool(enabled) and backend in BACKENDS


def instance_inserter(dialect: Any, enabled: bool
                      ) -> Callable[["sa.Connection", "sa.Table", list[dict[str, Any]]], set[str]] | None:
    """The fast path that inserts new instances through ``dialect``, or None where the
    portable statement does (``enabled`` off, or no fast path for its driver)."""
    if enabled and dialect.driver == "psycopg2":
        return insert_new_instances_psycopg2
    return None


def insert_new_instances_psycopg2(connection: Any, table: "sa.Table", rows: list[dict[str, Any]]
                                  ) -> set[str]:
    """INSERT ... ON CONFLICT (uuid) DO NOTHING RETURNING uuid of ``rows`` (dicts with the
    same keys) into ``table`` (instances); the uuids inserted.

    The rows travel as one JSON document that PostgreSQL reads into the table's rows
    (``json_populate_recordset``): a VALUES list of 512 rows costs PostgreSQL about 37 us a row to
    parse and plan, the document about 26 (``_rows_document``). Rows with a value JSON cannot carry
    exactly go as a VALUES list rendered by psycopg2 in C with SQLAlchemy's own bind processor of
    each column. The statement still runs through SQLAlchemy, which wraps its errors.
    """
    dialect = connection.dialect
    quote = dialect.identifier_preparer.quote
    columns = list(rows[0])
    names = ", ".join(quote(name) for name in columns)
    target = dialect.identifier_preparer.format_table(table)
    document = _rows_document(table, columns, rows)
    if document is not None:
        # JSON null becomes SQL NULL in a row read from JSON; SQLAlchemy stores None as JSON null.
        fields = ", ".join(f"COALESCE({quote(name)}, 'null')" if _is_json(table, name) else quote(name)
                           for name in columns)
        statement = (f"INSERT INTO {target} ({names}) SELECT {fields} "
                     f"FROM json_populate_recordset(NULL::{target}, %(rows)s) "
                     "ON CONFLICT (uuid) DO NOTHING RETURNING uuid")
        return set(connection.exec_driver_sql(statement, {"rows": document}).scalars())
    values = _rendered_values(connection, table, columns, rows)
    statement = (f"INSERT INTO {target} ({names}) VALUES {values} "
                 "ON CONFLICT (uuid) DO NOTHING RETURNING uuid")
    # Without parameters psycopg2 leaves the percent signs of the values alone.
    return set(connection.exec_driver_sql(statement, execution_options={"no_parameters": True}).scalars())


#: The column values a JSON document carries exactly into a row (JSON columns take any value).
_EXACT = (type(None), str, int, float, datetime)


def _is_json(table: "sa.Table", name: str) -> bool:
    import sqlalchemy as sa

    return isinstance(table.c[name].type, sa.JSON)


def _rows_document(table: "sa.Table", columns: list[str], rows: Sequence[Mapping[str, Any]]) -> str | None:
    """``rows`` as one JSON array of objects, as PostgreSQL's ``json_populate_recordset`` reads them
    into rows of ``table`` stored as psycopg2 and SQLAlchemy would store them, JSON columns as the
    text SQLAlchemy's serializer gives (scheduler.utils.jsonutils); None when a value would be
    stored otherwise: an int beyond 64 bits, a float that is not finite, a datetime with a zone, a
    string holding NUL, a value of another type, a JSON value orjson cannot write."""
    from scheduler.utils import jsonutils

    plain = [name for name in columns if not _is_json(table, name)]
    for row in rows:
        for name in plain:
            value = row[name]
            kind = type(value)
            if kind not in _EXACT:
                return None
            if kind is int:
                if not -(2**63) <= value < 2**63:
                    return None
            elif kind is str:
                if "\x00" in value:
                    return None
            elif kind is float:
                if not math.isfinite(value) or (value == 0 and math.copysign(1, value) < 0):
                    return None  # psycopg2's -0.0 is minus zero, stored 0; JSON's stays -0
            elif kind is datetime and value.tzinfo is not None:
                return None
    try:
        return jsonutils.dumps_strict(rows)
    except TypeError:
        return None


def _rendered_values(connection: Any, table: "sa.Table", columns: list[str],
                     rows: Sequence[Mapping[str, Any]]) -> str:
    """``rows`` as the rows of a VALUES list, ``columns`` in order: each value bound by its
    column's SQLAlchemy bind processor (JSON...); numbers, NULLs and naive datetimes written
    as psycopg2 writes them (``_literal``), the rest rendered by psycopg2's ``mogrify`` in C,
    the whole list in one call (a tenth less CPU than one call a row)."""
    from psycopg2.extensions import encodings as psycopg2_encodings

    dialect = connection.dialect
    processors = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns]
    pairs = list(zip(columns, processors, strict=True))
    params: list[Any] = []
    rendered = []
    for row in rows:
        parts = []
        for name, process in pairs:
            value = row[name] if process is None else process(row[name])
            literal = _literal(value)
            if literal is None:
                parts.append("%s")
                params.append(value)
            else:
                parts.append(literal)
        rendered.append("(" + ", ".join(parts) + ")")
    cursor = connection.connection.dbapi_connection.cursor()
    try:
        text = cursor.mogrify(", ".join(rendered), params)
        return text.decode(psycopg2_encodings[cursor.connection.encoding])
    finally:
        cursor.close()


def _literal(value: Any) -> str | None:
    """``value`` written as psycopg2 writes it, for the types whose text needs no quoting
    (None, an int, a finite float, a naive datetime): psycopg2's adapters take 1.7-3.3 us a
    value where this takes a tenth of that. None for any other value (psycopg2's to render).
    A negative number gets a space before it, as psycopg2 gives it (``1 - -1``, never ``--``)."""
    kind = type(value)
    if value is None:
        return "NULL"
    if kind is int:
        return f" {value}" if value < 0 else str(value)
    if kind is float:
        if not math.isfinite(value):
            return None
        text = repr(value)
        return f" {text}" if text[0] == "-" else text
    if kind is datetime and value.tzinfo is None:
        return f"'{value.isoformat()}'::timestamp"
    return None


Upsert = Callable[["sa.Connection", "sa.Table", Sequence[Mapping[str, Any]], tuple[str, ...]], None]


def upserter(dialect: Any, enabled: bool) -> Upsert | None:
    """The fast path that inserts or updates rows through ``dialect``, or None where the
    portable statement does (``enabled`` off, or no fast path for its driver)."""
    if enabled and dialect.driver == "psycopg2":
        return upsert_psycopg2
    return None


#: Rows per INSERT of ``upsert_psycopg2``, as SQLAlchemy pages an executemany's VALUES.
UPSERT_ROWS = 1000


def upsert_psycopg2(connection: Any, table: "sa.Table", rows: Sequence[Mapping[str, Any]],
                    keys: tuple[str, ...]) -> None:
    """INSERT ... ON CONFLICT (``keys``) DO UPDATE of ``rows`` (dicts with the same keys, no two
    with the same ``keys``) into ``table``, every column but ``keys``, ``id`` and
    ``created_at`` updated: rendered by psycopg2 in C, UPSERT_ROWS rows a statement, where
    SQLAlchemy's executemany binds each of their values one by one (a host's report is
    fifteen columns, saved by the host's owner at every report)."""
    quote = connection.dialect.identifier_preparer.quote
    columns = list(rows[0])
    names = ", ".join(quote(name) for name in columns)
    sets = ", ".join(f"{quote(name)} = EXCLUDED.{quote(name)}" for name in columns
                     if name not in keys and name not in ("id", "created_at"))
    head = (f"INSERT INTO {connection.dialect.identifier_preparer.format_table(table)} ({names}) VALUES ")
    tail = f" ON CONFLICT ({', '.join(quote(key) for key in keys)}) DO UPDATE SET {sets}"
    for start in range(0, len(rows), UPSERT_ROWS):
        values = _rendered_values(connection, table, columns, rows[start:start + UPSERT_ROWS])
        # Without parameters psycopg2 leaves the percent signs of the values alone.
        connection.exec_driver_sql(head + values + tail, execution_options={"no_parameters": True})


def versioned_updater(dialect: Any, enabled: bool
                      ) -> Callable[["sa.Connection", "sa.Table", list[dict[str, Any]]], set[int]] | None:
    """The fast path that updates rows at their versions through ``dialect``, or None
    where the portable statement does (``enabled`` off, or no fast path for its driver)."""
    if enabled and dialect.driver == "psycopg2":
        return update_versioned_psycopg2
    return None


def update_versioned_psycopg2(connection: Any, table: "sa.Table", rows: list[dict[str, Any]]) -> set[int]:
    """Each of ``rows`` (dicts with the same keys: ``id``, ``version`` the one expected,
    and the columns to set) written to its row of ``table`` if that row is still at that
    version, its version + 1: one UPDATE ... FROM (VALUES ...) RETURNING id; the ids written.

    Each value is bound by SQLAlchemy's bind processor of its column and rendered by
    psycopg2 in C, then cast to its column's type (a VALUES list types its columns from
    the literals alone)."""
    if not rows:
        return set()
    dialect = connection.dialect
    columns = list(rows[0])
    if columns[:2] != ["id", "version"] or "version" in columns[2:]:
        raise ValueError(f"rows start with id and version, then the columns set; got {columns}")
    values = _rendered_values(connection, table, columns, rows)
    quote = dialect.identifier_preparer.quote
    given = ", ".join(f"v{i}" for i in range(len(columns)))
    sets = ", ".join(f"{quote(name)} = CAST(v.v{i} AS {table.c[name].type.compile(dialect=dialect)})"
                     for i, name in enumerate(columns) if i >= 2)
    name = dialect.identifier_preparer.format_table(table)
    statement = (f"UPDATE {name} AS t SET {sets}, version = t.version + 1 "
                 f"FROM (VALUES {values}) AS v({given}) "
                 "WHERE t.id = CAST(v.v0 AS INTEGER) AND t.version = CAST(v.v1 AS INTEGER) RETURNING t.id")
    # Without parameters psycopg2 leaves the percent signs of the values alone.
    return set(connection.exec_driver_sql(statement, execution_options={"no_parameters": True}).scalars())


def any_of(connection: "sa.Connection", column: "sa.ColumnElement[Any]", values: Iterable[Any], enabled: bool
           ) -> "sa.ColumnElement[bool]":
    """The condition that ``column`` is one of ``values``.

    PostgreSQL gets them as one array (``column = ANY(%(values)s)``, which it plans as
    it plans an IN list): SQLAlchemy renders an IN list of 500 parameters anew at each
    execution, which cost more than the rows of a chunk's reads."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql

    values = list(values)
    if not enabled or connection.dialect.name != "postgresql":
        return column.in_(values)
    return column == sa.any_(sa.cast(values, postgresql.ARRAY(column.type)))


def on_pairs(connection: "sa.Connection", table: "sa.Table", pairs: Iterable[tuple[str, str]], enabled: bool
             ) -> "sa.ColumnElement[bool]":
    """The condition that a row of ``table`` (instances) is one of ``pairs`` [(uuid, host)].

    PostgreSQL joins two arrays unnested: with a list of row comparisons
    it plans an index scan per pair, which took it twice as long for 500.
    """
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql

    pairs = list(pairs)
    if not enabled or connection.dialect.name != "postgresql":
        return sa.tuple_(table.c.uuid, table.c.host).in_(pairs)
    given = sa.func.unnest(
        sa.cast([uuid for uuid, _ in pairs], postgresql.ARRAY(sa.String)),
        sa.cast([host for _, host in pairs], postgresql.ARRAY(sa.String)),
    ).table_valued("uuid", "host").render_derived()
    return sa.and_(table.c.uuid == given.c.uuid, table.c.host == given.c.host)


#: insert(connection, table, {column: values by row}, {column: value of every row}).
ColumnsInserter = Callable[["sa.Connection", "sa.Table", dict[str, list[Any]], dict[str, Any]], None]


def history_inserter(dialect: Any, enabled: bool) -> ColumnsInserter | None:
    """The fast path that inserts many rows of a narrow table (a group's history) through
    ``dialect``, or None where the portable executemany does."""
    if enabled and dialect.name == "postgresql":
        return insert_unnested_postgresql
    return None


def insert_unnested_postgresql(connection: "sa.Connection", table: "sa.Table", columns: dict[str, list[Any]],
                               constants: dict[str, Any]) -> None:
    """INSERT INTO ``table`` one row per position of the ``columns`` lists (all as long),
    each with the ``constants`` too: one statement whose parameters are one array per
    column (``SELECT ... FROM unnest(...)``), where an executemany binds each value of
    each row (10,000 rows of three columns cost a sync a quarter of its writes)."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql

    lengths = {len(values) for values in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"the columns' lists differ in length: {sorted(lengths)}")
    if not lengths.pop():
        return
    names = list(columns)
    arrays = [sa.cast(sa.bindparam(f"c{i}", columns[name], type_=postgresql.ARRAY(table.c[name].type)),
                      postgresql.ARRAY(table.c[name].type))
              for i, name in enumerate(names)]
    rows = sa.func.unnest(*arrays).table_valued(*names).render_derived(with_types=False)
    selected = [rows.c[name] for name in names]
    selected += [sa.literal(value, type_=table.c[name].type).label(name) for name, value in constants.items()]
    connection.execute(table.insert().from_select([*names, *constants], sa.select(*selected)))


def json_aggregates(dialect: Any, enabled: bool) -> bool:
    """Whether many rows may be read as one JSON array per key (PostgreSQL's json_agg),
    decoded in C, instead of one row tuple each turned into a dict in Python."""
    return enabled and dialect.name == "postgresql"
