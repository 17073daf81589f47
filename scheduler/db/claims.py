"""The host_generations table: the claims schedulers take on hosts before placing."""

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from scheduler import states
from scheduler.db.engine import DatabaseEngine, TimeValue, _retry, to_db_time
from scheduler.db.models import host_generations, instances
from scheduler.db.rows import _chunks, _row_dict


class ClaimQueries(DatabaseEngine):
    """Host generations: a scheduler claims a host by bumping its generation."""

    @_retry
    def host_generations(self, hosts: Iterable[str] | None = None) -> dict[str, int]:
        """{host: generation} for ``hosts`` (0 for a host never claimed), or for every host claimed."""
        if hosts is None:
            with self._transaction() as connection:
                return dict(connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)).all())
        found = dict.fromkeys(hosts, 0)
        with self._transaction() as connection:
            for chunk in _chunks(list(found)):
                for host, generation in connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)
                    .where(host_generations.c.host.in_(chunk))
                ):
                    found[host] = generation
        return found

    @_retry
    def claim_hosts(self, expected: Mapping[str, int], wait: bool = False
                    ) -> tuple[set[str], set[str], set[str]]:
        """Bump the generation of every host of ``expected`` ({host: generation}) that
        still is at that generation, in three statements whatever their number.

        Returns (claimed, conflicts, held): the hosts whose generation was bumped;
        those another scheduler placed on since; those another scheduler's
        transaction holds right now (rather than wait for them, place
        elsewhere; with ``wait``, none: their rows are waited for, in host order).
        A claimed host stays locked until the transaction ends.
        """
        claimed: set[str] = set()
        conflicts: set[str] = set()
        held: set[str] = set()
        if not expected:
            return claimed, conflicts, held
        with self._transaction(write=True) as connection:
            found: dict[str, int] = {}
            for chunk in _chunks(sorted(expected)):  # one lock order for every scheduler
                found.update(connection.execute(
                    sa.select(host_generations.c.host, host_generations.c.generation)
                    .where(host_generations.c.host.in_(chunk))
                    .order_by(host_generations.c.host)
                    .with_for_update(skip_locked=not wait)
                ).all())
            missing: list[str] = []
            for host, generation in expected.items():
                current = found.get(host)
                if current is None:
                    # No row (never claimed), or a row locked by another transaction.
                    if generation == 0:
                        missing.append(host)
                    else:
                        held.add(host)
                elif current == generation:
                    claimed.add(host)
                else:
                    conflicts.add(host)
            inserted = self._insert_new_hosts(connection, sorted(missing))
            claimed.update(inserted)
            held.update(set(missing).difference(inserted))
            bump = sorted(claimed.difference(missing))
            for chunk in _chunks(bump):
                connection.execute(
                    sa.update(host_generations).where(host_generations.c.host.in_(chunk))
                    .values(generation=host_generations.c.generation + 1)
                )
        return claimed, conflicts, held

    @staticmethod
    def _insert_new_hosts(connection: sa.Connection, hosts: list[str]) -> set[str]:
        """Insert the generation rows of those of ``hosts`` that have none, claimed once,
        in the order given (the same for every scheduler: no deadlock); those inserted."""
        rows: list[dict[str, Any]] = [{"host": host, "generation": 1} for host in hosts]
        if not rows:
            return set()
        dialect = connection.dialect.name
        if dialect in ("postgresql", "sqlite"):
            dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
            statement = dialect_insert(host_generations).on_conflict_do_nothing()
            return set(connection.scalars(statement.returning(host_generations.c.host), rows))
        ignore = sa.insert(host_generations).prefix_with("IGNORE")
        return {row["host"] for row in rows if connection.execute(ignore.values(row)).rowcount}

    @_retry
    def instances_placed_since(self, hosts: Iterable[str] | None = None, since: TimeValue | None = None
                               ) -> list[dict[str, Any]]:
        """Instances placed on any of ``hosts`` (on any host with None) that their agents
        may not have reported yet: those not claimed yet (SCHEDULED) and, with
        ``since`` (naive UTC, the database's clock), those BUILDING or ACTIVE updated
        at or after it; and the instances moving to any of them, as on their destination
        (``host`` is the move's destination in those rows). Which of them a host's last report
        lists is the caller's to tell."""
        condition = instances.c.state == states.SCHEDULED
        if since is not None:
            condition = sa.or_(condition, sa.and_(
                instances.c.state.in_([states.BUILDING, states.ACTIVE]),
                instances.c.updated_at >= to_db_time(since)))
        # The destinations of moves under way hold the instance too (at its new size), as its move_host.
        moving = instances.c.state == states.MIGRATING
        rows: list[sa.RowMapping] = []
        with self._transaction() as connection:
            if hosts is None:
                query = sa.select(instances).where(sa.or_(condition, sa.and_(
                    moving, instances.c.move_host.is_not(None))))
                rows.extend(connection.execute(query).mappings().all())
            for chunk in _chunks(sorted(set(hosts or ()))):
                query = sa.select(instances).where(sa.or_(
                    sa.and_(condition, instances.c.host.in_(chunk)),
                    sa.and_(moving, instances.c.move_host.in_(chunk))))
                rows.extend(connection.execute(query).mappings().all())
        return [dict(_row_dict(row), host=row["move_host"]) if row["state"] == states.MIGRATING
                else _row_dict(row) for row in rows]

