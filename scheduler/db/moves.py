"""The migrations table: one row per move of an instance (resize, migration, live migration,
evacuation), created when the move starts and compared-and-set by status until it ends.

In Berth's code a *migration* is always such a row, a recorded move, as in Nova; the schema's
versions are :mod:`scheduler.db.schema`'s, and a move a rebalance plan proposes is a
``PlannedMove`` (scheduler.moves.rebalance).
"""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import sqlalchemy as sa

from scheduler.db.engine import DatabaseEngine, _retry
from scheduler.db.models import migrations
from scheduler.db.rows import _checked_values, _row_dict, _time_columns
from scheduler.migration_states import (  # noqa: F401 (the table's vocabulary, said where it is kept)
    ACTIVE_STATUSES,
    COMPLETED,
    CONFIRMED,
    ENDED_STATUSES,
    ERROR,
    EVACUATION,
    FINISH,
    FINISHED,
    KINDS,
    LIVE_MIGRATION,
    MIGRATE,
    MIGRATING,
    MIGRATION,
    PREPARE,
    RESIZE,
    REVERTED,
    STATUSES,
    STEPS,
)

#: What the source's driver measured of a live migration (its ``figures``): the time the guest was
#: paused, the time the migration of its memory took, and the memory sent, as qemu's query-migrate
#: says them (downtime, total-time, ram transferred).
FIGURES = ("downtime_ms", "total_ms", "memory_bytes")

_TIMES = _time_columns(migrations)
_WRITABLE = frozenset(migrations.c.keys()) - {"id"}
_UPDATABLE = _WRITABLE - {"instance_uuid", "kind", "created_at"}


def _values(values: Mapping[str, Any], allowed: AbstractSet[str]) -> dict[str, Any]:
    out = _checked_values(values, allowed, _TIMES, "migration")
    if "status" in out and out["status"] not in STATUSES:
        raise ValueError(f"migration status must be one of {', '.join(STATUSES)}, got {out['status']!r}")
    if out.get("step") is not None and out["step"] not in STEPS:
        raise ValueError(f"migration step must be one of {', '.join(STEPS)}, got {out['step']!r}")
    if "kind" in out and out["kind"] not in KINDS:
        raise ValueError(f"migration kind must be one of {', '.join(KINDS)}, got {out['kind']!r}")
    return out


def _row(row: Any, request: bool = False) -> dict[str, Any]:
    """A migration row as answered: without what its agents are told (its request and its
    destination's transfer), unless ``request``."""
    found = _row_dict(row)
    if not request:
        found.pop("request", None)
        found.pop("transfer", None)
    return found


def _expected(status: str | tuple[str, ...] | None) -> tuple[str, ...] | None:
    return (status,) if isinstance(status, str) else status


class MigrationQueries(DatabaseEngine):
    """The moves of instances: created, read, compared-and-set by status, listed newest first."""

    @_retry
    def create_migration(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a migration ({instance_uuid, kind, status (default migrating), source_host,
        dest_host, ...}); the row, with its id. ValueError naming what is wrong, nothing saved."""
        row = _values(record, _WRITABLE)
        if not row.get("instance_uuid"):
            raise ValueError("a migration needs an instance_uuid")
        if "kind" not in row:
            raise ValueError(f"a migration needs a kind: one of {', '.join(KINDS)}")
        row.setdefault("status", MIGRATING)
        now = self.now()
        row["created_at"] = row.get("created_at") or now
        row["updated_at"] = row.get("updated_at") or row["created_at"]
        if row["status"] in ENDED_STATUSES:
            row.setdefault("finished_at", now)
        with self._transaction(write=True) as connection:
            (new_id,) = connection.execute(migrations.insert().values(row)).inserted_primary_key or (None,)
            found = connection.execute(sa.select(migrations).where(migrations.c.id == new_id))
            return _row(found.mappings().one())

    @_retry
    def get_migration(self, migration_id: int, request: bool = False) -> dict[str, Any] | None:
        """The migration, with what its destination is told if ``request``."""
        with self._transaction() as connection:
            row = connection.execute(sa.select(migrations).where(migrations.c.id == migration_id)
                                     ).mappings().first()
        return _row(row, request) if row is not None else None

    @_retry
    def active_migration(self, instance_uuid: str, request: bool = False) -> dict[str, Any] | None:
        """The instance's move under way (migrating, or finished waiting for confirmation), or None;
        with what its destination is told if ``request``."""
        statement = (sa.select(migrations)
                     .where(migrations.c.instance_uuid == instance_uuid,
                            migrations.c.status.in_(ACTIVE_STATUSES))
                     .order_by(migrations.c.created_at.desc(), migrations.c.id.desc()).limit(1))
        with self._transaction() as connection:
            row = connection.execute(statement).mappings().first()
        return _row(row, request) if row is not None else None

    @_retry
    def moves_to_check(self, ids: Iterable[int] = ()) -> dict[int, dict[str, Any]]:
        """{id: migration, with its request} of the moves under way to a destination (migrating),
        and of those of ``ids``, whatever their status: what the reconciler sets against the agents'
        word."""
        wanted = migrations.c.status == MIGRATING
        ids = sorted(set(ids))
        if ids:
            wanted = sa.or_(wanted, migrations.c.id.in_(ids))
        with self._transaction() as connection:
            return {row["id"]: _row(row, True)
                    for row in connection.execute(sa.select(migrations).where(wanted)).mappings()}

    @_retry
    def update_migration(self, migration_id: int, values: Mapping[str, Any],
                         expected_status: str | tuple[str, ...] | None = None,
                         expected_step: str | None = None) -> dict[str, Any] | None:
        """Compare-and-set: update the migration if its status is ``expected_status`` (one, or
        one of a tuple; any when None) and, if given, its step ``expected_step``. The updated
        row (with its request and transfer when a step was expected), or None when it is missing
        or in another status or step. ``updated_at`` is set to now, and ``finished_at`` too
        (unless given) when the new status is one of an ended move."""
        values = _values(values, _UPDATABLE)
        now = self.now()
        values["updated_at"] = now
        if values.get("status") in ENDED_STATUSES:
            values.setdefault("finished_at", now)
        statement = sa.update(migrations).where(migrations.c.id == migration_id).values(values)
        expected = _expected(expected_status)
        if expected is not None:
            statement = statement.where(migrations.c.status.in_(expected))
        if expected_step is not None:
            statement = statement.where(migrations.c.step == expected_step)
        with self._transaction(write=True) as connection:
            if connection.execute(statement).rowcount != 1:
                return None
            row = connection.execute(sa.select(migrations).where(migrations.c.id == migration_id)
                                     ).mappings().one()
        return _row(row, expected_step is not None)

    @_retry
    def list_migrations(self, host: str | None = None, status: str | None = None,
                        instance_uuid: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Migrations, newest first: of ``host`` (its source or its destination), in
        ``status``, of one instance; at most ``limit``."""
        statement = sa.select(migrations).order_by(migrations.c.created_at.desc(), migrations.c.id.desc())
        if host is not None:
            statement = statement.where(sa.or_(migrations.c.source_host == host,
                                               migrations.c.dest_host == host))
        if status is not None:
            statement = statement.where(migrations.c.status == status)
        if instance_uuid is not None:
            statement = statement.where(migrations.c.instance_uuid == instance_uuid)
        if limit is not None:
            statement = statement.limit(limit)
        with self._transaction() as connection:
            return [_row(row) for row in connection.execute(statement).mappings()]
