"""The aggregates and aggregate_hosts tables: host aggregates and their members."""

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from scheduler.db.engine import Conflict, DatabaseEngine, NotFound, _retry, to_iso
from scheduler.db.models import aggregate_hosts, aggregates


class AggregateQueries(DatabaseEngine):
    """Host aggregates. Callers (scheduler.admin.grouping) check names and values first; these
    raise NotFound / Conflict for what only the database can tell."""

    def _aggregate_id(self, connection: sa.Connection, name: str) -> int:
        found = connection.execute(sa.select(aggregates.c.id).where(aggregates.c.name == name)).first()
        if found is None:
            raise NotFound(f"no aggregate named {name!r}")
        return found[0]

    @_retry
    def list_aggregates(self) -> list[dict[str, Any]]:
        """[{name, availability_zone, metadata, hosts}], by name."""
        with self._transaction() as connection:
            rows = connection.execute(sa.select(aggregates).order_by(aggregates.c.name)).mappings().all()
            hosts: dict[int, list[str]] = {}
            for aggregate_id, host in connection.execute(
                sa.select(aggregate_hosts.c.aggregate_id, aggregate_hosts.c.host)
                .order_by(aggregate_hosts.c.host)
            ):
                hosts.setdefault(aggregate_id, []).append(host)
        return [
            {
                "name": row["name"],
                "availability_zone": row["availability_zone"],
                "metadata": dict(row["metadata"] or {}),
                "hosts": hosts.get(row["id"], []),
                "created_at": to_iso(row["created_at"]),
                "updated_at": to_iso(row["updated_at"]),
            }
            for row in rows
        ]

    def get_aggregate(self, name: str) -> dict[str, Any]:
        for aggregate in self.list_aggregates():
            if aggregate["name"] == name:
                return aggregate
        raise NotFound(f"no aggregate named {name!r}")

    @_retry
    def create_aggregate(self, name: str, availability_zone: str | None = None,
                         metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        now = self.now()
        try:
            with self._transaction(write=True) as connection:
                connection.execute(aggregates.insert(), [{
                    "name": name, "availability_zone": availability_zone,
                    "metadata": dict(metadata or {}), "created_at": now, "updated_at": now,
                }])
        except sa_exc.IntegrityError:
            raise Conflict(f"an aggregate named {name!r} exists already") from None
        return self.get_aggregate(name)

    @_retry
    def delete_aggregate(self, name: str) -> None:
        """Delete an aggregate holding no host; Conflict names the hosts it still holds."""
        with self._transaction(write=True) as connection:
            aggregate_id = self._aggregate_id(connection, name)
            hosts = connection.execute(
                sa.select(aggregate_hosts.c.host).where(aggregate_hosts.c.aggregate_id == aggregate_id)
                .order_by(aggregate_hosts.c.host)
            ).scalars().all()
            if hosts:
                shown = ", ".join(hosts[:10]) + (f" and {len(hosts) - 10} more" if len(hosts) > 10 else "")
                raise Conflict(f"aggregate {name!r} still holds host(s) {shown}: remove them first "
                               f"(berth aggregate remove-host {name} HOST)")
            connection.execute(sa.delete(aggregates).where(aggregates.c.id == aggregate_id))

    @_retry
    def add_aggregate_host(self, name: str, host: str) -> dict[str, Any]:
        try:
            with self._transaction(write=True) as connection:
                aggregate_id = self._aggregate_id(connection, name)
                connection.execute(aggregate_hosts.insert(), [{"aggregate_id": aggregate_id, "host": host}])
                connection.execute(
                    sa.update(aggregates).where(aggregates.c.id == aggregate_id).values(updated_at=self.now())
                )
        except sa_exc.IntegrityError:
            raise Conflict(f"host {host!r} is in aggregate {name!r} already") from None
        return self.get_aggregate(name)

    @_retry
    def remove_aggregate_host(self, name: str, host: str) -> dict[str, Any]:
        with self._transaction(write=True) as connection:
            aggregate_id = self._aggregate_id(connection, name)
            removed = connection.execute(
                sa.delete(aggregate_hosts).where(
                    aggregate_hosts.c.aggregate_id == aggregate_id, aggregate_hosts.c.host == host
                )
            ).rowcount
            if not removed:
                raise NotFound(f"host {host!r} is not in aggregate {name!r}")
            connection.execute(
                sa.update(aggregates).where(aggregates.c.id == aggregate_id).values(updated_at=self.now())
            )
        return self.get_aggregate(name)

    @_retry
    def update_aggregate(self, name: str, metadata: Mapping[str, Any] | None = None,
                         availability_zone: str | None = None, set_zone: bool = False) -> dict[str, Any]:
        """Merge ``metadata`` into the aggregate's (a None value removes the key); set its zone."""
        with self._transaction(write=True) as connection:
            row = connection.execute(
                sa.select(aggregates).where(aggregates.c.name == name)
            ).mappings().first()
            if row is None:
                raise NotFound(f"no aggregate named {name!r}")
            merged = dict(row["metadata"] or {})
            for key, value in (metadata or {}).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            values = {"metadata": merged, "updated_at": self.now()}
            if set_zone:
                values["availability_zone"] = availability_zone
            connection.execute(sa.update(aggregates).where(aggregates.c.id == row["id"]).values(values))
        return self.get_aggregate(name)

