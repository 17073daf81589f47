"""The scheduler's queries: rows in and out as plain dicts.

Timestamps are stored as naive UTC datetimes and returned as ISO-8601
strings ending in "Z" (they travel over JSON RPC); they are accepted as
datetimes (naive means UTC), ISO-8601 strings or POSIX timestamps.

Every public method is one transaction. Transient failures (connection lost
or refused, deadlock, serialization failure, SQLite busy) are retried
``max_retries`` times (-1: for ever) ``retry_interval`` seconds apart, and
then raise :class:`DatabaseUnavailable`; other errors raise at once.
"""

import contextlib
import functools
import importlib.util
import logging
import os
import re
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import make_url

from scheduler import jsonutils
from scheduler.db import migration, models
from scheduler.db.models import (
    aggregate_hosts,
    aggregates,
    compute_nodes,
    host_generations,
    instances,
    server_group_members,
    server_groups,
    services,
)

LOG = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT = 30.0  # seconds SQLite waits for another writer
_IN_CHUNK = 500  # uuids per IN (...) clause

# PostgreSQL SQLSTATEs worth a retry: serialization failure, deadlock, too many
# connections, admin/crash shutdown, cannot connect now; and class 08 (connection).
_PG_TRANSIENT = {"40001", "40P01", "53300", "57P01", "57P02", "57P03"}
# Connection failures without a SQLSTATE that no retry will fix.
_PG_PERMANENT_TEXT = (
    "authentication failed",
    "does not exist",
    "no password supplied",
    "no pg_hba.conf entry",
    "invalid dsn",
    "invalid connection option",
)
# MySQL/MariaDB error numbers worth a retry: lock wait timeout, deadlock, too
# many connections, server shutdown, can't connect, gone away, lost connection,
# connection killed, disconnected for inactivity.
_MYSQL_TRANSIENT = {1205, 1213, 1040, 1053, 2002, 2003, 2006, 2013, 2055, 1927, 4031}


class DatabaseUnavailable(Exception):
    """The database stayed unreachable (or locked) through every retry."""


class NotFound(LookupError):
    """No aggregate or server group of that name or uuid."""


class Conflict(ValueError):
    """The name (or host membership) exists already."""


def mask_url(url):
    """``url`` as a string fit for a log: the password replaced by ***."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", str(url))


def utcnow():
    """This machine's clock, naive UTC (Database.now() is the one to time records by)."""
    return datetime.now(UTC).replace(tzinfo=None)


def to_db_time(value):
    """A naive UTC datetime from a datetime, an ISO-8601 string or a POSIX time."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value
    if isinstance(value, str):
        text = value.strip()
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            return to_db_time(datetime.fromisoformat(text))
        except ValueError:
            raise ValueError(f"not an ISO-8601 time: {value!r}") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    raise ValueError(f"not a time: {value!r}")


def to_iso(value):
    """The API's form of a stored naive UTC datetime: '2024-01-02T03:04:05.000006Z'."""
    if value is None:
        return None
    return value.isoformat(timespec="microseconds") + "Z"


def _row_dict(row):
    return {key: to_iso(value) if isinstance(value, datetime) else value for key, value in row.items()}


def _time_columns(table):
    return frozenset(c.name for c in table.columns if isinstance(c.type, sa.DateTime))


_INSTANCE_TIMES = _time_columns(instances)
_NODE_TIMES = _time_columns(compute_nodes)
_INSTANCE_WRITABLE = frozenset(instances.c.keys()) - {"id"}
_INSTANCE_UPDATABLE = _INSTANCE_WRITABLE - {"uuid", "created_at"}
_NODE_COLUMNS = frozenset(compute_nodes.c.keys()) - {"id", "stats", "updated_at"}
_NODE_DEFAULTS = {
    c.name: (c.default.arg if c.default is not None and not callable(c.default.arg) else None)
    for c in compute_nodes.columns
}
_INSTANCE_DEFAULTS = {
    c.name: (c.default.arg if c.default is not None and not callable(c.default.arg) else None)
    for c in instances.columns
}


def _states(states):
    if states is None:
        return None
    return [states] if isinstance(states, str) else list(states)


def _check_state(state):
    if state not in models.INSTANCE_STATES:
        raise ValueError(f"unknown instance state {state!r}")


def _instance_values(values, allowed):
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"not instance columns: {', '.join(sorted(unknown))}")
    out = dict(values)
    for key in _INSTANCE_TIMES.intersection(out):
        out[key] = to_db_time(out[key])
    if "state" in out:
        _check_state(out["state"])
    return out


def _insert_new_instances_psycopg2(connection, rows):
    """INSERT ... ON CONFLICT (uuid) DO NOTHING RETURNING uuid of ``rows`` (dicts with the
    same keys); the uuids inserted.

    psycopg2 renders each row's values in C (as its execute_values does) with
    SQLAlchemy's own bind processing of each column (JSON), instead of
    SQLAlchemy binding a batch of 512 rows one parameter at a time: about a
    third less time per batch. The statement still runs through SQLAlchemy,
    which wraps its errors.
    """
    from psycopg2.extensions import encodings as psycopg2_encodings

    dialect = connection.dialect
    columns = list(rows[0])
    processors = [instances.c[name].type._cached_bind_processor(dialect) for name in columns]
    cursor = connection.connection.dbapi_connection.cursor()
    try:
        template = "(" + ", ".join(["%s"] * len(columns)) + ")"
        values = b", ".join(
            cursor.mogrify(template, [row[name] if process is None else process(row[name])
                                      for name, process in zip(columns, processors, strict=True)])
            for row in rows
        ).decode(psycopg2_encodings[cursor.connection.encoding])
    finally:
        cursor.close()
    names = ", ".join(dialect.identifier_preparer.quote(name) for name in columns)
    statement = (f"INSERT INTO instances ({names}) VALUES {values} "
                 "ON CONFLICT (uuid) DO NOTHING RETURNING uuid")
    # Without parameters psycopg2 leaves the percent signs of the values alone.
    return set(connection.exec_driver_sql(statement, execution_options={"no_parameters": True}).scalars())


