"""The engine under every query: connecting, transactions, retries and times.

Timestamps are stored as naive UTC datetimes and returned as ISO-8601
strings ending in "Z" (they travel over JSON RPC); they are accepted as
datetimes (naive means UTC), ISO-8601 strings or POSIX timestamps.

Every public method is one transaction. Transient failures (connection lost
or refused, a write refused by a standby, deadlock, serialization failure, SQLite busy) are retried
``max_retries`` times (-1: for ever) ``retry_interval`` seconds apart, and
then raise :class:`DatabaseUnavailable`; other errors raise at once.
"""

import contextlib
import functools
import importlib.util
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, ParamSpec, Self, TypeAlias, TypeVar, overload

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL

from scheduler.db import fastpaths, schema, urls
from scheduler.db.reconnects import READ_ONLY, Reconnects
from scheduler.telemetry import connection_metrics
from scheduler.utils import jsonutils
from scheduler.utils.log_once import LogOnce

LOG = logging.getLogger(__name__)
#: A database away fails every query: a line a minute for each kind, not one per attempt.
_RETRY_LOGS = LogOnce(LOG)

#: What a time may be given as: a datetime (naive means UTC), an ISO-8601 string or a POSIX time.
TimeValue: TypeAlias = datetime | str | int | float

_P = ParamSpec("_P")
_R = TypeVar("_R")
_E = TypeVar("_E", bound="DatabaseEngine")

SQLITE_BUSY_TIMEOUT = 30.0  # seconds SQLite waits for another writer

# PostgreSQL SQLSTATEs worth a retry: serialization failure, deadlock, disk full, too many
# connections, admin/crash shutdown, cannot connect now, a write sent to a standby (a
# failover under way); and class 08 (connection).
_PG_TRANSIENT = {"40001", "40P01", "53100", "53300", "57P01", "57P02", "57P03", READ_ONLY}
# Connection failures without a SQLSTATE that no retry will fix.
_PG_PERMANENT_TEXT = (
    "authentication failed",
    "does not exist",
    "no password supplied",
    "no pg_hba.conf entry",
    "invalid dsn",
    "invalid connection option",
)
# MySQL/MariaDB error numbers worth a retry: lock wait timeout, deadlock, disk full, too
# many connections, server shutdown, can't connect, gone away, lost connection,
# connection killed, disconnected for inactivity.
_MYSQL_TRANSIENT = {1205, 1213, 1021, 1040, 1053, 2002, 2003, 2006, 2013, 2055, 1927, 4031}
# SQLite's words for a failure that passes: another writer (locked, busy), or a full disk.
_SQLITE_TRANSIENT = ("locked", "busy", "disk is full")


class DatabaseUnavailable(Exception):
    """The database stayed unreachable (or locked) through every retry."""


class NotFound(LookupError):
    """No aggregate or server group of that name or uuid."""


class Conflict(ValueError):
    """The name (or host membership) exists already."""


def utcnow() -> datetime:
    """This machine's clock, naive UTC (Database.now() is the one to time records by)."""
    return datetime.now(UTC).replace(tzinfo=None)


@overload
def to_db_time(value: None) -> None: ...
@overload
def to_db_time(value: TimeValue) -> datetime: ...
def to_db_time(value: TimeValue | None) -> datetime | None:
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


