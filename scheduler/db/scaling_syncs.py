"""The scaling controller's syncs in bulk: what a chunk of claimed groups needs read in
three queries (their members, recommendations and scale events), their records written in
one transaction (a compare-and-set on each group's version, their history and new members,
the prune), and the members a scale-down removes marked in one statement, where a sync of
one group at a time costs a few transactions per group (see scheduler/scaling/controller.py).

The rows read here keep their times as naive UTC datetimes, not ISO text: the controller
only compares them, and turning 100,000 of them into text and back each sync cost more
than reading them.
"""

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from scheduler import states
from scheduler.db import fastpaths
from scheduler.db.engine import Conflict, DatabaseEngine, TimeValue, _retry, to_db_time
from scheduler.db.models import instances, scaling_group_events, scaling_group_recommendations, scaling_groups
from scheduler.db.rows import _chunks
from scheduler.db.scaling_rows import group_values, new_member_rows
from scheduler.utils import jsonutils

#: Seconds a group's scale events are kept at least, whatever its windows read: ``show``
#: lists the last ones (Kubernetes keeps events an hour).
SCALE_EVENTS_KEPT_S = 3600.0

#: The member columns a sync reads (not the stored request, read only to cast it again).
MEMBER_COLUMNS = ("uuid", "display_name", "state", "host", "vcpus", "memory_mb", "updated_at", "launched_at",
                  "scaling_group_uuid")


@dataclass(frozen=True)
class SyncRecord:
    """One group's sync to record, as record_scaling_sync takes it: ``values`` (desired,
    status, ...) written with last_synced_at if the group is still at ``expected_version``,
    the ``recommendations``, the ``scale_event`` (change, reason) and the ``new_members``'
    instance rows; then the group's history recorded before ``prune_before`` deleted
    (None: nothing to prune), its scale events only once SCALE_EVENTS_KEPT_S old too."""

    uuid: str
    expected_version: int
    values: Mapping[str, Any]
    recommendations: Sequence[int] = ()
    scale_event: tuple[int, str | None] | None = None
    new_members: Sequence[Mapping[str, Any]] = ()
    prune_before: datetime | None = None


@dataclass(frozen=True)
class _Write:
    group_id: int
    project_id: str | None
    record: SyncRecord
    values: dict[str, Any]


def _read_members_as_json(connection: sa.Connection, of_chunk: sa.ColumnElement[bool],
                          found: dict[str, dict[str, Any]]) -> None:
    """The chunk's members, as the portable query reads them, through PostgreSQL: one JSON
    array of objects per group, decoded by orjson, its two times parsed back. Turning
    100,000 row tuples into dicts was a fifth of a sync's CPU; building them is the
    server's work here, and the decoding is C's."""
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    pairs: list[Any] = []
    for name in MEMBER_COLUMNS:
        column = instances.c[name]
        if name == "updated_at":
            column = sa.func.coalesce(instances.c.updated_at, instances.c.created_at)
        pairs += [sa.literal(name), column]
    members = sa.func.json_agg(aggregate_order_by(sa.func.json_build_object(*pairs), instances.c.created_at,
                                                  instances.c.id))
    statement = (sa.select(instances.c.scaling_group_uuid, sa.cast(members, sa.Text))
                 .where(instances.c.state != states.DELETED, of_chunk)
                 .group_by(instances.c.scaling_group_uuid))
    parse = datetime.fromisoformat
    for uuid, text in connection.execute(statement):
        rows = jsonutils.loads(text)
        for row in rows:
            for name in ("updated_at", "launched_at"):
                if row[name] is not None:
                    row[name] = parse(row[name])
        found[uuid]["members"] = rows