def _chunks(items, size=_IN_CHUNK):
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _on_pairs(connection, pairs):
    """The condition that an instance is one of ``pairs`` [(uuid, host)].

    PostgreSQL joins two arrays unnested: with a list of row comparisons
    it plans an index scan per pair, which took it twice as long for 500.
    """
    if connection.dialect.name != "postgresql":
        return sa.tuple_(instances.c.uuid, instances.c.host).in_(pairs)
    given = sa.func.unnest(
        sa.cast([uuid for uuid, _ in pairs], postgresql.ARRAY(sa.String)),
        sa.cast([host for _, host in pairs], postgresql.ARRAY(sa.String)),
    ).table_valued("uuid", "host").render_derived()
    return sa.and_(instances.c.uuid == given.c.uuid, instances.c.host == given.c.host)


def _first_line(exc):
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0] if text else ''}".rstrip(": ")


def is_conflict(exc):
    """Whether ``exc`` is a deadlock or a serialization failure: the transaction lost a
    race and can be run again at once (a transient failure that needs no waiting)."""
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    orig = exc.orig
    sqlstate = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if sqlstate:
        return sqlstate in ("40001", "40P01")
    args = getattr(orig, "args", ())
    return bool(args) and args[0] in (1213, 1205)  # MySQL deadlock, lock wait timeout


def is_transient(exc):
    """Whether ``exc`` is worth another attempt."""
    if isinstance(exc, sa_exc.DisconnectionError):
        return True
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if isinstance(orig, sqlite3.OperationalError):
        text = str(orig).lower()
        return "locked" in text or "busy" in text
    sqlstate = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if sqlstate:
        return sqlstate in _PG_TRANSIENT or sqlstate.startswith("08")
    module = type(orig).__module__ or ""
    if module.startswith("psycopg"):
        # Connection failures carry no SQLSTATE: refused, timed out, reset...
        text = str(orig).lower()
        return isinstance(exc, sa_exc.OperationalError) and not any(t in text for t in _PG_PERMANENT_TEXT)
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0] in _MYSQL_TRANSIENT
    return False


