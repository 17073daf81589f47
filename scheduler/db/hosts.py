"""The compute_nodes and services tables: each host's last report and each service's
heartbeat, and forgetting a host."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from scheduler import states
from scheduler.db import fastpaths
from scheduler.db.engine import Conflict, DatabaseEngine, TimeValue, _retry, to_db_time
from scheduler.db.models import aggregate_hosts, compute_nodes, host_generations, instances, services
from scheduler.db.rows import _column_defaults, _row_dict, _time_columns

_NODE_TIMES = _time_columns(compute_nodes)
_NODE_COLUMNS = frozenset(compute_nodes.c.keys()) - {"id", "stats", "updated_at"}
_NODE_DEFAULTS = _column_defaults(compute_nodes)


class HostQueries(DatabaseEngine):
    """Compute nodes (the last report of each host) and services (heartbeats, disabling)."""

    def _upsert(self, connection: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]],
                keys: Sequence[str]) -> None:
        """Insert ``rows`` (same keys each) or update the row with the same ``keys``."""
        fast_upsert = fastpaths.upserter(connection.dialect, self.fast_paths)
        if fast_upsert is not None:
            fast_upsert(connection, table, rows, tuple(keys))
            return
        update_columns = [c for c in rows[0] if c not in keys and c not in ("id", "created_at")]
        dialect = connection.dialect.name
        if dialect in ("postgresql", "sqlite"):
            dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
            statement = dialect_insert(table)
            statement = statement.on_conflict_do_update(
                index_elements=list(keys),
                set_={c: statement.excluded[c] for c in update_columns},
            )
            connection.execute(statement, rows)
        elif dialect in ("mysql", "mariadb"):
            mysql_statement = mysql.insert(table)
            mysql_statement = mysql_statement.on_duplicate_key_update(
                {c: mysql_statement.inserted[c] for c in update_columns})
            connection.execute(mysql_statement, rows)
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
    def save_compute_nodes(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Store each host's last report: one row per host, in one transaction.

        Keys that are not columns go into ``stats``, beside the entries of the
        report's own ``stats`` dict; columns the report lacks get their default.
        """
        now = self.now()
        rows: dict[str, dict[str, Any]] = {}
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
    def list_compute_nodes(self) -> list[dict[str, Any]]:
        statement = sa.select(compute_nodes).order_by(compute_nodes.c.host)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def service_heartbeat(self, host: str, binary: str, topic: str, at: TimeValue | None = None,
                          version: str | None = None) -> None:
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
    def list_services(self, binary: str | None = None) -> list[dict[str, Any]]:
        statement = sa.select(services).order_by(services.c.binary, services.c.host)
        if binary is not None:
            statement = statement.where(services.c.binary == binary)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def set_service_disabled(self, host: str, binary: str, topic: str, disabled: bool,
                             reason: str | None = None) -> None:
        """Disable ``binary`` on ``host`` (with ``reason``), or enable it again."""
        row = {"host": host, "binary": binary, "topic": topic, "disabled": bool(disabled),
               "disabled_reason": reason if disabled else None, "created_at": self.now()}
        with self._transaction(write=True) as connection:
            self._upsert(connection, services, [row], ("host", "binary"))

    @_retry
    def delete_compute_host(self, host: str, binary: str) -> dict[str, int]:
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
                .where(instances.c.host == host, instances.c.state != states.DELETED)).scalar()
            if live:
                raise Conflict(f"host {host} holds {live} instance(s) that are not DELETED: delete "
                               "them first (berth server list --host shows them)")
            connection.execute(sa.delete(compute_nodes).where(compute_nodes.c.host == host))
            connection.execute(sa.delete(services).where(services.c.host == host,
                                                         services.c.binary == binary))
            left = connection.execute(sa.delete(aggregate_hosts).where(aggregate_hosts.c.host == host))
            return {"aggregates_left": left.rowcount}

