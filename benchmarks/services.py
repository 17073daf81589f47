"""A temporary RabbitMQ vhost and a temporary PostgreSQL database for a benchmark's run, removed
afterwards. (tests/fixtures.py has its own for the tests: neither imports the other.)"""

import contextlib
import os
import subprocess
import urllib.parse
import uuid

PG_ADMIN_DSN = os.environ.get("BERTH_BENCH_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
PG_URL = os.environ.get("BERTH_BENCH_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/{db}")


@contextlib.contextmanager
def temporary_vhost(url):
    """A fresh virtual host on ``url``'s broker for its user, deleted afterwards; yields ``url``
    pointing at it. Needs rabbitmqctl. (Queue names are per vhost: two runs would otherwise share
    the "scheduler" queue.)"""
    parts = urllib.parse.urlsplit(url)
    name = f"berth-bench-{uuid.uuid4().hex[:10]}"
    subprocess.run(["rabbitmqctl", "-q", "add_vhost", name], check=True, capture_output=True)
    try:
        subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", name, parts.username or "guest",
                        ".*", ".*", ".*"], check=True, capture_output=True)
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", name], capture_output=True)


@contextlib.contextmanager
def temporary_database(admin_dsn=PG_ADMIN_DSN, url=PG_URL, connect_timeout=3):
    """A fresh PostgreSQL database, dropped afterwards; yields its SQLAlchemy URL (``url`` with
    ``{db}`` filled in). Raises RuntimeError naming ``admin_dsn`` when the server is unreachable."""
    import psycopg2  # only here: a run without PostgreSQL uses SQLite

    name = f"berth_bench_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg2.connect(admin_dsn, connect_timeout=connect_timeout)
    except psycopg2.OperationalError as exc:
        raise RuntimeError(f"PostgreSQL is not reachable ({admin_dsn}; set BERTH_BENCH_PG_DSN): "
                           f"{exc}") from exc
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.format(db=name)
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # FORCE: PostgreSQL 13
        admin.close()
