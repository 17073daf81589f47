"""Connections lost and made again: one line per outage, naming the server reached, and the
failures a failover raises taken as worth another attempt."""

import logging
import sqlite3

import pytest
from sqlalchemy import exc as sa_exc

from scheduler.db import api as db_api
from scheduler.db.reconnects import Reconnects

URL = "postgresql+psycopg2://berth:***@/berth?host=db1:5432&host=db2:5432"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def watched(caplog):
    caplog.set_level(logging.INFO, "scheduler.db.reconnects")
    return Reconnects(URL, clock=Clock())


def lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "scheduler.db.reconnects"]


def test_the_first_connection_says_where_and_the_next_ones_nothing(watched, caplog):
    watched.reached("db1:5432")
    watched.confirmed()
    watched.reached("db1:5432")
    watched.confirmed()
    assert lines(caplog) == [f"Database {URL}: connected to db1:5432"]


def test_one_line_per_outage_names_the_server_that_took_the_writes(watched, caplog):
    connected_at = watched.reached("db1:5432")
    caplog.clear()
    watched._clock.now += 5
    watched.lost("OperationalError: server closed the connection unexpectedly", connected_at)
    for _ in range(20):  # every query and every retry of the outage
        watched._clock.now += 0.1
        watched.lost("OperationalError: connection refused")
    # A standby answers before its promotion, and refuses the write: the outage goes on.
    standby_at = watched.reached("db2:5432")
    watched.lost("InternalError: cannot execute INSERT in a read-only transaction", standby_at)
    watched._clock.now += 1.5
    watched.reached("db2:5432")
    watched._clock.now += 0.2
    watched.confirmed()
    watched.confirmed()  # the next transactions
    # The outage's connections made before the reconnect fail in turn: no new outage.
    watched.lost("OperationalError: server closed the connection unexpectedly", connected_at)
    watched.lost("InternalError: cannot execute INSERT in a read-only transaction", standby_at)
    watched.reached("db2:5432")
    watched.confirmed()
    assert lines(caplog) == [
        f"Database {URL}: connected to db2:5432 (it was db1:5432) after 3.5 s without a working connection "
        "(first failure: OperationalError: server closed the connection unexpectedly)"]
    assert watched.lost_since is None and watched.server == "db2:5432"

    caplog.clear()
    new_at = watched._clock.now
    watched._clock.now += 1
    watched.lost("OperationalError: terminating connection due to administrator command", new_at)
    watched._clock.now += 1
    watched.reached("db2:5432")
    watched.confirmed()
    assert lines(caplog) == [
        f"Database {URL}: connected to db2:5432 after 1.0 s without a working connection "
        "(first failure: OperationalError: terminating connection due to administrator command)"]


def test_a_database_away_at_start_says_only_when_it_is_reached(watched, caplog):
    watched.lost("OperationalError: connection refused")
    watched._clock.now += 4
    watched.reached("db1:5432")
    watched.confirmed()
    assert lines(caplog) == [
        f"Database {URL}: connected to db1:5432 after 4.0 s without a working connection "
        "(first failure: OperationalError: connection refused)"]


class PgError(Exception):
    def __init__(self, message, pgcode=None):
        super().__init__(message)
        self.pgcode = pgcode


PgError.__module__ = "psycopg2.errors"


@pytest.mark.parametrize("orig, transient", [
    (PgError("cannot execute INSERT in a read-only transaction", "25006"), True),
    (PgError("terminating connection due to administrator command", "57P01"), True),
    (PgError('connection to server at "db2", port 5432 failed: session is read-only'), True),
    (PgError('connection to server at "db1" failed: FATAL: password authentication failed'), False),
    (PgError('duplicate key value violates unique constraint "instances_pkey"', "23505"), False),
    (sqlite3.OperationalError("no such table: x"), False),
])
def test_what_a_failover_raises_is_transient(orig, transient):
    assert db_api.is_transient(sa_exc.OperationalError("INSERT", {}, orig)) is transient
