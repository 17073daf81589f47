"""The instances table: creating, reading and updating instance records."""

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, TypeAlias

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from scheduler import states as instance_states
from scheduler.db import fastpaths
from scheduler.db.engine import DatabaseEngine, TimeValue, _retry, to_db_time
from scheduler.db.models import instances
from scheduler.db.rows import _checked_values, _chunks, _column_defaults, _row_dict, _time_columns

_INSTANCE_TIMES = _time_columns(instances)
_INSTANCE_WRITABLE = frozenset(instances.c.keys()) - {"id"}
_INSTANCE_UPDATABLE = _INSTANCE_WRITABLE - {"uuid", "created_at"}
_INSTANCE_DEFAULTS = _column_defaults(instances)

#: One state, several, or None (any state).
StateFilter: TypeAlias = str | Iterable[str] | None


def _states(states: StateFilter) -> list[str] | None:
    if states is None:
        return None
    return [states] if isinstance(states, str) else list(states)


def _check_state(state: object) -> None:
    if state not in instance_states.ALL:
        raise ValueError(f"unknown instance state {state!r}")


def _instance_values(values: Mapping[str, Any], allowed: AbstractSet[str]) -> dict[str, Any]:
    out = _checked_values(values, allowed, _INSTANCE_TIMES, "instance")
    if "state" in out:
        _check_state(out["state"])
    return out


