"""Keeping the database bounded: what ``berth-manage db archive`` and ``db purge`` do.

The instances that may go are those DELETED before the cutoff (by their
``deleted_at``) and those in ERROR on no host (requests refused or placed
nowhere) last updated before it, each with its server-group memberships (by
instance uuid; the fault is in the instance's row). Nothing else is ever
touched, whatever its age: an instance in any other state, an ERROR instance
still on a host (its agent may hold it yet: once deleted, it goes as DELETED),
the memberships of every other instance.

:func:`archive` moves them to the shadow tables; :func:`purge` deletes them
from the live tables, and deletes from the shadow tables the archived instances
whose time is before the cutoff, with their memberships.

Batches of at most :data:`BATCH` instances, one transaction each. In a batch
the instances are locked (in uuid order, as the schedulers lock them) and
selected again under the lock, so one a scheduler changed meanwhile (an ERROR
instance deleted, now DELETING) stays; a row is written to a shadow table only
in the transaction that deletes it from the live one, and only if it is deleted.
Times are the database's (naive UTC), as :meth:`Database.now` gives them.
"""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeAlias

import sqlalchemy as sa

from scheduler import states
from scheduler.db import api as db_api
from scheduler.db.engine import DatabaseEngine, TimeValue
from scheduler.db.models import (
    instances,
    server_group_members,
    shadow_instances,
    shadow_server_group_members,
)

BATCH = 500  # instances per transaction

LIVE_TABLES = (instances.name, server_group_members.name)
SHADOW_TABLES = (shadow_instances.name, shadow_server_group_members.name)


#: (instances, memberships) a batch moved or deleted, and the last instance id it looked at.
BatchResult: TypeAlias = tuple[int, int, int | None]


class RowsChanged(RuntimeError):
    """A batch would have moved or deleted other rows than it selected: rolled back."""


def _time(table: sa.Table) -> sa.ColumnElement[Any]:
    """When an instance row became what it is: deleted, or last changed (ERROR)."""
    return sa.func.coalesce(table.c.deleted_at, table.c.updated_at, table.c.created_at)


def eligible(before: datetime) -> sa.ColumnElement[bool]:
    """The condition that a live instance may be archived or purged."""
    return sa.and_(
        sa.or_(
            instances.c.state == states.DELETED,
            sa.and_(instances.c.state == states.ERROR, instances.c.host.is_(None)),
        ),
        _time(instances) < before,
    )


def _shadow_eligible(before: datetime) -> sa.ColumnElement[bool]:
    return _time(shadow_instances) < before


def _next(connection: sa.Connection, table: sa.Table, condition: sa.ColumnElement[bool], after: int,
          limit: int) -> Sequence[sa.Row]:
    """[(id, uuid)] of the next ``limit`` rows of ``table`` meeting ``condition`` past id ``after``."""
    query = (sa.select(table.c.id, table.c.uuid).where(condition, table.c.id > after)
             .order_by(table.c.id).limit(limit))
    return connection.execute(query).all()


def _lock(connection: sa.Connection, found: Sequence[sa.Row], condition: sa.ColumnElement[bool]
          ) -> list[sa.Row]:
    """Those of ``found`` [(id, uuid)] still meeting ``condition``, locked until commit."""
    if not found:
        return []
    query = (sa.select(instances.c.id, instances.c.uuid)
             .where(instances.c.uuid.in_([uuid for _, uuid in found]), condition)
             .order_by(instances.c.uuid).with_for_update())
    return sorted(connection.execute(query).all())


def _count_members(connection: sa.Connection, table: sa.Table, uuids: list[str]) -> int:
    if not uuids:
        return 0
    return connection.execute(sa.select(sa.func.count()).select_from(table)
                              .where(table.c.instance_uuid.in_(uuids))).scalar_one()


def _move(connection: sa.Connection, live: sa.Table, shadow: sa.Table, ids: list[int],
          condition: sa.ColumnElement[bool] | None = None) -> int:
    """Copy the rows ``ids`` of ``live`` into ``shadow`` and delete them; how many.

    A row keeps its id unless the shadow table holds it already (SQLite gives
    the id of a deleted last row to the next row inserted): then it takes the
    next free one, as nothing refers to a shadow row by id.
    """
    if not ids:
        return 0
    where = [live.c.id.in_(ids)] + ([] if condition is None else [condition])
    taken = set(connection.scalars(sa.select(shadow.c.id).where(shadow.c.id.in_(ids))))
    copied = 0
    free = [i for i in ids if i not in taken]
    if free:
        columns = [column.name for column in live.columns]
        query = sa.select(*live.columns).where(live.c.id.in_(free), *where[1:])
        copied += connection.execute(shadow.insert().from_select(columns, query)).rowcount
    if taken:
        next_id = (connection.scalar(sa.select(sa.func.max(shadow.c.id))) or 0) + 1
        rows = connection.execute(sa.select(live).where(live.c.id.in_(sorted(taken)), *where[1:])).mappings()
        for offset, row in enumerate(rows.all()):
            connection.execute(shadow.insert().values(dict(row, id=next_id + offset)))
            copied += 1
    deleted = connection.execute(sa.delete(live).where(*where)).rowcount
    if not copied == deleted == len(ids):
        raise RowsChanged(f"{live.name}: {len(ids)} rows locked, {copied} copied to {shadow.name}, "
                          f"{deleted} deleted; nothing moved")
    return deleted


