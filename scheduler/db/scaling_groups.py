"""The scaling_groups table and the groups' history (scaling_group_recommendations,
scaling_group_events); a group's members are the instances whose ``scaling_group_uuid``
is its uuid.

Controllers (one per scheduler process) share the groups by lease: each period a
controller claims the groups it may sync (:meth:`ScalingGroupQueries.claim_scaling_groups`),
and writes what a sync decided with a compare-and-set on the group's ``version``, which
every write to the row bumps (a claim too). A controller whose lease expired and was
taken over holds an old version: it writes nothing, and casts nothing.
"""

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from scheduler import states
from scheduler.db import fastpaths
from scheduler.db.engine import Conflict, NotFound, TimeValue, _retry, to_db_time
from scheduler.db.models import instances, scaling_group_events, scaling_group_recommendations, scaling_groups
from scheduler.db.rows import _chunks, _row_dict
from scheduler.db.scaling_rows import group_values as _group_values
from scheduler.db.scaling_rows import new_member_rows
from scheduler.db.scaling_syncs import ScalingSyncQueries


def _group_dict(row: sa.RowMapping) -> dict[str, Any]:
    group = _row_dict(row)
    del group["id"]
    return group


def _live_members(uuid: str) -> sa.Select:
    return sa.select(sa.func.count()).select_from(instances).where(
        instances.c.scaling_group_uuid == uuid, instances.c.state != states.DELETED)


def _name_taken(name: object) -> Conflict:
    return Conflict(f"a scaling group named {name!r} exists already (or is being deleted)")


def _delete_group(connection: sa.Connection, group_id: int) -> None:
    for history in (scaling_group_recommendations, scaling_group_events):
        connection.execute(sa.delete(history).where(history.c.group_id == group_id))
    connection.execute(sa.delete(scaling_groups).where(scaling_groups.c.id == group_id))


