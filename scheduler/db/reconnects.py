"""Saying once when the database is reached again after its connections were lost, and which
server answered: after a failover, the one the URL's list led to.

A server that takes no writes (a standby, or a primary demoted since the connection was
made) fails a write with SQLSTATE 25006; its connection is dropped as a lost one, so that the
next attempt connects anew, to the server that takes writes (target_session_attrs=read-write).
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

LOG = logging.getLogger(__name__)

#: PostgreSQL's read_only_sql_transaction: a write sent to a server in recovery.
READ_ONLY = "25006"
_CONNECTED_AT = "berth_connected_at"


def server_of(dbapi_connection: Any) -> str | None:
    """host:port of the server a DBAPI connection reached (psycopg 2 or 3, PyMySQL), if it says."""
    info = getattr(dbapi_connection, "info", None)
    host, port = getattr(info, "host", None), getattr(info, "port", None)
    if host is None:
        host, port = getattr(dbapi_connection, "host", None), getattr(dbapi_connection, "port", None)
    if not isinstance(host, str) or not host:
        return None
    return f"{host}:{port}" if port else host


def sqlstate_of(exc: BaseException | None) -> str | None:
    return getattr(exc, "pgcode", None) or getattr(exc, "sqlstate", None)


class Reconnects:
    """The connection state of one engine: lost since when (and why), the server last reached.

    ``lost()`` marks the connections lost (the first failure of an outage is kept); a
    connection made meanwhile (``reached()``) ends the outage once a transaction on it
    succeeds (``confirmed()``), which logs one line: a standby reached before its promotion
    refuses every write, and ends nothing. A failure of a connection made before the last
    reconnect is the same outage's news, and marks nothing.
    """

    def __init__(self, masked_url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.masked_url = masked_url
        self.server: str | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._connected = False
        self._lost_since: float | None = None
        self._reason = ""
        self._pending: tuple[str | None, float] | None = None  # the last connection made while lost
        self._reached_at = float("-inf")

    @property
    def lost_since(self) -> float | None:
        return self._lost_since

    def lost(self, reason: str, connected_at: float | None = None) -> None:
        with self._lock:
            if connected_at is not None and connected_at < self._reached_at:
                return
            if self._lost_since is None:
                self._lost_since, self._reason = self._clock(), reason

    def reached(self, server: str | None) -> float:
        """A connection was made to ``server``; returns the time it is stamped with."""
        now = self._clock()
        with self._lock:
            first, self._connected = not self._connected, True
            if self._lost_since is not None:
                self._pending = (server, now)
                return now
            self.server = server or self.server
        if first:
            LOG.info("Database %s: connected to %s", self.masked_url, server or "the database")
        return now

    def confirmed(self) -> None:
        """A transaction went through: the end of an outage, if one was under way."""
        if self._lost_since is None or self._pending is None:  # the common case, without the lock
            return
        with self._lock:
            if self._lost_since is None or self._pending is None:
                return
            (server, at), before = self._pending, self.server
            lost_since, reason = self._lost_since, self._reason
            self.server = server or before
            self._lost_since = self._pending = None
            self._reached_at = at
        moved = f" (it was {before})" if before and server and before != server else ""
        LOG.warning("Database %s: connected to %s%s after %.1f s without a working connection "
                    "(first failure: %s)", self.masked_url, server or "the database", moved,
                    at - lost_since, reason)

    def watch(self, engine: sa.Engine, is_lost: Callable[[BaseException], bool],
              describe: Callable[[BaseException], str]) -> None:
        """Follow ``engine``'s connections and failures; ``is_lost(exc)``: whether a failure is
        of the connection (or the server) rather than of the statement."""

        @event.listens_for(engine, "connect")
        def _connected(dbapi_connection: Any, record: Any) -> None:
            record.info[_CONNECTED_AT] = self.reached(server_of(dbapi_connection))

        @event.listens_for(engine, "handle_error")
        def _failed(context: sa.engine.ExceptionContext) -> None:
            original = context.original_exception
            if sqlstate_of(original) == READ_ONLY:
                context.is_disconnect = True  # a standby's connection: reconnect, to the primary
            error = context.sqlalchemy_exception or original
            if not (context.is_disconnect or (context.connection is None and is_lost(error))):
                return
            # Not Connection.connection, which would connect again to answer.
            pooled = context.connection._dbapi_connection if context.connection is not None else None
            connected_at = pooled.info.get(_CONNECTED_AT) if pooled is not None else None
            self.lost(describe(original), connected_at)