@overload
def to_iso(value: None) -> None: ...
@overload
def to_iso(value: datetime) -> str: ...
def to_iso(value: datetime | None) -> str | None:
    """The API's form of a stored naive UTC datetime: '2024-01-02T03:04:05.000006Z'."""
    if value is None:
        return None
    return value.isoformat(timespec="microseconds") + "Z"


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0] if text else ''}".rstrip(": ")


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or a serialization failure: the transaction lost a
    race and can be run again at once (a transient failure that needs no waiting)."""
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    orig = exc.orig
    sqlstate = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if sqlstate:
        return sqlstate in ("40001", "40P01")
    args: tuple[Any, ...] = getattr(orig, "args", ())
    return bool(args) and args[0] in (1213, 1205)  # MySQL deadlock, lock wait timeout


def is_transient(exc: BaseException) -> bool:
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
        return any(word in text for word in _SQLITE_TRANSIENT)
    sqlstate = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if sqlstate:
        return sqlstate in _PG_TRANSIENT or sqlstate.startswith("08")
    module = type(orig).__module__ or ""
    if module.startswith("psycopg"):
        # Connection failures carry no SQLSTATE: refused, timed out, reset...
        text = str(orig).lower()
        return isinstance(exc, sa_exc.OperationalError) and not any(t in text for t in _PG_PERMANENT_TEXT)
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0] in _MYSQL_TRANSIENT
    return False


def _count_connection(_dbapi_connection: Any, _record: Any) -> None:
    connection_metrics.DATABASE_CONNECTIONS.inc()


def _retry(method: Callable[Concatenate[_E, _P], _R]) -> Callable[Concatenate[_E, _P], _R]:
    """Run ``method`` again on transient failures, per the Database's retry settings."""

    @functools.wraps(method)
    def wrapper(self: _E, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if getattr(self._work, "stack", None) is not None:
            # Inside a unit of work the transaction is the caller's: it is
            # retried whole (its messages are redelivered), not statement by statement.
            return method(self, *args, **kwargs)
        failures = 0
        while True:
            try:
                result = method(self, *args, **kwargs)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                failures += 1
                connection_metrics.DATABASE_RETRIES.inc()
                reason = self.scrub(_first_line(exc))
                if 0 <= self.max_retries < failures:
                    raise DatabaseUnavailable(
                        f"database {self.masked_url} unavailable after {failures} attempt(s): {reason}"
                    ) from exc
                _RETRY_LOGS.log(
                    method.__name__, logging.WARNING, "Database %s: %s failed (%s); retry %d of %s in %.1fs",
                    self.masked_url,
                    method.__name__,
                    reason,
                    failures,
                    "unlimited" if self.max_retries < 0 else self.max_retries,
                    self.retry_interval,
                )
                time.sleep(self.retry_interval)
            else:
                self.reconnects.confirmed()
                return result

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


def _installed_driver(url: URL) -> URL:
    choices = _FALLBACK_DRIVERS.get(url.drivername)
    if not choices:
        return url
    for module, driver in choices:
        if importlib.util.find_spec(module) is not None:
            return url.set(drivername=f"{url.drivername}+{driver}")
    return url


def _sqlite_wal(cursor: sqlite3.Cursor) -> None:
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



class DatabaseEngine:
    """An engine, its transactions, the clock and the schema: what every family of
    queries (scheduler.db.api.Database is made of them) builds on.

    ``fast_paths`` (the option ``[database] sqlalchemy_fast_paths``; None: its
    default) lets queries take the dialect fast paths of :mod:`scheduler.db.fastpaths`
    where the installed SQLAlchemy has what they need.
    """

    def __init__(self, url: str | URL, max_retries: int = 10, retry_interval: float = 1.0, echo: bool = False,
                 fast_paths: bool | None = None) -> None:
        self.url = _installed_driver(urls.parse(url))
        self.masked_url = urls.masked(self.url)
        self.max_retries = max_retries
        self.retry_interval = retry_interval
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.fast_paths = fastpaths.usable(fast_paths, self.url.get_backend_name())
        self._clock_offset = timedelta(0)
        self._work = threading.local()  # the unit of work open on each thread, if any
        kwargs: dict[str, Any] = {
            "echo": echo, "json_serializer": jsonutils.dumps, "json_deserializer": jsonutils.loads,
        }
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
        event.listen(self.engine, "connect", _count_connection)
        self.reconnects = Reconnects(self.masked_url)
        if not self.is_sqlite:
            self.reconnects.watch(self.engine, is_transient, lambda exc: self.scrub(_first_line(exc)))

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Self:
        """A Database from the ``[database]`` options of ``conf``."""
        db = conf.database
        return cls(
            db.connection,
            max_retries=db.max_retries,
            retry_interval=db.retry_interval,
            echo=db.connection_debug,
            fast_paths=db.sqlalchemy_fast_paths,
        )

    def __repr__(self) -> str:
        return f"<Database {self.masked_url}>"

    # -- plumbing ---------------------------------------------------------

    def _sqlite_in_memory(self) -> bool:
        database = self.url.database
        return not database or database == ":memory:" or "mode=memory" in str(self.url.query)

    def _make_sqlite_dir(self) -> None:
        database = self.url.database
        if database is None or database.startswith("file:"):
            return
        parent = os.path.dirname(os.path.abspath(database))
        os.makedirs(parent, exist_ok=True)

    def _setup_sqlite(self) -> None:
        in_memory = self._sqlite_in_memory()

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
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
        def _on_begin(connection: sa.Connection) -> None:
            # A writer takes the write lock up front: no deadlock between two
            # readers that both want to write, and the busy timeout applies.
            immediate = connection.get_execution_options().get("berth_write")
            connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    # -- the clock ----------------------------------------------------------

    def now(self) -> datetime:
        """The database's time, naive UTC: what every record is timed by, so that
        processes on machines whose clocks disagree compare the same times."""
        return utcnow() + self._clock_offset

    @property
    def clock_offset(self) -> float:
        """Seconds the database's clock is ahead of this machine's (as last measured)."""
        return self._clock_offset.total_seconds()

    @_retry
    def sync_clock(self) -> float:
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
            remote = float(connection.exec_driver_sql(query).scalar_one())
            after = time.time()
        offset = remote - (before + after) / 2
        self._clock_offset = timedelta(seconds=offset)
        return offset

    def scrub(self, text: str) -> str:
        """``text`` with the database password, if it appears, replaced by ***."""
        password = urls.password(self.url)
        return text.replace(password, "***") if password else text

    @contextlib.contextmanager
    def _transaction(self, write: bool = False) -> Iterator[sa.Connection]:
        if getattr(self._work, "stack", None) is not None:
            yield self._work_connection()
            return
        with self.engine.connect() as connection:
            if write:
                connection.execution_options(berth_write=True)
            with connection.begin():
                yield connection

    # -- schema -----------------------------------------------------------

    @_retry
    def sync(self) -> str | None:
        """Upgrade the schema to its newest version; return the revision reached.

        Safe to call at every start, and from several processes at once.
        """
        return schema.upgrade(self.engine)

    @_retry
    def version(self) -> str | None:
        """The schema's alembic revision, or None for an empty database."""
        with self.engine.connect() as connection:
            return schema.current(connection)

    def dispose(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def unit_of_work(self) -> Iterator[Self]:
        """One transaction for everything this thread does with the database until exit.

        Commits when the block ends, rolls everything back if it raises.
        ``step()`` marks out a part that can fail alone (a savepoint). The connection is taken,
        and the transaction begun, by the first statement: a block that runs none (a batch of
        agents' reports alone) costs the database nothing, not even a check of the connection.
        """
        if getattr(self._work, "stack", None) is not None:
            raise RuntimeError("a unit of work is already open on this thread")
        self._work.connection = None
        try:
            with contextlib.ExitStack() as stack:
                self._work.stack = stack
                try:
                    yield self
                finally:
                    self._work.stack = None
            connected = self._work.connection is not None
        finally:
            self._work.connection = None
        if connected:
            self.reconnects.confirmed()

    def _work_connection(self) -> sa.Connection:
        """The connection of the unit of work open on this thread, its transaction begun."""
        connection = self._work.connection
        if connection is None:
            connection = self._work.stack.enter_context(self.engine.connect())
            connection.execution_options(berth_write=True)
            self._work.stack.enter_context(connection.begin())
            self._work.connection = connection
        return connection

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Inside a unit of work: undo only this block's writes if it raises."""
        if getattr(self._work, "stack", None) is None:
            yield
            return
        with self._work_connection().begin_nested():
            yield