def _retry(method):
    """Run ``method`` again on transient failures, per the Database's retry settings."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(self._work, "connection", None) is not None:
            # Inside a unit of work the transaction is the caller's: it is
            # retried whole (its messages are redelivered), not statement by statement.
            return method(self, *args, **kwargs)
        failures = 0
        while True:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                failures += 1
                reason = self.scrub(_first_line(exc))
                if 0 <= self.max_retries < failures:
                    raise DatabaseUnavailable(
                        f"database {self.masked_url} unavailable after {failures} attempt(s): {reason}"
                    ) from exc
                LOG.warning(
                    "Database %s: %s failed (%s); retry %d of %s in %.1fs",
                    self.masked_url,
                    method.__name__,
                    reason,
                    failures,
                    "unlimited" if self.max_retries < 0 else self.max_retries,
                    self.retry_interval,
                )
                time.sleep(self.retry_interval)

    return wrapper


# A URL without a driver gets SQLAlchemy's default one (psycopg 3, mysqlclient);
# fall back to the driver Berth installs when that one is missing.
_FALLBACK_DRIVERS = {
    "postgresql": (("psycopg", "psycopg"), ("psycopg2", "psycopg2")),
    "mysql": (("MySQLdb", "mysqldb"), ("pymysql", "pymysql")),
    "mariadb": (("MySQLdb", "mysqldb"), ("pymysql", "pymysql")),
}


#: The setup.cfg extra that installs a driver.
_EXTRAS = {"postgresql+psycopg2": "postgresql", "mysql+pymysql": "mysql", "mariadb+pymysql": "mysql"}


def _installed_driver(url):
    choices = _FALLBACK_DRIVERS.get(url.drivername)
    if not choices:
        return url
    for module, driver in choices:
        if importlib.util.find_spec(module) is not None:
            return url.set(drivername=f"{url.drivername}+{driver}")
    return url


def _sqlite_wal(cursor):
    """Switch to write-ahead logging, once per database file.

    The switch needs an exclusive lock and SQLite does not wait for it (no
    busy handler): several processes opening a new database at once wait here.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Database:
    """The scheduler's database: an engine, the migrations and the queries."""

    def __init__(self, url, max_retries=10, retry_interval=1.0, echo=False):
        try:
            self.url = make_url(url)
        except sa_exc.ArgumentError as exc:
            raise ValueError(f"invalid database URL {mask_url(url)!r}: {exc}") from None
        self.url = _installed_driver(self.url)
        self.masked_url = self.url.render_as_string(hide_password=True)
        self.max_retries = max_retries
        self.retry_interval = retry_interval
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self._clock_offset = timedelta(0)
        self._work = threading.local()  # the unit of work open on each thread, if any
        kwargs = {"echo": echo, "json_serializer": jsonutils.dumps, "json_deserializer": jsonutils.loads}
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT}
            if self._sqlite_in_memory():
                kwargs["poolclass"] = sa.pool.StaticPool
            else:
                self._make_sqlite_dir()
        else:
            kwargs.update(pool_pre_ping=True, pool_recycle=3600)
            if self.url.drivername.partition("+")[2] == "psycopg2":
                # UPDATE executemany in pages (execute_batch), not one round trip per row.
                kwargs["executemany_mode"] = "values_plus_batch"
        try:
            self.engine = sa.create_engine(self.url, **kwargs)
        except ImportError as exc:
            extra = _EXTRAS.get(self.url.drivername)
            hint = f"; install it with: pip install 'berth[{extra}]'" if extra else ""
            raise ValueError(f"database URL {self.masked_url!r} needs the {self.url.get_driver_name()} "
                             f"driver, which is not installed ({exc}){hint}") from None
        except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError) as exc:
            raise ValueError(f"invalid database URL {self.masked_url!r}: {exc}") from None
        if self.is_sqlite:
            self._setup_sqlite()

    @classmethod
    def from_conf(cls, conf):
        """A Database from the ``[database]`` options of ``conf``."""
        db = conf.database
        return cls(
            db.connection,
            max_retries=db.max_retries,
            retry_interval=db.retry_interval,
            echo=db.connection_debug,
        )

    def __repr__(self):
        return f"<Database {self.masked_url}>"

    # -- plumbing ---------------------------------------------------------

    def _sqlite_in_memory(self):
        database = self.url.database
        return not database or database == ":memory:" or "mode=memory" in str(self.url.query)

    def _make_sqlite_dir(self):
        database = self.url.database
        if database.startswith("file:"):
            return
        parent = os.path.dirname(os.path.abspath(database))
        os.makedirs(parent, exist_ok=True)

    def _setup_sqlite(self):
        in_memory = self._sqlite_in_memory()

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection, _record):
            # Let SQLAlchemy, not the sqlite3 module, say when transactions begin.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT * 1000)}")
            if not in_memory:
                _sqlite_wal(cursor)
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(connection):
            # A writer takes the write lock up front: no deadlock between two
            # readers that both want to write, and the busy timeout applies.
            immediate = connection.get_execution_options().get("berth_write")
            connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    # -- the clock ----------------------------------------------------------

    def now(self):
        """The database's time, naive UTC: what every record is timed by, so that
        processes on machines whose clocks disagree compare the same times."""
        return utcnow() + self._clock_offset

    @property
    def clock_offset(self):
        """Seconds the database's clock is ahead of this machine's (as last measured)."""
        return self._clock_offset.total_seconds()

    @_retry
    def sync_clock(self):
        """Measure how far the database's clock is from this machine's; returns the
        offset in seconds. SQLite runs in this process: its clock is ours."""
        if self.is_sqlite:
            return 0.0
        dialect = self.engine.dialect.name
        if dialect == "postgresql":
            query = "SELECT EXTRACT(EPOCH FROM clock_timestamp())"
        else:
            query = "SELECT UNIX_TIMESTAMP(NOW(6))"
        with self.engine.connect() as connection:
            before = time.time()
            remote = float(connection.exec_driver_sql(query).scalar())
            after = time.time()
        offset = remote - (before + after) / 2
        self._clock_offset = timedelta(seconds=offset)
        return offset

    def scrub(self, text):
        """``text`` with the database password, if it appears, replaced by ***."""
        password = self.url.password
        return text.replace(password, "***") if password else text

    @contextlib.contextmanager
    def _transaction(self, write=False):
        current = getattr(self._work, "connection", None)
        if current is not None:
            yield current
            return
        with self.engine.connect() as connection:
            if write:
                connection.execution_options(berth_write=True)
            with connection.begin():
                yield connection

    # -- schema -----------------------------------------------------------

    @_retry
    def sync(self):
        """Upgrade the schema to the newest migration; return the revision reached.

        Safe to call at every start, and from several processes at once.
        """
        return migration.upgrade(self.engine)

    @_retry
    def version(self):
        """The schema's alembic revision, or None for an empty database."""
        with self.engine.connect() as connection:
            return migration.current(connection)

    def dispose(self):
        self.engine.dispose()

    @contextlib.contextmanager
    def unit_of_work(self):
        """One transaction for everything this thread does with the database until exit.

        Commits when the block ends, rolls everything back if it raises.
        ``step()`` marks out a part that can fail alone (a savepoint).
        """
        if getattr(self._work, "connection", None) is not None:
            raise RuntimeError("a unit of work is already open on this thread")
        with self.engine.connect() as connection:
            connection.execution_options(berth_write=True)
            with connection.begin():
                self._work.connection = connection
                try:
                    yield self
                finally:
                    self._work.connection = None

    @contextlib.contextmanager
    def step(self):
        """Inside a unit of work: undo only this block's writes if it raises."""
        connection = getattr(self._work, "connection", None)
        if connection is None:
            yield
            return
        with connection.begin_nested():
            yield

    # -- claims -------------------------------------------------------------

    @_retry
    def host_generations(self, hosts=None):
        """{host: generation} for ``hosts`` (0 for a host never claimed), or for every host claimed."""
        if hosts is None:
            with self._transaction() as connection:
                return dict(connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)).all())
        found = dict.fromkeys(hosts, 0)
        with self._transaction() as connection:
            for chunk in _chunks(list(found)):
                for host, generation in connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)
                    .where(host_generations.c.host.in_(chunk))
                ):
                    found[host] = generation
        return found

    @_retry
    def claim_hosts(self, expected, wait=False):
        """Bump the generation of every host of ``expected`` ({host: generation}) that
        still is at that generation, in three statements whatever their number.

        Returns (claimed, conflicts, held): the hosts whose generation was bumped;
        those another scheduler placed on since; those another scheduler's
        transaction holds right now (rather than wait for them, place
        elsewhere; with ``wait``, none: their rows are waited for, in host order).
        A claimed host stays locked until the transaction ends.
        """
        claimed, conflicts, held = set(), set(), set()
        if not expected:
            return claimed, conflicts, held
        with self._transaction(write=True) as connection:
            found = {}
            for chunk in _chunks(sorted(expected)):  # one lock order for every scheduler
                found.update(connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)
                    .where(host_generations.c.host.in_(chunk))
                    .order_by(host_generations.c.host)
                    .with_for_update(skip_locked=not wait)
                ).all())
            missing = []
            for host, generation in expected.items():
                current = found.get(host)
                if current is None:
                    # No row (never claimed), or a row locked by another transaction.
                    if generation == 0:
                        missing.append(host)
                    else:
                        held.add(host)
                elif current == generation:
                    claimed.add(host)
                else:
                    conflicts.add(host)
            inserted = self._insert_new_hosts(connection, sorted(missing))
            claimed.update(inserted)
            held.update(set(missing).difference(inserted))
            bump = sorted(claimed.difference(missing))
            for chunk in _chunks(bump):
                connection.execute(
                    sa.update(host_generations).where(host_generations.c.host.in_(chunk))
                    .values(generation=host_generations.c.generation + 1)
                )
        return claimed, conflicts, held

    @staticmethod
    def _insert_new_hosts(connection, hosts):
        """Insert the generation rows of those of ``hosts`` that have none, claimed once,
        in the order given (the same for every scheduler: no deadlock); those inserted."""
        rows = [{"host": host, "generation": 1} for host in hosts]
        if not rows:
            return set()
        dialect = connection.dialect.name
        if dialect in ("postgresql", "sqlite"):
            dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
            statement = dialect_insert(host_generations).on_conflict_do_nothing()
            return set(connection.scalars(statement.returning(host_generations.c.host), rows))
        ignore = sa.insert(host_generations).prefix_with("IGNORE")
        return {row["host"] for row in rows if connection.execute(ignore.values(row)).rowcount}

    @_retry
    def instances_placed_since(self, hosts=None, since=None):
        """Instances placed on any of ``hosts`` (on any host with None) that their agents
        may not have reported yet: those not claimed yet (SCHEDULED) and, with
        ``since`` (naive UTC, the database's clock), those BUILDING or ACTIVE updated
        at or after it. Which of them a host's last report lists is the caller's to tell."""
        condition = instances.c.state == models.SCHEDULED
        if since is not None:
            condition = sa.or_(condition, sa.and_(
                instances.c.state.in_([models.BUILDING, models.ACTIVE]),
                instances.c.updated_at >= to_db_time(since)))
        query = sa.select(instances).where(condition)
        rows = []
        with self._transaction() as connection:
            if hosts is None:
                rows = connection.execute(query).mappings().all()
            for chunk in _chunks(sorted(set(hosts or ()))):
                rows.extend(connection.execute(query.where(instances.c.host.in_(chunk))).mappings().all())
        return [_row_dict(row) for row in rows]

    # -- instances --------------------------------------------------------

    def _new_instance_row(self, record, now):
        row = _instance_values(record, _INSTANCE_WRITABLE)
        if not row.get("uuid"):
            raise ValueError("an instance needs a uuid")
        full = {key: _INSTANCE_DEFAULTS[key] for key in _INSTANCE_WRITABLE}
        full.update(row)
        full["created_at"] = full["created_at"] or now
        full["updated_at"] = full["updated_at"] or full["created_at"]
        return full

    @_retry
    def create_instances(self, records):
        """Insert the records whose uuid is not in the table yet; return their uuids.

        Rows already there are left alone, so a redelivered request is harmless.
        """
        now = self.now()
        rows = {}
        for record in records:
            row = self._new_instance_row(record, now)
            rows.setdefault(row["uuid"], row)
        if not rows:
            return []
        with self._transaction(write=True) as connection:
            dialect = connection.dialect.name
            if connection.dialect.driver == "psycopg2":
                inserted = _insert_new_instances_psycopg2(connection, list(rows.values()))
                return [uuid for uuid in rows if uuid in inserted]
            if dialect in ("postgresql", "sqlite"):
                # One statement: insert what is new, learn which those were.
                dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
                inserted = set(connection.scalars(
                    dialect_insert(instances).on_conflict_do_nothing(index_elements=["uuid"])
                    .returning(instances.c.uuid), list(rows.values())
                ))
                return [uuid for uuid in rows if uuid in inserted]
        for attempt in range(3):
            try:
                with self._transaction(write=True) as connection:
                    existing = set()
                    for chunk in _chunks(rows):
                        existing.update(
                            connection.scalars(sa.select(instances.c.uuid).where(instances.c.uuid.in_(chunk)))
                        )
                    new = [row for uuid, row in rows.items() if uuid not in existing]
                    if new:
                        connection.execute(instances.insert(), new)
                return [row["uuid"] for row in new]
            except sa_exc.IntegrityError:
                # Another process inserted one of them in between: look again.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


    @_retry
    def get_instance(self, uuid):
        with self._transaction() as connection:
            row = connection.execute(sa.select(instances).where(instances.c.uuid == uuid)).mappings().first()
        return _row_dict(row) if row is not None else None

    @_retry
    def get_instances(self, uuids):
        """{uuid: instance} of those of ``uuids`` that exist."""
        found = {}
        with self._transaction() as connection:
            for chunk in _chunks(dict.fromkeys(uuids)):
                query = sa.select(instances).where(instances.c.uuid.in_(chunk))
                for row in connection.execute(query).mappings():
                    found[row["uuid"]] = _row_dict(row)
        return found

    @staticmethod
    def _update_one(connection, uuid, values, expected_states, expected_updated_at=None, host=None):
        statement = sa.update(instances).where(instances.c.uuid == uuid).values(values)
        if host is not None:
            statement = statement.where(instances.c.host == host)
        states = _states(expected_states)
        if states is not None:
            statement = statement.where(instances.c.state.in_(states))
        if expected_updated_at is not None:
            statement = statement.where(instances.c.updated_at == to_db_time(expected_updated_at))
        return connection.execute(statement).rowcount == 1

    @_retry
    def update_instance(self, uuid, values, expected_states=None, expected_updated_at=None):
        """Compare-and-set: update the instance if its state is one of ``expected_states``
        (and, with ``expected_updated_at``, if it was not updated since that time).

        Returns the updated row, or None when the instance is missing or in
        another state. ``updated_at`` is set to now.
        """
        values = _instance_values(values, _INSTANCE_UPDATABLE)
        values["updated_at"] = self.now()
        with self._transaction(write=True) as connection:
            if not self._update_one(connection, uuid, values, expected_states, expected_updated_at):
                return None
            row = connection.execute(sa.select(instances).where(instances.c.uuid == uuid)).mappings().one()
        return _row_dict(row)

    @_retry
    def set_instance_states(self, updates):
        """Update each instance of ``[(uuid, host, values, expected_states), ...]`` if it is
        on ``host`` in one of ``expected_states``, in order; whether each was.

        Consecutive updates writing the same values from the same states go in
        one statement where the database can say which rows it changed. Where
        rows are locked one by one, they are all locked first, in uuid order, as
        every scheduler does: two schedulers with the same instances in their
        batches (one's BUILDING, the other's ACTIVE) wait for each other instead
        of deadlocking.
        """
        now = self.now()
        applied = [False] * len(updates)
        runs = []  # [(values, expected_states, [(index, uuid, host), ...])]
        for index, (uuid, host, values, expected_states) in enumerate(updates):
            values = dict(_instance_values(values, _INSTANCE_UPDATABLE), updated_at=now)
            states = tuple(_states(expected_states) or ())
            if runs and runs[-1][0] == values and runs[-1][1] == states:
                runs[-1][2].append((index, uuid, host))
            else:
                runs.append((values, states, [(index, uuid, host)]))
        with self._transaction(write=True) as connection:
            if len(updates) > 1 and connection.dialect.name != "sqlite":
                for chunk in _chunks(sorted({uuid for uuid, *_ in updates})):
                    connection.execute(sa.select(instances.c.id).where(instances.c.uuid.in_(chunk))
                                       .order_by(instances.c.uuid).with_for_update()).all()
            for values, states, members in runs:
                if len(members) == 1 or not connection.dialect.update_returning:
                    for index, uuid, host in members:
                        applied[index] = self._update_one(connection, uuid, values, states or None, host=host)
                    continue
                for chunk in _chunks(members):
                    statement = (
                        sa.update(instances)
                        .where(_on_pairs(connection, [(uuid, host) for _, uuid, host in chunk]))
                        .values(values)
                        .returning(instances.c.uuid, instances.c.host)
                    )
                    if states:
                        statement = statement.where(instances.c.state.in_(states))
                    changed = set(connection.execute(statement).all())
                    for index, uuid, host in chunk:
                        applied[index] = (uuid, host) in changed
        return applied

    @_retry
    def update_instances_if(self, updates):
        """Compare-and-set on several instances: apply each ``(uuid, values, expected)``
        whose row still holds ``expected`` ({column: value, or a tuple of allowed
        values}); the uuids updated. A row another transaction is changing is
        waited for, and compared as that one left it."""
        now = self.now()
        done = set()
        with self._transaction(write=True) as connection:
            for uuid, values, expected in updates:
                values = dict(_instance_values(values, _INSTANCE_UPDATABLE), updated_at=now)
                statement = sa.update(instances).where(instances.c.uuid == uuid).values(values)
                for column, value in expected.items():
                    column = instances.c[column]
                    if isinstance(value, tuple):
                        statement = statement.where(column.in_(value))
                    elif value is None:
                        statement = statement.where(column.is_(None))
                    else:
                        statement = statement.where(column == value)
                if connection.execute(statement).rowcount == 1:
                    done.add(uuid)
        return done

    @_retry
    def update_instances(self, updates):
        """Apply ``(uuid, values[, expected_states])`` updates in one transaction.

        Missing instances, and those not in their expected states, are left
        alone. Updates without expected states that write the same columns go
        in one executemany (pages of statements per round trip on PostgreSQL).
        """
        now = self.now()
        unconditional = {}  # columns written -> rows
        with self._transaction(write=True) as connection:
            for uuid, values, *expected_states in updates:
                values = dict(_instance_values(values, _INSTANCE_UPDATABLE), updated_at=now)
                if expected_states and expected_states[0] is not None:
                    self._update_one(connection, uuid, values, expected_states[0])
                    continue
                unconditional.setdefault(tuple(sorted(values)), []).append(
                    {f"new_{column}": value for column, value in values.items()} | {"match_uuid": uuid})
            for columns, rows in unconditional.items():
                connection.execute(
                    sa.update(instances).where(instances.c.uuid == sa.bindparam("match_uuid"))
                    .values({column: sa.bindparam(f"new_{column}") for column in columns}),
                    rows,
                )

    @_retry
    def list_instances(self, host=None, states=None, include_deleted=False, limit=None, updated_before=None,
                       uuids=None, name=None):
        """Instances, newest first.

        ``states`` (one or several) filters by state; without it DELETED
        instances are left out unless ``include_deleted``. ``updated_before``
        keeps those not updated since that time; ``uuids`` those it names;
        ``name`` those of that display_name.
        """
        statement = sa.select(instances).order_by(instances.c.created_at.desc(), instances.c.id.desc())
        if uuids is not None:
            statement = statement.where(instances.c.uuid.in_(list(uuids)))
        if name is not None:
            statement = statement.where(instances.c.display_name == name)
        if updated_before is not None:
            statement = statement.where(instances.c.updated_at <= to_db_time(updated_before))
        if host is not None:
            statement = statement.where(instances.c.host == host)
        states = _states(states)
        if states is not None:
            statement = statement.where(instances.c.state.in_(states))
        elif not include_deleted:
            statement = statement.where(instances.c.state != models.DELETED)
        if limit is not None:
            statement = statement.limit(limit)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def count_instances_on_hosts(self, hosts):
        """``{host: instances not DELETED}`` for those of ``hosts`` that hold any."""
        statement = (
            sa.select(instances.c.host, sa.func.count())
            .where(instances.c.host.in_(list(hosts)), instances.c.state != models.DELETED)
            .group_by(instances.c.host)
        )
        with self._transaction() as connection:
            return {host: count for host, count in connection.execute(statement)}

    @_retry
    def count_instances_by_state(self):
        """``{state: count}`` over every known state (zero included)."""
        statement = sa.select(instances.c.state, sa.func.count()).group_by(instances.c.state)
        counts = dict.fromkeys(models.INSTANCE_STATES, 0)
        with self._transaction() as connection:
            for state, count in connection.execute(statement):
                counts[state] = count
        return counts

    # -- compute nodes and services --------------------------------------

    def _upsert(self, connection, table, rows, keys):
        """Insert ``rows`` (same keys each) or update the row with the same ``keys``."""
        update_columns = [c for c in rows[0] if c not in keys and c not in ("id", "created_at")]
        dialect = connection.dialect.name
        if dialect in ("postgresql", "sqlite"):
            if dialect == "postgresql":
                from sqlalchemy.dialects.postgresql import insert
            else:
                from sqlalchemy.dialects.sqlite import insert
            statement = insert(table)
            statement = statement.on_conflict_do_update(
                index_elements=list(keys),
                set_={c: statement.excluded[c] for c in update_columns},
            )
            connection.execute(statement, rows)
        elif dialect in ("mysql", "mariadb"):
            from sqlalchemy.dialects.mysql import insert

            statement = insert(table)
            statement = statement.on_duplicate_key_update({c: statement.inserted[c] for c in update_columns})
            connection.execute(statement, rows)
        else:  # any other backend: look, then update or insert
            for row in rows:
                where = [table.c[k] == row[k] for k in keys]
                found = connection.execute(sa.select(table.c.id).where(*where)).first()
                if found is None:
                    connection.execute(table.insert(), [row])
                else:
                    values = {c: row[c] for c in update_columns}
                    connection.execute(sa.update(table).where(*where).values(values))

    @_retry
    def save_compute_nodes(self, records):
        """Store each host's last report: one row per host, in one transaction.

        Keys that are not columns go into ``stats``, beside the entries of the
        report's own ``stats`` dict; columns the report lacks get their default.
        """
        now = self.now()
        rows = {}
        for record in records:
            if not record.get("host"):
                raise ValueError("a compute node report needs a host")
            stats = dict(record.get("stats") or {})
            row = dict(_NODE_DEFAULTS)
            del row["id"]
            for key, value in record.items():
                if key in _NODE_COLUMNS:
                    row[key] = to_db_time(value) if key in _NODE_TIMES else value
                elif key not in ("stats", "id", "updated_at"):
                    stats[key] = value
            row["stats"] = stats
            row["updated_at"] = now
            rows[row["host"]] = row  # the last report of a host wins
        if not rows:
            return
        with self._transaction(write=True) as connection:
            # In host order, as every scheduler saves them: no deadlock between two savers.
            self._upsert(connection, compute_nodes, [rows[h] for h in sorted(rows)], ("host",))

    @_retry
    def list_compute_nodes(self):
        statement = sa.select(compute_nodes).order_by(compute_nodes.c.host)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def service_heartbeat(self, host, binary, topic, at=None, version=None):
        """Record that ``binary`` (Berth ``version``) on ``host`` was alive at ``at`` (default now)."""
        now = self.now()
        row = {
            "host": host,
            "binary": binary,
            "topic": topic,
            "last_seen_at": to_db_time(at) or now,
            "created_at": now,
            "version": version,
        }
        with self._transaction(write=True) as connection:
            self._upsert(connection, services, [row], ("host", "binary"))

    @_retry
    def list_services(self, binary=None):
        statement = sa.select(services).order_by(services.c.binary, services.c.host)
        if binary is not None:
            statement = statement.where(services.c.binary == binary)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def set_service_disabled(self, host, binary, topic, disabled, reason=None):
        """Disable ``binary`` on ``host`` (with ``reason``), or enable it again."""
        row = {"host": host, "binary": binary, "topic": topic, "disabled": bool(disabled),
               "disabled_reason": reason if disabled else None, "created_at": self.now()}
        with self._transaction(write=True) as connection:
            self._upsert(connection, services, [row], ("host", "binary"))

    @_retry
    def delete_compute_host(self, host, binary):
        """Forget compute host ``host``: its last report, the service row of its agent
        (``binary``) and its aggregate memberships. Raises Conflict, deleting nothing, while
        instances that are not DELETED are on it."""
        with self._transaction(write=True) as connection:
            # First, so that a scheduler placing on the host now either committed already (its
            # instance is counted below) or finds the generation moved and tries again.
            connection.execute(sa.update(host_generations).where(host_generations.c.host == host)
                               .values(generation=host_generations.c.generation + 1))
            live = connection.execute(
                sa.select(sa.func.count()).select_from(instances)
                .where(instances.c.host == host, instances.c.state != models.DELETED)).scalar()
            if live:
                raise Conflict(f"host {host} holds {live} instance(s) that are not DELETED: delete "
                               "them first (berth instances --host shows them)")
            connection.execute(sa.delete(compute_nodes).where(compute_nodes.c.host == host))
            connection.execute(sa.delete(services).where(services.c.host == host,
                                                         services.c.binary == binary))
            left = connection.execute(sa.delete(aggregate_hosts).where(aggregate_hosts.c.host == host))
            return {"aggregates_left": left.rowcount}

    # -- host aggregates ----------------------------------------------------
    # Callers (scheduler.admin) check names and values first; these raise
    # NotFound / Conflict for what only the database can tell.

    def _aggregate_id(self, connection, name):
        found = connection.execute(sa.select(aggregates.c.id).where(aggregates.c.name == name)).first()
        if found is None:
            raise NotFound(f"no aggregate named {name!r}")
        return found[0]

    @_retry
    def list_aggregates(self):
        """[{name, availability_zone, metadata, hosts}], by name."""
        with self._transaction() as connection:
            rows = connection.execute(sa.select(aggregates).order_by(aggregates.c.name)).mappings().all()
            hosts = {}
            for aggregate_id, host in connection.execute(
                sa.select(aggregate_hosts.c.aggregate_id, aggregate_hosts.c.host)
                .order_by(aggregate_hosts.c.host)
            ):
                hosts.setdefault(aggregate_id, []).append(host)
        return [
            {
                "name": row["name"],
                "availability_zone": row["availability_zone"],
                "metadata": dict(row["metadata"] or {}),
                "hosts": hosts.get(row["id"], []),
                "created_at": to_iso(row["created_at"]),
                "updated_at": to_iso(row["updated_at"]),
            }
            for row in rows
        ]

    def get_aggregate(self, name):
        for aggregate in self.list_aggregates():
            if aggregate["name"] == name:
                return aggregate
        raise NotFound(f"no aggregate named {name!r}")

    @_retry
    def create_aggregate(self, name, availability_zone=None, metadata=None):
        now = self.now()
        try:
            with self._transaction(write=True) as connection:
                connection.execute(aggregates.insert(), [{
                    "name": name, "availability_zone": availability_zone,
                    "metadata": dict(metadata or {}), "created_at": now, "updated_at": now,
                }])
        except sa_exc.IntegrityError:
            raise Conflict(f"an aggregate named {name!r} exists already") from None
        return self.get_aggregate(name)

    @_retry
    def delete_aggregate(self, name):
        """Delete an aggregate holding no host; Conflict names the hosts it still holds."""
        with self._transaction(write=True) as connection:
            aggregate_id = self._aggregate_id(connection, name)
            hosts = connection.execute(
                sa.select(aggregate_hosts.c.host).where(aggregate_hosts.c.aggregate_id == aggregate_id)
                .order_by(aggregate_hosts.c.host)
            ).scalars().all()
            if hosts:
                shown = ", ".join(hosts[:10]) + (f" and {len(hosts) - 10} more" if len(hosts) > 10 else "")
                raise Conflict(f"aggregate {name!r} still holds host(s) {shown}: remove them first "
                               f"(berth aggregate remove-host {name} HOST)")
            connection.execute(sa.delete(aggregates).where(aggregates.c.id == aggregate_id))

    @_retry
    def add_aggregate_host(self, name, host):
        try:
            with self._transaction(write=True) as connection:
                aggregate_id = self._aggregate_id(connection, name)
                connection.execute(aggregate_hosts.insert(), [{"aggregate_id": aggregate_id, "host": host}])
                connection.execute(
                    sa.update(aggregates).where(aggregates.c.id == aggregate_id).values(updated_at=self.now())
                )
        except sa_exc.IntegrityError:
            raise Conflict(f"host {host!r} is in aggregate {name!r} already") from None
        return self.get_aggregate(name)

    @_retry
    def remove_aggregate_host(self, name, host):
        with self._transaction(write=True) as connection:
            aggregate_id = self._aggregate_id(connection, name)
            removed = connection.execute(
                sa.delete(aggregate_hosts).where(
                    aggregate_hosts.c.aggregate_id == aggregate_id, aggregate_hosts.c.host == host
                )
            ).rowcount
            if not removed:
                raise NotFound(f"host {host!r} is not in aggregate {name!r}")
            connection.execute(
                sa.update(aggregates).where(aggregates.c.id == aggregate_id).values(updated_at=self.now())
            )
        return self.get_aggregate(name)

    @_retry
    def update_aggregate(self, name, metadata=None, availability_zone=None, set_zone=False):
        """Merge ``metadata`` into the aggregate's (a None value removes the key); set its zone."""
        with self._transaction(write=True) as connection:
            row = connection.execute(
                sa.select(aggregates).where(aggregates.c.name == name)
            ).mappings().first()
            if row is None:
                raise NotFound(f"no aggregate named {name!r}")
            merged = dict(row["metadata"] or {})
            for key, value in (metadata or {}).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            values = {"metadata": merged, "updated_at": self.now()}
            if set_zone:
                values["availability_zone"] = availability_zone
            connection.execute(sa.update(aggregates).where(aggregates.c.id == row["id"]).values(values))
        return self.get_aggregate(name)

    # -- server groups ------------------------------------------------------

    @_retry
    def create_server_group(self, uuid, name, policy, rules=None, project_id=None):
        with self._transaction(write=True) as connection:
            connection.execute(server_groups.insert(), [{
                "uuid": uuid, "name": name, "policy": policy, "rules": dict(rules or {}),
                "project_id": project_id, "created_at": self.now(),
            }])
        return self.get_server_group(uuid)

    @_retry
    def list_server_groups(self, name=None, live_members=False):
        """[{uuid, name, policy, rules, project_id, members, created_at}], oldest first; with
        ``name``, the groups of that name. With ``live_members``, members whose instance is
        DELETED are left out."""
        statement = sa.select(server_groups).order_by(server_groups.c.created_at, server_groups.c.id)
        if name is not None:
            statement = statement.where(server_groups.c.name == name)
        with self._transaction() as connection:
            rows = connection.execute(statement).mappings().all()
            members = {}
            query = _members_query(live_members)
            if name is not None:
                query = query.where(server_group_members.c.group_id.in_([row["id"] for row in rows]))
            for group_id, instance_uuid in connection.execute(query):
                members.setdefault(group_id, []).append(instance_uuid)
        return [_group_dict(row, members.get(row["id"], [])) for row in rows]

    @_retry
    def get_server_group(self, uuid, live_members=False):
        """The group of ``uuid`` (raises NotFound); ``live_members`` as for list_server_groups."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(server_groups).where(server_groups.c.uuid == uuid)
            ).mappings().first()
            if row is None:
                raise NotFound(f"no server group {uuid}")
            query = _members_query(live_members).where(server_group_members.c.group_id == row["id"])
            members = [instance_uuid for _, instance_uuid in connection.execute(query)]
        return _group_dict(row, members)

    @_retry
    def delete_server_group(self, uuid):
        with self._transaction(write=True) as connection:
            found = connection.execute(_group_id(uuid)).first()
            if found is None:
                raise NotFound(f"no server group {uuid}")
            members = server_group_members
            connection.execute(sa.delete(members).where(members.c.group_id == found[0]))
            connection.execute(sa.delete(server_groups).where(server_groups.c.id == found[0]))

    @_retry
    def add_server_group_members(self, uuid, instance_uuids):
        """Add instances to the group; those already in it are left alone, whoever
        added them, even in a transaction not yet committed (no unique violation)."""
        with self._transaction(write=True) as connection:
            found = connection.execute(_group_id(uuid)).first()
            if found is None:
                raise NotFound(f"no server group {uuid}")
            rows = [{"group_id": found[0], "instance_uuid": u} for u in dict.fromkeys(instance_uuids)]
            if not rows:
                return
            dialect = connection.dialect.name
            if dialect in ("postgresql", "sqlite"):
                dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
                connection.execute(dialect_insert(server_group_members).on_conflict_do_nothing(), rows)
            else:
                connection.execute(sa.insert(server_group_members).prefix_with("IGNORE"), rows)

    @_retry
    def instances_to_reconcile(self, hosts, uuids):
        """{uuid: {state, host, updated_at}} of the instances named in ``uuids`` and of those
        ACTIVE or DELETING on any of ``hosts``; updated_at a naive UTC datetime."""
        columns = (instances.c.uuid, instances.c.state, instances.c.host, instances.c.updated_at)
        found = {}
        with self._transaction() as connection:
            for chunk in _chunks(sorted(set(uuids))):
                query = sa.select(*columns).where(instances.c.uuid.in_(chunk))
                for row in connection.execute(query).mappings():
                    found[row["uuid"]] = dict(row)
            for chunk in _chunks(sorted(set(hosts))):
                query = sa.select(*columns).where(instances.c.host.in_(chunk),
                                                  instances.c.state.in_([models.ACTIVE, models.DELETING]))
                for row in connection.execute(query).mappings():
                    found[row["uuid"]] = dict(row)
        return found

    @_retry
    def hosts_of_instances(self, uuids):
        """{uuid: host} of the instances of ``uuids`` that are on a host and not deleted or failed."""
        found = {}
        with self._transaction() as connection:
            for chunk in _chunks(uuids):
                statement = sa.select(instances.c.uuid, instances.c.host).where(
                    instances.c.uuid.in_(chunk),
                    instances.c.host.is_not(None),
                    instances.c.state.not_in([models.DELETED, models.ERROR]),
                )
                found.update(connection.execute(statement).all())
        return found


def _group_id(uuid):
    return sa.select(server_groups.c.id).where(server_groups.c.uuid == uuid)


def _members_query(live):
    """(group_id, instance_uuid) of every member, in the order they joined; with ``live``, not
    those whose instance is DELETED (a member whose row is not written yet stays)."""
    members = server_group_members
    query = sa.select(members.c.group_id, members.c.instance_uuid).order_by(members.c.id)
    if live:
        query = query.outerjoin(instances, instances.c.uuid == members.c.instance_uuid).where(
            sa.or_(instances.c.state.is_(None), instances.c.state != models.DELETED))
    return query


def _group_dict(row, members):
    return {
        "uuid": row["uuid"],
        "name": row["name"],
        "policy": row["policy"],
        "rules": dict(row["rules"] or {}),
        "project_id": row["project_id"],
        "members": members,
        "created_at": to_iso(row["created_at"]),
    }
