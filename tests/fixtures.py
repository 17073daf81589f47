"""A temporary RabbitMQ vhost, a temporary PostgreSQL database, and the plain transport
fixture (every test may ask for it, see tests/conftest.py)."""

import contextlib
import os
import subprocess
import urllib.parse
import uuid

import pytest

from scheduler import rpc

RABBIT_URL = os.environ.get("BERTH_TEST_RABBIT_URL", "rabbit://guest:guest@127.0.0.1:5672/")
PG_ADMIN_DSN = os.environ.get("BERTH_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
PG_URL = os.environ.get("BERTH_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/{db}")


def _fast_paths():
    value = os.environ.get("BERTH_TEST_FAST_PATHS", "on")
    if value not in ("on", "off"):
        raise RuntimeError(f"BERTH_TEST_FAST_PATHS must be on or off, not {value!r}")
    return value == "on"


#: BERTH_TEST_FAST_PATHS=off runs the tests (and the daemons the functional tests start) with
#: [oslo_messaging_rabbit] amqp_fast_paths and [database] sqlalchemy_fast_paths off.
FAST_PATHS = _fast_paths()
#: (group, option) of each fast path switch.
FAST_PATH_OPTIONS = (("oslo_messaging_rabbit", "amqp_fast_paths"), ("database", "sqlalchemy_fast_paths"))


@contextlib.contextmanager
def temporary_vhost(url: str = RABBIT_URL, prefix: str = "berth-test"):
    """A fresh virtual host on ``url``'s broker for its user (guest by default), deleted
    afterwards; yields ``url`` pointing at it. Needs rabbitmqctl.

    Queue names are per vhost, not per exchange: without this, two fleets would
    share the "scheduler" queue and steal each other's messages.
    """
    parts = urllib.parse.urlsplit(url)
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    subprocess.run(["rabbitmqctl", "-q", "add_vhost", name], check=True, capture_output=True)
    try:
        subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", name, parts.username or "guest",
                        ".*", ".*", ".*"], check=True, capture_output=True)
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", name], capture_output=True)


@contextlib.contextmanager
def temporary_database(admin_dsn: str = PG_ADMIN_DSN, url: str = PG_URL, prefix: str = "berth_func",
                       connect_timeout: int | None = None):
    """A fresh PostgreSQL database, dropped afterwards; yields its SQLAlchemy URL
    (``url`` with ``{db}`` filled in). Raises AssertionError when the server is unreachable."""
    import psycopg2  # only here: a bench without it uses SQLite

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    timeout = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
    try:
        admin = psycopg2.connect(admin_dsn, **timeout)
    except psycopg2.OperationalError as exc:
        raise AssertionError(f"PostgreSQL is not reachable ({admin_dsn}): {exc}") from exc
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.format(db=name)
    finally:
        with admin.cursor() as cur:
            # FORCE (PostgreSQL 13): a client that reconnected since is ended too.
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def transport(conf):
    """The transport of the test's ``conf``, cleaned up afterwards."""
    transport = rpc.get_transport(conf)
    yield transport
    transport.cleanup()
