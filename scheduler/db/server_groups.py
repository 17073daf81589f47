"""The server_groups and server_group_members tables."""

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from scheduler import states
from scheduler.db.engine import DatabaseEngine, NotFound, _retry, to_iso
from scheduler.db.models import instances, server_group_members, server_groups


class ServerGroupQueries(DatabaseEngine):
    """Server groups and their members."""

    @_retry
    def create_server_group(self, uuid: str, name: str, policy: str, rules: Mapping[str, Any] | None = None,
                            project_id: str | None = None) -> dict[str, Any]:
        with self._transaction(write=True) as connection:
            connection.execute(server_groups.insert(), [{
                "uuid": uuid, "name": name, "policy": policy, "rules": dict(rules or {}),
                "project_id": project_id, "created_at": self.now(),
            }])
        return self.get_server_group(uuid)

    @_retry
    def list_server_groups(self, name: str | None = None, live_members: bool = False) -> list[dict[str, Any]]:
        """[{uuid, name, policy, rules, project_id, members, created_at}], oldest first; with
        ``name``, the groups of that name. With ``live_members``, members whose instance is
        DELETED are left out."""
        statement = sa.select(server_groups).order_by(server_groups.c.created_at, server_groups.c.id)
        if name is not None:
            statement = statement.where(server_groups.c.name == name)
        with self._transaction() as connection:
            rows = connection.execute(statement).mappings().all()
            members: dict[int, list[str]] = {}
            query = _members_query(live_members)
            if name is not None:
                query = query.where(server_group_members.c.group_id.in_([row["id"] for row in rows]))
            for group_id, instance_uuid in connection.execute(query):
                members.setdefault(group_id, []).append(instance_uuid)
        return [_group_dict(row, members.get(row["id"], [])) for row in rows]

    @_retry
    def get_server_group(self, uuid: str, live_members: bool = False) -> dict[str, Any]:
        """The group of ``uuid`` (raises NotFound); ``live_members`` as for list_server_groups."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(server_groups).where(server_groups.c.uuid == uuid)
            ).mappings().first()
            if row is None:
                raise NotFound(f"no server group {uuid}")
            query = _members_query(live_members).where(server_group_members.c.group_id == row["id"])
            members = [instance_uuid for _, instance_uuid in connection.execute(query)]
        return _group_dict(row, members)

    @_retry
    def delete_server_group(self, uuid: str) -> None:
        with self._transaction(write=True) as connection:
            found = connection.execute(_group_id(uuid)).first()
            if found is None:
                raise NotFound(f"no server group {uuid}")
            members = server_group_members
            connection.execute(sa.delete(members).where(members.c.group_id == found[0]))
            connection.execute(sa.delete(server_groups).where(server_groups.c.id == found[0]))

    @_retry
    def add_server_group_members(self, uuid: str, instance_uuids: Iterable[str]) -> None:
        """Add instances to the group; those already in it are left alone, whoever
        added them, even in a transaction not yet committed (no unique violation)."""
        with self._transaction(write=True) as connection:
            found = connection.execute(_group_id(uuid)).first()
            if found is None:
                raise NotFound(f"no server group {uuid}")
            rows = [{"group_id": found[0], "instance_uuid": u} for u in dict.fromkeys(instance_uuids)]
            if not rows:
                return
            dialect = connection.dialect.name
            if dialect in ("postgresql", "sqlite"):
                dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert
                connection.execute(dialect_insert(server_group_members).on_conflict_do_nothing(), rows)
            else:
                connection.execute(sa.insert(server_group_members).prefix_with("IGNORE"), rows)


def _group_id(uuid: str) -> sa.Select:
    return sa.select(server_groups.c.id).where(server_groups.c.uuid == uuid)


def _members_query(live: bool) -> sa.Select:
    """(group_id, instance_uuid) of every member, in the order they joined; with ``live``, not
    those whose instance is DELETED (a member whose row is not written yet stays)."""
    members = server_group_members
    query = sa.select(members.c.group_id, members.c.instance_uuid).order_by(members.c.id)
    if live:
        query = query.outerjoin(instances, instances.c.uuid == members.c.instance_uuid).where(
            sa.or_(instances.c.state.is_(None), instances.c.state != states.DELETED))
    return query


def _group_dict(row: sa.RowMapping, members: list[str]) -> dict[str, Any]:
    return {
        "uuid": row["uuid"],
        "name": row["name"],
        "policy": row["policy"],
        "rules": dict(row["rules"] or {}),
        "project_id": row["project_id"],
        "members": members,
        "created_at": to_iso(row["created_at"]),
    }