class InstanceQueries(DatabaseEngine):
    """The instance records: one row per instance, compared-and-set by state."""

    def _new_instance_row(self, record: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        row = _instance_values(record, _INSTANCE_WRITABLE)
        if not row.get("uuid"):
            raise ValueError("an instance needs a uuid")
        full = {key: _INSTANCE_DEFAULTS[key] for key in _INSTANCE_WRITABLE}
        full.update(row)
        full["created_at"] = full["created_at"] or now
        full["updated_at"] = full["updated_at"] or full["created_at"]
        return full

    @_retry
    def create_instances(self, records: Iterable[Mapping[str, Any]]) -> list[str]:
        """Insert the records whose uuid is not in the table yet; return their uuids.

        Rows already there are left alone, so a redelivered request is harmless.
        """
        now = self.now()
        rows: dict[str, dict[str, Any]] = {}
        for record in records:
            row = self._new_instance_row(record, now)
            rows.setdefault(row["uuid"], row)
        if not rows:
            return []
        with self._transaction(write=True) as connection:
            dialect = connection.dialect.name
            fast_insert = fastpaths.instance_inserter(connection.dialect, self.fast_paths)
            if fast_insert is not None:
                inserted = fast_insert(connection, instances, list(rows.values()))
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
                    existing: set[str] = set()
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
    def get_instance(self, uuid: str) -> dict[str, Any] | None:
        with self._transaction() as connection:
            row = connection.execute(sa.select(instances).where(instances.c.uuid == uuid)).mappings().first()
        return _row_dict(row) if row is not None else None

    @_retry
    def get_instances(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{uuid: instance} of those of ``uuids`` that exist."""
        found: dict[str, dict[str, Any]] = {}
        with self._transaction() as connection:
            for chunk in _chunks(dict.fromkeys(uuids)):
                query = sa.select(instances).where(
                    fastpaths.any_of(connection, instances.c.uuid, chunk, self.fast_paths))
                for row in connection.execute(query).mappings():
                    found[row["uuid"]] = _row_dict(row)
        return found

    @staticmethod
    def _update_one(connection: sa.Connection, uuid: str, values: Mapping[str, Any],
                    expected_states: StateFilter, expected_updated_at: TimeValue | None = None,
                    host: str | None = None) -> bool:
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
    def update_instance(self, uuid: str, values: Mapping[str, Any], expected_states: StateFilter = None,
                        expected_updated_at: TimeValue | None = None) -> dict[str, Any] | None:
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
    def set_instance_states(self, updates: Sequence[tuple[str, str, Mapping[str, Any], StateFilter]]
                            ) -> list[bool]:
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
        runs: list[tuple[dict[str, Any], tuple[str, ...], list[tuple[int, str, str]]]] = []
        for index, (uuid, host, values, expected_states) in enumerate(updates):
            values = dict(_instance_values(values, _INSTANCE_UPDATABLE), updated_at=now)
            states = tuple(_states(expected_states) or ())
            if runs and runs[-1][0] == values and runs[-1][1] == states:
                runs[-1][2].append((index, uuid, host))
            else:
                runs.append((values, states, [(index, uuid, host)]))
        with self._transaction(write=True) as connection:
            if len(updates) > 1 and connection.dialect.name != "sqlite":
                for uuid_chunk in _chunks(sorted({uuid for uuid, *_ in updates})):
                    chosen = fastpaths.any_of(connection, instances.c.uuid, uuid_chunk, self.fast_paths)
                    connection.execute(sa.select(instances.c.id).where(chosen)
                                       .order_by(instances.c.uuid).with_for_update()).all()
            for values, states, members in runs:
                if len(members) == 1 or not connection.dialect.update_returning:
                    for index, uuid, host in members:
                        applied[index] = self._update_one(connection, uuid, values, states or None, host=host)
                    continue
                for chunk in _chunks(members):
                    statement = (
                        sa.update(instances)
                        .where(fastpaths.on_pairs(connection, instances,
                                                  [(uuid, host) for _, uuid, host in chunk], self.fast_paths))
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
    def update_instances_if(self, updates: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]]
                            ) -> set[str]:
        """Compare-and-set on several instances: apply each ``(uuid, values, expected)``
        whose row still holds ``expected`` ({column: value, or a tuple of allowed
        values}); the uuids updated. A row another transaction is changing is
        waited for, and compared as that one left it."""
        now = self.now()
        done: set[str] = set()
        with self._transaction(write=True) as connection:
            for uuid, values, expected in updates:
                values = dict(_instance_values(values, _INSTANCE_UPDATABLE), updated_at=now)
                statement = sa.update(instances).where(instances.c.uuid == uuid).values(values)
                for name, value in expected.items():
                    column = instances.c[name]
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
    def update_instances(self, updates: Iterable[tuple[str, Mapping[str, Any]]
                                                 | tuple[str, Mapping[str, Any], StateFilter]]) -> None:
        """Apply ``(uuid, values[, expected_states])`` updates in one transaction.

        Missing instances, and those not in their expected states, are left
        alone. Updates without expected states that write the same columns go
        in one executemany (pages of statements per round trip on PostgreSQL).
        """
        now = self.now()
        unconditional: dict[tuple[str, ...], list[dict[str, Any]]] = {}  # columns written -> rows
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
    def list_instances(self, host: str | None = None, states: StateFilter = None,
                       include_deleted: bool = False, limit: int | None = None,
                       updated_before: TimeValue | None = None,
                       uuids: Iterable[str] | None = None, name: str | None = None) -> list[dict[str, Any]]:
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
        wanted = _states(states)
        if wanted is not None:
            statement = statement.where(instances.c.state.in_(wanted))
        elif not include_deleted:
            statement = statement.where(instances.c.state != instance_states.DELETED)
        if limit is not None:
            statement = statement.limit(limit)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    @_retry
    def settled_instances_on_hosts(self, hosts: Iterable[str]) -> list[dict[str, Any]]:
        """The instances ACTIVE on one of ``hosts`` and not moving: those a migration may take."""
        found: list[dict[str, Any]] = []
        with self._transaction() as connection:
            for chunk in _chunks(dict.fromkeys(hosts)):
                # not "state = ACTIVE": SQLite would read every ACTIVE instance through the state index
                query = sa.select(instances).where(instances.c.host.in_(chunk),
                                                   instances.c.state != instance_states.DELETED)
                found.extend(_row_dict(row) for row in connection.execute(query).mappings()
                             if row["state"] == instance_states.ACTIVE and row["move_host"] is None)
        return found

    @_retry
    def display_names_starting(self, prefix: str, limit: int = 1000) -> list[str]:
        """The names of instances not DELETED that start with ``prefix`` (at most ``limit``)."""
        statement = (
            sa.select(instances.c.display_name).distinct()
            .where(instances.c.display_name.startswith(prefix, autoescape=True),
                   instances.c.state != instance_states.DELETED)
            .order_by(instances.c.display_name).limit(limit)
        )
        with self._transaction() as connection:
            return list(connection.execute(statement).scalars())

    @_retry
    def count_instances_on_hosts(self, hosts: Iterable[str]) -> dict[str, int]:
        """``{host: instances not DELETED}`` for those of ``hosts`` that hold any."""
        statement = (
            sa.select(instances.c.host, sa.func.count())
            .where(instances.c.host.in_(list(hosts)), instances.c.state != instance_states.DELETED)
            .group_by(instances.c.host)
        )
        with self._transaction() as connection:
            return {host: count for host, count in connection.execute(statement)}

    @_retry
    def count_instances_by_state(self) -> dict[str, int]:
        """``{state: count}`` over every known state (zero included)."""
        statement = sa.select(instances.c.state, sa.func.count()).group_by(instances.c.state)
        counts = dict.fromkeys(instance_states.ALL, 0)
        with self._transaction() as connection:
            for state, count in connection.execute(statement):
                counts[state] = count
        return counts


    @_retry
    def instances_to_reconcile(self, hosts: Iterable[str], uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{uuid: {state, host, move_host, updated_at}} of the instances named in ``uuids`` and of those
        ACTIVE, DELETING, SCHEDULED, SHUTOFF or whose power changes on any of ``hosts``; updated_at a
        naive UTC datetime."""
        columns = (instances.c.uuid, instances.c.state, instances.c.host, instances.c.move_host,
                   instances.c.updated_at)
        found: dict[str, dict[str, Any]] = {}
        with self._transaction() as connection:

            def read(query: sa.Select[Any]) -> None:
                for uuid, state, host, move_host, updated_at in connection.execute(query):
                    found[uuid] = {"uuid": uuid, "state": state, "host": host, "move_host": move_host,
                                   "updated_at": updated_at}

            held = instances.c.state.in_([instance_states.ACTIVE, instance_states.DELETING,
                                          instance_states.SCHEDULED, *instance_states.POWER])
            for chunk in _chunks(sorted(set(hosts))):
                read(sa.select(*columns).where(instances.c.host.in_(chunk), held))
            # Most instances an agent holds were read with its host's: the rest alone, by uuid.
            for chunk in _chunks(sorted(set(uuids).difference(found))):
                read(sa.select(*columns).where(instances.c.uuid.in_(chunk)))
        return found

    @_retry
    def hosts_of_instances(self, uuids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """{uuid: the hosts that hold it} of the instances of ``uuids`` that are on a host and not
        deleted or failed: its host, and while it moves its move_host too."""
        found: dict[str, tuple[str, ...]] = {}
        with self._transaction() as connection:
            for chunk in _chunks(uuids):
                statement = sa.select(instances.c.uuid, instances.c.host, instances.c.move_host).where(
                    instances.c.uuid.in_(chunk),
                    instances.c.host.is_not(None),
                    instances.c.state.not_in([instance_states.DELETED, instance_states.ERROR]),
                )
                for uuid, host, other in connection.execute(statement):
                    found[uuid] = (host,) if other in (None, host) else (host, other)
        return found