@db_api._retry
def _archive_batch(database: DatabaseEngine, before: datetime, after: int, limit: int, dry_run: bool
                   ) -> BatchResult:
    """(instances, memberships) moved from the batch of instances past id ``after``, and the
    last id looked at (None when there were none)."""
    condition = eligible(before)
    with database._transaction(write=not dry_run) as connection:
        found = _next(connection, instances, condition, after, limit)
        if not found:
            return 0, 0, None
        if dry_run:
            return len(found), _count_members(connection, server_group_members, [u for _, u in found]), \
                found[-1][0]
        locked = _lock(connection, found, condition)
        uuids = [uuid for _, uuid in locked]
        members = []
        if uuids:
            members = list(connection.scalars(
                sa.select(server_group_members.c.id).where(server_group_members.c.instance_uuid.in_(uuids))
                .order_by(server_group_members.c.id).with_for_update()))
        moved_members = _move(connection, server_group_members, shadow_server_group_members, members)
        moved = _move(connection, instances, shadow_instances, [i for i, _ in locked], condition)
        return moved, moved_members, found[-1][0]


@db_api._retry
def _purge_batch(database: DatabaseEngine, before: datetime, after: int, limit: int, dry_run: bool
                 ) -> BatchResult:
    """As :func:`_archive_batch`, deleting the instances and their memberships."""
    condition = eligible(before)
    with database._transaction(write=not dry_run) as connection:
        found = _next(connection, instances, condition, after, limit)
        if not found:
            return 0, 0, None
        if dry_run:
            return len(found), _count_members(connection, server_group_members, [u for _, u in found]), \
                found[-1][0]
        locked = _lock(connection, found, condition)
        if not locked:
            return 0, 0, found[-1][0]
        members = connection.execute(sa.delete(server_group_members).where(
            server_group_members.c.instance_uuid.in_([uuid for _, uuid in locked]))).rowcount
        ids = [i for i, _ in locked]
        deleted = connection.execute(sa.delete(instances).where(instances.c.id.in_(ids), condition)).rowcount
        if deleted != len(ids):
            raise RowsChanged(f"instances: {len(ids)} rows locked, {deleted} deleted; nothing purged")
        return deleted, members, found[-1][0]


@db_api._retry
def _purge_shadow_batch(database: DatabaseEngine, before: datetime, after: int, limit: int, dry_run: bool
                        ) -> BatchResult:
    """As :func:`_purge_batch`, in the shadow tables (which only this module writes)."""
    condition = _shadow_eligible(before)
    with database._transaction(write=not dry_run) as connection:
        found = _next(connection, shadow_instances, condition, after, limit)
        if not found:
            return 0, 0, None
        uuids = [uuid for _, uuid in found]
        if dry_run:
            return len(found), _count_members(connection, shadow_server_group_members, uuids), found[-1][0]
        members = connection.execute(sa.delete(shadow_server_group_members).where(
            shadow_server_group_members.c.instance_uuid.in_(uuids))).rowcount
        deleted = connection.execute(sa.delete(shadow_instances).where(
            shadow_instances.c.id.in_([i for i, _ in found]), condition)).rowcount
        return deleted, members, found[-1][0]


def _run(batch: Callable[[DatabaseEngine, datetime, int, int, bool], BatchResult], database: DatabaseEngine,
         before: datetime, max_rows: int | None, dry_run: bool) -> tuple[int, int, int]:
    """Run ``batch`` until no instance is left or ``max_rows`` instances went;
    (instances, memberships, last id looked at)."""
    done = members = after = 0
    while max_rows is None or done < max_rows:
        limit = BATCH if max_rows is None else min(BATCH, max_rows - done)
        moved, moved_members, last = batch(database, before, after, limit, dry_run)
        if last is None:
            break
        done, members, after = done + moved, members + moved_members, last
    return done, members, after


@db_api._retry
def _left(database: DatabaseEngine, before: datetime, after: int) -> bool:
    with database._transaction() as connection:
        return bool(_next(connection, instances, eligible(before), after, 1))


def archive(database: DatabaseEngine, before: TimeValue, max_rows: int | None = None, dry_run: bool = False
            ) -> tuple[dict[str, int], bool]:
    """Move the instances that may go (see the module), oldest id first, at most ``max_rows``
    of them, and their memberships to the shadow tables.

    Returns ({table: rows moved, or that would be with ``dry_run``}, whether
    instances that may go are left, ``max_rows`` being reached).
    """
    before = db_api.to_db_time(before)
    done, members, after = _run(_archive_batch, database, before, max_rows, dry_run)
    left = max_rows is not None and done >= max_rows and _left(database, before, after)
    return dict(zip(LIVE_TABLES, (done, members), strict=True)), left


def purge(database: DatabaseEngine, before: TimeValue, dry_run: bool = False) -> dict[str, int]:
    """Delete for good the instances that may go (see the module) and their memberships, and
    the shadow rows of instances whose time is before ``before``; {table: rows deleted, or that
    would be with ``dry_run``}."""
    before = db_api.to_db_time(before)
    live = _run(_purge_batch, database, before, None, dry_run)[:2]
    shadow = _run(_purge_shadow_batch, database, before, None, dry_run)[:2]
    return dict(zip(LIVE_TABLES + SHADOW_TABLES, live + shadow, strict=True))