class ScalingSyncQueries(DatabaseEngine):
    """The bulk reads and writes of the scaling controller's syncs."""

    @_retry
    def read_scaling_syncs(self, uuids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """What the syncs of the groups ``uuids`` read, in one transaction: {group uuid:
        {"members": [...], "recommendations": [...], "oldest_recommendation": time or None,
        "scale_events": [...]}} (an unknown group has none of any).

        Members are the group's instances not DELETED, oldest first, with MEMBER_COLUMNS
        (``updated_at`` is their creation time if they never changed). Recommendations are
        the youngest record of each count the group's history holds, {recorded_at,
        replicas}: a stabilization window reads only the lowest and the highest count
        recorded within it, so of the records of one count the youngest stands for all;
        "oldest_recommendation" tells whether any is old enough to prune. Scale events are
        all of them, oldest first: {recorded_at, change, reason}. Times are naive UTC
        datetimes."""
        found: dict[str, dict[str, Any]] = {uuid: {"members": [], "recommendations": [],
                                                   "oldest_recommendation": None, "scale_events": []}
                                            for uuid in uuids}
        g, recommendations, events = scaling_groups, scaling_group_recommendations, scaling_group_events
        columns = [instances.c[name] for name in MEMBER_COLUMNS]
        columns[MEMBER_COLUMNS.index("updated_at")] = sa.func.coalesce(
            instances.c.updated_at, instances.c.created_at).label("updated_at")
        members = (sa.select(*columns).where(instances.c.state != states.DELETED)
                   .order_by(instances.c.created_at, instances.c.id))
        recorded_at = recommendations.c.recorded_at
        recommended = (sa.select(g.c.uuid, recommendations.c.replicas, sa.func.max(recorded_at),
                                 sa.func.min(recorded_at))
                       .join(g, g.c.id == recommendations.c.group_id)
                       .group_by(g.c.uuid, recommendations.c.replicas))
        scaled = (sa.select(g.c.uuid, events.c.recorded_at, events.c.change, events.c.reason)
                  .join(g, g.c.id == events.c.group_id).order_by(events.c.recorded_at, events.c.id))
        with self._transaction() as connection:
            for chunk in _chunks(found):
                of_chunk = functools.partial(fastpaths.any_of, connection, values=chunk,
                                             enabled=self.fast_paths)
                if fastpaths.json_aggregates(connection.dialect, self.fast_paths):
                    _read_members_as_json(connection, of_chunk(instances.c.scaling_group_uuid), found)
                else:
                    rows = connection.execute(members.where(of_chunk(instances.c.scaling_group_uuid))).all()
                    for row in rows:
                        member = dict(zip(MEMBER_COLUMNS, row, strict=True))
                        found[member["scaling_group_uuid"]]["members"].append(member)
                for uuid, replicas, youngest, oldest in connection.execute(
                        recommended.where(of_chunk(g.c.uuid))):
                    group = found[uuid]
                    group["recommendations"].append(
                        {"recorded_at": to_db_time(youngest), "replicas": replicas})
                    oldest = to_db_time(oldest)
                    if group["oldest_recommendation"] is None or oldest < group["oldest_recommendation"]:
                        group["oldest_recommendation"] = oldest
                for uuid, at, change, reason in connection.execute(scaled.where(of_chunk(g.c.uuid))):
                    found[uuid]["scale_events"].append(
                        {"recorded_at": at, "change": change, "reason": reason})
        return found

    @_retry
    def record_scaling_syncs(self, at: TimeValue, records: Iterable[SyncRecord]) -> set[str]:
        """Record the syncs done at ``at`` (the database's clock) of several groups in one
        transaction, each as record_scaling_sync would: if its group is still at its expected
        version (and, when it adds members, not being deleted), and its history pruned. The
        uuids of the groups written; the others were written since (or are gone, or being
        deleted) and have nothing of their sync.

        The groups' rows are locked (SELECT ... FOR UPDATE) before their versions are
        compared, so the compare-and-set holds for each group as if it were written alone.
        Raises ValueError for a value no group may hold and Conflict if a new member's
        instance exists already, writing nothing of any sync.
        """
        synced_at = to_db_time(at)
        pending: list[tuple[SyncRecord, dict[str, Any]]] = []
        for record in records:
            if record.scale_event is not None and not record.scale_event[0]:
                raise ValueError("a scale event changes the count (> 0 up, < 0 down), not by 0")
            pending.append((record, dict(group_values(record.values), last_synced_at=synced_at)))
        now = self.now()
        g = scaling_groups
        written: set[str] = set()
        with self._transaction(write=True) as connection:
            for chunk in _chunks(pending):
                held = {row.uuid: row for row in connection.execute(
                    sa.select(g.c.id, g.c.uuid, g.c.version, g.c.project_id, g.c.deleted_at)
                    .where(fastpaths.any_of(connection, g.c.uuid, [record.uuid for record, _ in chunk],
                                            self.fast_paths))
                    .order_by(g.c.id).with_for_update())}  # locked in one order: no deadlock
                mine = []
                for record, values in chunk:
                    row = held.get(record.uuid)
                    if row is None or row.version != record.expected_version:
                        continue
                    if record.new_members and row.deleted_at is not None:
                        continue  # no member joins a group being deleted
                    mine.append(_Write(row.id, row.project_id, record, values))
                self._write_groups(connection, now, mine)
                self._write_members(connection, now, mine)
                self._write_history(connection, synced_at, mine, self.fast_paths)
                written.update(write.record.uuid for write in mine)
        return written

    def _write_groups(self, connection: sa.Connection, now: datetime, writes: Sequence[_Write]) -> None:
        """Each group's values, version + 1: one executemany per set of columns written (one
        statement per set by Berth's fast path where it has one). The rows are locked and
        their versions compared already: the versions in the statements only say so again."""
        g = scaling_groups
        fast_update = fastpaths.versioned_updater(connection.dialect, self.fast_paths)
        if fast_update is not None:
            grouped: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for write in writes:
                grouped.setdefault(tuple(sorted(write.values)), []).append(
                    {"id": write.group_id, "version": write.record.expected_version, **write.values,
                     "updated_at": now})
            for rows in grouped.values():
                fast_update(connection, g, rows)
            return
        by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for write in writes:
            by_columns.setdefault(tuple(sorted(write.values)), []).append(
                {**{f"new_{name}": value for name, value in write.values.items()}, "new_updated_at": now,
                 "match_id": write.group_id, "match_version": write.record.expected_version})
        matching = sa.and_(g.c.id == sa.bindparam("match_id"), g.c.version == sa.bindparam("match_version"))
        for columns, params in by_columns.items():
            values: dict[str, Any] = {name: sa.bindparam(f"new_{name}", type_=g.c[name].type)
                                      for name in (*columns, "updated_at")}
            values["version"] = g.c.version + 1
            connection.execute(sa.update(g).where(matching).values(values), params)

    def _write_members(self, connection: sa.Connection, now: datetime, writes: Sequence[_Write]) -> None:
        """The new members' instance rows (by Berth's fast path where it has one); Conflict
        if one of their uuids is taken."""
        rows = [row for write in writes if write.record.new_members
                for row in new_member_rows({"uuid": write.record.uuid, "project_id": write.project_id},
                                           write.record.new_members, now)]
        fast_insert = fastpaths.instance_inserter(connection.dialect, self.fast_paths)
        for chunk in _chunks(rows):
            uuids = [row["uuid"] for row in chunk]
            if fast_insert is not None:
                inserted = fast_insert(connection, instances, chunk)
                taken = [uuid for uuid in uuids if uuid not in inserted]
            else:
                taken = list(connection.scalars(
                    sa.select(instances.c.uuid).where(instances.c.uuid.in_(uuids))))
                if not taken:
                    connection.execute(instances.insert(), chunk)
            if taken:
                raise Conflict(f"instance(s) {', '.join(sorted(taken))} exist already: no member added")

    @staticmethod
    def _write_history(connection: sa.Connection, synced_at: datetime, writes: Sequence[_Write],
                       fast_paths: bool) -> None:
        """The groups' recommendations and scale events, then the prune of their old history."""
        recommendations = [{"group_id": write.group_id, "recorded_at": synced_at, "replicas": int(replicas)}
                           for write in writes for replicas in write.record.recommendations]
        events = []
        by_cutoff: dict[datetime, list[int]] = {}
        for write in writes:
            event = write.record.scale_event
            if event is not None:
                events.append({"group_id": write.group_id, "recorded_at": synced_at, "change": int(event[0]),
                               "reason": event[1]})
            if write.record.prune_before is not None:
                by_cutoff.setdefault(to_db_time(write.record.prune_before), []).append(write.group_id)
        fast_insert = fastpaths.history_inserter(connection.dialect, fast_paths)
        for table, rows in ((scaling_group_recommendations, recommendations), (scaling_group_events, events)):
            if not rows:
                continue
            if fast_insert is None:
                connection.execute(table.insert(), rows)
                continue
            fast_insert(connection, table, {name: [row[name] for row in rows] for name in rows[0]
                                            if name != "recorded_at"}, {"recorded_at": synced_at})
        kept = synced_at - timedelta(seconds=SCALE_EVENTS_KEPT_S)
        for cutoff, group_ids in by_cutoff.items():
            for table, before in ((scaling_group_recommendations, cutoff),
                                  (scaling_group_events, min(cutoff, kept))):
                connection.execute(sa.delete(table).where(
                    fastpaths.any_of(connection, table.c.group_id, group_ids, fast_paths),
                    table.c.recorded_at < before))

    @_retry
    def set_members_state_if(self, uuids: Iterable[str], state: str, expected: Sequence[str]) -> set[str]:
        """Compare-and-set on many instances at once: ``state`` on those of ``uuids`` still
        in one of the ``expected`` states; the uuids changed."""
        now = self.now()
        done: set[str] = set()
        with self._transaction(write=True) as connection:
            for chunk in _chunks(dict.fromkeys(uuids)):
                matching = sa.and_(instances.c.uuid.in_(chunk), instances.c.state.in_(list(expected)))
                statement = sa.update(instances).where(matching).values(state=state, updated_at=now)
                if connection.dialect.update_returning:
                    done.update(connection.scalars(statement.returning(instances.c.uuid)))
                    continue
                found = connection.scalars(
                    sa.select(instances.c.uuid).where(matching).with_for_update()).all()
                if found:
                    connection.execute(sa.update(instances).where(instances.c.uuid.in_(found))
                                       .values(state=state, updated_at=now))
                    done.update(found)
        return done
