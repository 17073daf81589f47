"""The schema's versions: alembic's scripts (``alembic_scripts/``), driven from code rather than an
alembic.ini. (An instance's move is a *migration* too, as in Nova: that table is scheduler.db.moves.)

:func:`upgrade` serializes concurrent callers (two schedulers starting at
once): a PostgreSQL advisory lock, a MySQL named lock, or a file lock next to
a SQLite database, held for the whole upgrade.
"""

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

LOG = logging.getLogger(__name__)

SCRIPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alembic_scripts")

#: Key of the PostgreSQL advisory lock taken around upgrades ("berthdb" in ASCII).
PG_LOCK_KEY = 0x62657274686462
MYSQL_LOCK_NAME = "berth_db_sync"
LOCK_TIMEOUT = 600  # seconds to wait for another process's upgrade

_memory_lock = threading.Lock()


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An alembic Config for Berth's schema scripts, optionally bound to a connection."""
    config = Config()
    # ConfigParser interpolates '%': escape it in the path.
    config.set_main_option("script_location", SCRIPTS_DIR.replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head() -> str | None:
    """The newest revision this code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current(connection: sa.Connection) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: sa.Engine, revision: str = "head") -> str | None:
    """Upgrade to ``revision`` under a lock; return the revision reached."""
    with _sync_lock(engine) as connection:
        before = current(connection)
        connection.commit()
        command.upgrade(alembic_config(connection), revision)
        after = current(connection)
        connection.commit()
    if before != after:
        LOG.info("Database schema upgraded from %s to %s", before or "nothing", after)
    return after


@contextlib.contextmanager
def _sync_lock(engine: sa.Engine) -> Iterator[sa.Connection]:
    dialect = engine.dialect.name
    with engine.connect() as connection:
        if dialect == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": PG_LOCK_KEY})
            connection.commit()  # the lock belongs to the session, not the transaction
            try:
                yield connection
            finally:
                connection.rollback()
                connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": PG_LOCK_KEY})
                connection.commit()
        elif dialect in ("mysql", "mariadb"):
            _mysql_get_lock(connection)
            try:
                yield connection
            finally:
                connection.rollback()
                connection.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": MYSQL_LOCK_NAME})
                connection.commit()
        elif dialect == "sqlite":
            # Take SQLite's write lock at BEGIN (see scheduler.db.engine), not mid-transaction.
            connection.execution_options(berth_write=True)
            with _sqlite_file_lock(engine.url.database):
                yield connection
        else:
            yield connection


def _mysql_get_lock(connection: sa.Connection) -> None:
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        got = connection.execute(sa.text("SELECT GET_LOCK(:name, 10)"), {"name": MYSQL_LOCK_NAME}).scalar()
        connection.commit()
        if got == 1:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"another process holds the '{MYSQL_LOCK_NAME}' lock")


@contextlib.contextmanager
def _sqlite_file_lock(database: str | None) -> Iterator[None]:
    if not database or database == ":memory:" or database.startswith("file:"):
        with _memory_lock:
            yield
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: SQLite's own locking will have to do
        with _memory_lock:
            yield
        return
    # flock() locks belong to the open file, so this serializes threads too.
    with open(os.path.abspath(database) + ".sync-lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