class ScalingGroupQueries(ScalingSyncQueries):
    """Scaling groups, their members, their history and their leases. Callers (the API)
    check names and specs first; these raise NotFound / Conflict for what only the
    database can tell, ValueError for a value no group may hold. The controller's bulk
    reads and writes are ScalingSyncQueries'."""

    def _group_row(self, connection: sa.Connection, uuid: str, lock: bool = False) -> sa.RowMapping:
        query = sa.select(scaling_groups).where(scaling_groups.c.uuid == uuid)
        row = connection.execute(query.with_for_update() if lock else query).mappings().first()
        if row is None:
            raise NotFound(f"no scaling group {uuid}")
        return row

    # -- the groups ---------------------------------------------------------

    @_retry
    def create_scaling_group(self, uuid: str, name: str, spec: Mapping[str, Any], template: Mapping[str, Any],
                             desired: int, project_id: str | None = None, paused: bool = False
                             ) -> dict[str, Any]:
        """A new group, never synced, held by no controller. ``spec`` as
        scheduler.scaling.spec.parse_spec accepts it; ``desired`` its count to start from."""
        now = self.now()
        row = _group_values({"name": name, "spec": spec, "template": template, "desired": desired,
                             "project_id": project_id, "paused": paused})
        row.update(uuid=uuid, version=0, replace_failures=0, created_at=now, updated_at=now)
        try:
            with self._transaction(write=True) as connection:
                taken = connection.execute(sa.select(scaling_groups.c.name).where(
                    sa.or_(scaling_groups.c.name == name, scaling_groups.c.uuid == uuid))).scalars().all()
                if taken:
                    raise _name_taken(name) if name in taken else Conflict(
                        f"a scaling group {uuid} exists already")
                connection.execute(scaling_groups.insert(), [row])
                return _group_dict(self._group_row(connection, uuid))
        except sa_exc.IntegrityError:
            raise _name_taken(name) from None  # created by another process meanwhile

    @_retry
    def get_scaling_group(self, uuid: str) -> dict[str, Any]:
        """The group of ``uuid`` (raises NotFound), deleting or not."""
        with self._transaction() as connection:
            return _group_dict(self._group_row(connection, uuid))

    @_retry
    def get_scaling_group_by_name(self, name: str) -> dict[str, Any]:
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(scaling_groups).where(scaling_groups.c.name == name)).mappings().first()
        if row is None:
            raise NotFound(f"no scaling group named {name!r}")
        return _group_dict(row)

    @_retry
    def list_scaling_groups(self, project_id: str | None = None, include_deleting: bool = True
                            ) -> list[dict[str, Any]]:
        """Every group (of ``project_id``), by name; without ``include_deleting``, not those
        being deleted."""
        query = sa.select(scaling_groups).order_by(scaling_groups.c.name)
        if project_id is not None:
            query = query.where(scaling_groups.c.project_id == project_id)
        if not include_deleting:
            query = query.where(scaling_groups.c.deleted_at.is_(None))
        with self._transaction() as connection:
            return [_group_dict(row) for row in connection.execute(query).mappings()]

    @_retry
    def update_scaling_group(self, uuid: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``values`` whatever the group's version (an operator's change); the group.
        A controller syncing it meanwhile then fails its compare-and-set and syncs again."""
        checked = _group_values(values)
        try:
            with self._transaction(write=True) as connection:
                group = self._write(connection, uuid, None, checked)
        except sa_exc.IntegrityError:
            raise _name_taken(checked.get("name")) from None  # renamed by another process meanwhile
        if group is None:
            raise NotFound(f"no scaling group {uuid}")
        return group

    @_retry
    def update_scaling_group_if(self, uuid: str, expected_version: int, values: Mapping[str, Any]
                                ) -> dict[str, Any] | None:
        """Compare-and-set: write ``values`` if the group is still at ``expected_version``;
        the group as written (its version one more), or None (missing, or written since:
        by an operator, or by the controller that took the lease over)."""
        checked = _group_values(values)
        try:
            with self._transaction(write=True) as connection:
                return self._write(connection, uuid, expected_version, checked)
        except sa_exc.IntegrityError:
            raise _name_taken(checked.get("name")) from None

    def _write(self, connection: sa.Connection, uuid: str, expected_version: int | None,
               checked: dict[str, Any], live: bool = False) -> dict[str, Any] | None:
        """Write ``checked`` values to the group (at ``expected_version``; with ``live``, not
        being deleted) and bump its version; the group as written, or None."""
        statement = sa.update(scaling_groups).where(scaling_groups.c.uuid == uuid).values(
            {**checked, "updated_at": self.now(), "version": scaling_groups.c.version + 1})
        if expected_version is not None:
            statement = statement.where(scaling_groups.c.version == expected_version)
        if live:
            statement = statement.where(scaling_groups.c.deleted_at.is_(None))
        if "name" in checked and connection.execute(sa.select(scaling_groups.c.id).where(
                scaling_groups.c.name == checked["name"], scaling_groups.c.uuid != uuid)).first():
            raise _name_taken(checked["name"])
        if connection.execute(statement).rowcount != 1:
            return None
        return _group_dict(self._group_row(connection, uuid))

    @_retry
    def delete_scaling_group(self, uuid: str) -> bool:
        """Delete the group and its history now if no member is left but DELETED ones (True);
        else mark it deleting (False): no member may be added to it any more, and the
        controller deletes its members and then the group (remove_scaling_group_if)."""
        with self._transaction(write=True) as connection:
            row = self._group_row(connection, uuid, lock=True)
            if not connection.execute(_live_members(uuid)).scalar_one():
                _delete_group(connection, row["id"])
                return True
            connection.execute(sa.update(scaling_groups).where(scaling_groups.c.id == row["id"]).values(
                deleted_at=sa.func.coalesce(scaling_groups.c.deleted_at, self.now()),
                version=scaling_groups.c.version + 1))
            return False

    @_retry
    def remove_scaling_group_if(self, uuid: str, expected_version: int) -> bool:
        """The controller's end of a delete: remove the group marked deleting, with its
        history, if it is still at ``expected_version`` and its members are all DELETED."""
        with self._transaction(write=True) as connection:
            row = connection.execute(
                sa.select(scaling_groups.c.id).where(
                    scaling_groups.c.uuid == uuid, scaling_groups.c.version == expected_version,
                    scaling_groups.c.deleted_at.is_not(None)).with_for_update()).first()
            if row is None or connection.execute(_live_members(uuid)).scalar_one():
                return False
            _delete_group(connection, row[0])
            return True

    # -- members ------------------------------------------------------------

    @_retry
    def list_scaling_group_members(self, uuid: str, include_deleted: bool = False) -> list[dict[str, Any]]:
        """The group's member instances, oldest first; DELETED ones only with ``include_deleted``
        (a member deleted by hand drops out). An unknown group has none."""
        query = (sa.select(instances).where(instances.c.scaling_group_uuid == uuid)
                 .order_by(instances.c.created_at, instances.c.id))
        if not include_deleted:
            query = query.where(instances.c.state != states.DELETED)
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(query).mappings()]

    # -- a sync and the history -------------------------------------------------

    @_retry
    def record_scaling_sync(self, uuid: str, expected_version: int, at: TimeValue,
                            values: Mapping[str, Any] | None = None, recommendations: Sequence[int] = (),
                            scale_event: tuple[int, str | None] | None = None,
                            new_members: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
        """Record a sync done at ``at`` (the database's clock), all or nothing, if the group is
        still at ``expected_version``: ``values`` (desired, status, ...) and last_synced_at,
        the ``recommendations`` (the current count first on a first sync, then the
        decision's), the ``scale_event`` (change, reason), and the ``new_members``' instance
        rows (SCHEDULING, of this group and its project unless they say otherwise).

        Returns the group as written, or None: nothing was written (the version moved on,
        or new members were asked of a group being deleted). The caller casts the new
        members' builds only once this returns a group; a controller taking over finds
        them among the members. Raises Conflict, writing nothing, if an instance of one of
        those uuids exists already.
        """
        synced_at = to_db_time(at)
        members = list(new_members)
        if scale_event is not None and not scale_event[0]:
            raise ValueError("a scale event changes the count (> 0 up, < 0 down), not by 0")
        checked = dict(_group_values(values or {}), last_synced_at=synced_at)
        with self._transaction(write=True) as connection:
            group = self._write(connection, uuid, expected_version, checked, live=bool(members))
            if group is None:
                return None
            group_id = connection.execute(
                sa.select(scaling_groups.c.id).where(scaling_groups.c.uuid == uuid)).scalar_one()
            if recommendations:
                connection.execute(scaling_group_recommendations.insert(), [
                    {"group_id": group_id, "recorded_at": synced_at, "replicas": int(replicas)}
                    for replicas in recommendations])
            if scale_event is not None:
                connection.execute(scaling_group_events.insert(), [{
                    "group_id": group_id, "recorded_at": synced_at, "change": int(scale_event[0]),
                    "reason": scale_event[1]}])
            rows = new_member_rows(group, members, self.now())
            if rows:
                taken = connection.scalars(sa.select(instances.c.uuid).where(
                    instances.c.uuid.in_([row["uuid"] for row in rows]))).all()
                if taken:
                    raise Conflict(f"instance(s) {', '.join(sorted(taken))} exist already: no member added")
                connection.execute(instances.insert(), rows)
            return group

    @_retry
    def scaling_group_history(self, uuid: str, since: TimeValue | None = None
                              ) -> dict[str, list[dict[str, Any]]]:
        """{"recommendations": [{recorded_at, replicas}], "scale_events": [{recorded_at, change,
        reason}]} of the group, oldest first; with ``since``, those recorded at or after it."""
        found: dict[str, list[dict[str, Any]]] = {}
        with self._transaction() as connection:
            group_id = self._group_row(connection, uuid)["id"]
            for key, table, columns in (
                ("recommendations", scaling_group_recommendations, ("replicas",)),
                ("scale_events", scaling_group_events, ("change", "reason")),
            ):
                query = (sa.select(table.c.recorded_at, *(table.c[c] for c in columns))
                         .where(table.c.group_id == group_id).order_by(table.c.recorded_at, table.c.id))
                if since is not None:
                    query = query.where(table.c.recorded_at >= to_db_time(since))
                found[key] = [_row_dict(row) for row in connection.execute(query).mappings()]
        return found

    @_retry
    def prune_scaling_history(self, before: TimeValue, uuid: str | None = None) -> dict[str, int]:
        """Delete the recommendations and scale events recorded before ``before`` (of the group
        ``uuid``, or of every group); {table: rows deleted}."""
        cutoff = to_db_time(before)
        deleted: dict[str, int] = {}
        with self._transaction(write=True) as connection:
            group_id = None if uuid is None else self._group_row(connection, uuid)["id"]
            for table in (scaling_group_recommendations, scaling_group_events):
                statement = sa.delete(table).where(table.c.recorded_at < cutoff)
                if group_id is not None:
                    statement = statement.where(table.c.group_id == group_id)
                deleted[table.name] = connection.execute(statement).rowcount
        return deleted

    # -- leases -------------------------------------------------------------

    @_retry
    def claim_scaling_groups(self, owner: str, now: TimeValue, lease_seconds: float, limit: int,
                             json_text: bool = False) -> list[dict[str, Any]]:
        """The groups ``owner`` holds for ``lease_seconds`` from ``now`` (the database's
        clock), at most ``limit`` of them, by uuid: those it held already (renewed first),
        then those held by nobody or whose lease expired. Each claim bumps the group's
        version: the version returned is the one to write with.

        With ``json_text``, each group's ``spec`` and ``template`` come as their JSON text,
        its times as naive UTC datetimes, and its ``status`` is left out: what the
        controller reads (it parses each distinct spec once, compares times, and writes the
        status without reading it).

        Two statements: the groups are selected FOR UPDATE SKIP LOCKED (a group another
        controller is claiming or writing right now is left to it; SQLite has one writer
        at a time), then updated (RETURNING the rows where the dialect can).
        """
        start = to_db_time(now)
        g = scaling_groups
        claimable = sa.or_(g.c.lease_owner.is_(None), g.c.lease_owner == owner,
                           g.c.lease_expires_at.is_(None), g.c.lease_expires_at <= start)
        lease = {"lease_owner": owner, "lease_expires_at": start + timedelta(seconds=lease_seconds),
                 "version": g.c.version + 1}
        columns: list[sa.ColumnElement[Any]] = list(g.columns)
        if json_text:
            columns = [sa.cast(c, sa.Text).label(c.name) if c.name in ("spec", "template") else c
                       for c in g.columns if c.name != "status"]
        with self._transaction(write=True) as connection:
            ids = connection.scalars(
                sa.select(g.c.id).where(claimable)
                .order_by(sa.case((g.c.lease_owner == owner, 0), else_=1), g.c.id)
                .limit(limit).with_for_update(skip_locked=True)
            ).all()
            if not ids:
                return []
            rows: list[sa.RowMapping] = []
            for chunk in _chunks(ids):
                chosen = fastpaths.any_of(connection, g.c.id, chunk, self.fast_paths)
                statement = sa.update(g).where(chosen, claimable).values(lease)
                if connection.dialect.update_returning:
                    rows += connection.execute(statement.returning(*columns)).mappings().all()
                else:
                    connection.execute(statement)
                    rows += connection.execute(sa.select(*columns).where(
                        g.c.id.in_(chunk), g.c.lease_owner == owner,
                        g.c.lease_expires_at == lease["lease_expires_at"])).mappings().all()
        groups = [{key: row[key] for key in row.keys() if key != "id"} if json_text else _group_dict(row)
                  for row in rows]
        return sorted(groups, key=lambda group: group["uuid"])

    @_retry
    def release_scaling_groups(self, owner: str, uuids: Iterable[str] | None = None) -> int:
        """Give up ``owner``'s leases (on ``uuids``, or all): another controller may claim
        them at once. How many were released."""
        g = scaling_groups
        statement = sa.update(g).where(g.c.lease_owner == owner).values(
            lease_owner=None, lease_expires_at=None, version=g.c.version + 1)
        if uuids is not None:
            statement = statement.where(g.c.uuid.in_(list(uuids)))
        with self._transaction(write=True) as connection:
            return connection.execute(statement).rowcount


    # -- the API's reads

    @_retry
    def count_scaling_group_members(self, uuids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """{group uuid: {state: members}} of the groups ``uuids`` (or of every group), members
        not DELETED; a group without one is left out. One query, for ``berth scaling group list``."""
        query = (sa.select(instances.c.scaling_group_uuid, instances.c.state, sa.func.count())
                 .where(instances.c.scaling_group_uuid.is_not(None), instances.c.state != states.DELETED)
                 .group_by(instances.c.scaling_group_uuid, instances.c.state))
        if uuids is not None:
            query = query.where(instances.c.scaling_group_uuid.in_(list(uuids)))
        found: dict[str, dict[str, int]] = {}
        with self._transaction() as connection:
            for group, state, count in connection.execute(query):
                found.setdefault(group, {})[state] = int(count)
        return {group: dict(sorted(counts.items())) for group, counts in found.items()}
