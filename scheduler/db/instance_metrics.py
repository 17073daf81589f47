"""The instance_metrics table: the last sample of each metric of each instance.

One row per instance and metric name, upserted: what the agents measure (``cpu``, ``memory``:
source ``agent``) and what is pushed (any other name: source ``pushed``), each stamped with
the database's time when it was saved. The scaling groups' controller reads the samples
newer than its staleness limit (:meth:`InstanceMetricQueries.latest_instance_metrics`):
an older one counts as missing.

The agents' samples are saved for the members of scaling groups only (every report
carries those of every instance; the controller reads the members'), and only from the
report of the host the database places the member on; pushed ones for any instance.
Samples of an instance that is not in ``instances`` (never, or archived or purged since)
or is DELETED are not saved, and are deleted by
:meth:`~InstanceMetricQueries.prune_instance_metrics`, which the scheduler runs periodically,
with every sample older than :data:`RETENTION_S` (or the readers' staleness limit, if
longer): one query for every way an instance goes, and nothing for the instance paths to
remember.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from berth_contract.host_report import HostReport
from berth_contract.instance_metrics import AGENT, MAX_NAME, PUSHED, SOURCES
from berth_contract.wire_numbers import is_finite
from scheduler import states
from scheduler.db import fastpaths
from scheduler.db.engine import DatabaseEngine, TimeValue, _retry, to_db_time, to_iso
from scheduler.db.models import instance_metrics, instances
from scheduler.db.rows import _chunks
from scheduler.utils import jsonutils

#: Samples older than this are pruned: far older than any staleness limit a reader uses.
RETENTION_S = 3600.0


class TooManyMetrics(ValueError):
    """A save that would give an instance more pushed names than it may hold; nothing saved."""

    def __init__(self, uuid: str, held: int, new: list[str], limit: int) -> None:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        super().__init__(f"instance {uuid} holds {held} pushed metric(s) of the {limit} it may hold; "
                         f"{len(new)} new name(s) ({shown}) would pass that")
        self.uuid, self.held, self.new, self.limit = uuid, held, new, limit

_KEY = ("instance_uuid", "name")
_WRITTEN = ("value", "sampled_at", "source")


def _sample_row(row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A checked row to write; ValueError naming what is wrong."""
    uuid, name, value, source = (row.get(k) for k in ("instance_uuid", "name", "value", "source"))
    if not isinstance(uuid, str) or not 0 < len(uuid) <= 36:
        raise ValueError(f"instance metric: instance_uuid must be a UUID, got {uuid!r}")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"instance metric of {uuid}: name must be text of 1 to {MAX_NAME} characters")
    if not is_finite(value):
        raise ValueError(f"instance metric {name} of {uuid}: value must be a finite number, got {value!r}")
    if source not in SOURCES:
        raise ValueError(f"instance metric {name} of {uuid}: source must be one of {', '.join(SOURCES)}")
    sampled_at = row.get("sampled_at")
    return {"instance_uuid": uuid, "name": name, "value": float(value), "source": source,
            "sampled_at": now if sampled_at is None else to_db_time(sampled_at)}


def _check_pushed_names(connection: sa.Connection, rows: list[dict[str, Any]], limit: int) -> None:
    """Raise TooManyMetrics when ``rows`` would give an instance more than ``limit`` pushed names."""
    m = instance_metrics.c
    pushed: dict[str, set[str]] = {}
    for row in rows:
        if row["source"] == PUSHED:
            pushed.setdefault(row["instance_uuid"], set()).add(row["name"])
    held: dict[str, set[str]] = {uuid: set() for uuid in pushed}
    for chunk in _chunks(sorted(pushed)):
        query = sa.select(m.instance_uuid, m.name).where(m.instance_uuid.in_(chunk), m.source == PUSHED)
        for uuid, name in connection.execute(query):
            held[uuid].add(name)
    for uuid, names in pushed.items():
        new = sorted(names - held[uuid])
        if len(held[uuid]) + len(new) > limit:
            raise TooManyMetrics(uuid, len(held[uuid]), new, limit)


def _upsert(connection: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` or overwrite the sample of the same instance and name."""
    dialect = connection.dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = (postgresql.insert if dialect == "postgresql" else sqlite_dialect.insert)(instance_metrics)
        connection.execute(insert.on_conflict_do_update(
            index_elements=list(_KEY), set_={c: insert.excluded[c] for c in _WRITTEN}), rows)
    elif dialect in ("mysql", "mariadb"):
        mysql_insert = mysql.insert(instance_metrics)
        connection.execute(mysql_insert.on_duplicate_key_update(
            {c: mysql_insert.inserted[c] for c in _WRITTEN}), rows)
    else:  # any other backend: look, then update or insert
        for row in rows:
            where = [instance_metrics.c[k] == row[k] for k in _KEY]
            if connection.execute(sa.select(instance_metrics.c.name).where(*where)).first() is None:
                connection.execute(instance_metrics.insert(), [row])
            else:
                connection.execute(sa.update(instance_metrics).where(*where)
                                   .values({c: row[c] for c in _WRITTEN}))


def _latest_as_json(connection: sa.Connection, uuids: list[str], since: datetime
                    ) -> dict[str, dict[str, float]]:
    """What the portable query reads, through PostgreSQL: every sample of ``uuids`` as one
    JSON object {uuid: {name: value}}, built by the server and decoded by orjson, where a
    sync's 100,000 row tuples cost more of its CPU than anything else it read."""
    m = instance_metrics.c
    samples = sa.func.json_object_agg(m.name, m.value).label("samples")
    per_instance = (sa.select(m.instance_uuid.label("uuid"), samples)
                    .where(m.instance_uuid == sa.any_(sa.cast(uuids, postgresql.ARRAY(m.instance_uuid.type))),
                           m.sampled_at >= since)
                    .group_by(m.instance_uuid).subquery())
    every = sa.func.json_object_agg(per_instance.c.uuid, per_instance.c.samples)
    text = connection.scalar(sa.select(sa.cast(every, sa.Text)))
    return {} if text is None else jsonutils.loads(text)


class InstanceMetricQueries(DatabaseEngine):
    """Per-instance metric samples: saved in bulk, read newer than a time, pruned."""

    #: Seconds between two prunes by one scheduler process (SchedulerService.save_reports).
    INSTANCE_METRICS_PRUNE_INTERVAL_S = 60.0

    def _save(self, rows: Iterable[Mapping[str, Any]], members_only: bool, max_pushed: int | None = None
              ) -> tuple[int, dict[str, list[str]]]:
        """(how many saved, {host: [uuids]} of the members whose samples a host reported but
        the database places elsewhere, left out); see the callers. With ``max_pushed``, an
        instance's pushed names are counted under a lock on its row (TooManyMetrics)."""
        now = self.now()
        given = [(_sample_row(row, now), row.get("host")) for row in rows]
        if not given:
            return 0, {}
        live_instances = instances.c.state != states.DELETED
        strays: dict[str, set[str]] = {}
        with self._transaction(write=True) as connection:
            checked: dict[tuple[str, str], dict[str, Any]] = {}
            if members_only:  # a few members among many instances: the members, not the instances
                placed = {uuid: host for uuid, host in connection.execute(
                    sa.select(instances.c.uuid, instances.c.host).where(
                        instances.c.scaling_group_uuid.is_not(None), live_instances))}
                for sample, host in given:
                    uuid = sample["instance_uuid"]
                    if uuid not in placed:
                        continue
                    if placed[uuid] != host:  # only the host the instance is on speaks for it
                        strays.setdefault(str(host), set()).add(uuid)
                        continue
                    checked[(uuid, sample["name"])] = sample
            else:
                live: set[str] = set()
                for chunk in _chunks(sorted({sample["instance_uuid"] for sample, _ in given})):
                    query = sa.select(instances.c.uuid).where(instances.c.uuid.in_(chunk), live_instances)
                    if max_pushed is not None:  # two pushes to one instance count its names in turn
                        query = query.with_for_update()
                    live.update(connection.scalars(query))
                for sample, _ in given:
                    if sample["instance_uuid"] in live:
                        checked[(sample["instance_uuid"], sample["name"])] = sample
            # In key order, as every scheduler writes them: no deadlock between two savers.
            kept = [checked[key] for key in sorted(checked)]
            if kept and max_pushed is not None:
                _check_pushed_names(connection, kept, max_pushed)
            if kept:
                _upsert(connection, kept)
        return len(kept), {host: sorted(uuids) for host, uuids in strays.items()}

    @_retry
    def save_instance_metrics(self, rows: Iterable[Mapping[str, Any]], max_pushed: int | None = None) -> int:
        """Upsert samples ``{instance_uuid, name, value, source ("agent" or "pushed"),
        sampled_at (default: now, the database's time)}``, one transaction; of one instance
        and name the last given wins. Samples of an instance unknown or DELETED are left
        out. Returns how many were saved; ValueError (nothing saved) for a bad row, and
        TooManyMetrics when an instance would hold more than ``max_pushed`` pushed names."""
        return self._save(rows, members_only=False, max_pushed=max_pushed)[0]

    @_retry
    def save_instance_usage(self, reports: Mapping[str, HostReport]
                            ) -> tuple[int, dict[str, list[str]]]:
        """Save the ``instance_usage`` samples of agents' reports (``{host: HostReport}``),
        stamped now, of the instances that are members of a scaling group (not DELETED): the
        samples' only readers, a few among the fleet's instances whose every report carries them.
        A sample is saved only from the report of the host the database places its instance on:
        a report speaks for its own host's instances, never another's. Returns (how many were
        saved, {host: [uuids]} of the members a report sent samples of while the database places
        them elsewhere)."""
        return self._save(report_rows(reports), members_only=True)

    @_retry
    def latest_instance_metrics(self, uuids: Iterable[str], since: TimeValue
                                ) -> dict[str, dict[str, float]]:
        """``{uuid: {name: value}}`` of the samples of ``uuids`` sampled at or after ``since``
        (an older sample counts as missing); an instance without such a sample is left out."""
        since_at = to_db_time(since)
        found: dict[str, dict[str, float]] = {}
        columns = (instance_metrics.c.instance_uuid, instance_metrics.c.name, instance_metrics.c.value)
        with self._transaction() as connection:
            if fastpaths.json_aggregates(connection.dialect, self.fast_paths):
                return _latest_as_json(connection, list(dict.fromkeys(uuids)), since_at)
            for chunk in _chunks(dict.fromkeys(uuids)):
                query = sa.select(*columns).where(instance_metrics.c.instance_uuid.in_(chunk),
                                                  instance_metrics.c.sampled_at >= since_at)
                for uuid, name, value in connection.execute(query):
                    found.setdefault(uuid, {})[name] = value
        return found

    @_retry
    def list_instance_metrics(self, uuids: Iterable[str], per_instance: int | None = None
                              ) -> dict[str, dict[str, dict[str, Any]]]:
        """``{uuid: {name: {value, sampled_at, source}}}`` of the stored samples of ``uuids``,
        however old (for operators: ``berth server metric show``): every one, or the newest
        ``per_instance`` of each instance."""
        found: dict[str, dict[str, dict[str, Any]]] = {}
        m = instance_metrics.c
        with self._transaction() as connection:
            for chunk in _chunks(dict.fromkeys(uuids)):
                query = sa.select(instance_metrics).where(m.instance_uuid.in_(chunk))
                if per_instance is not None:
                    rank = sa.func.row_number().over(partition_by=m.instance_uuid,
                                                     order_by=(m.sampled_at.desc(), m.name)).label("rank")
                    ranked = sa.select(instance_metrics, rank).where(m.instance_uuid.in_(chunk)).subquery()
                    query = sa.select(*(ranked.c[c.name] for c in instance_metrics.columns)).where(
                        ranked.c.rank <= per_instance)
                for row in connection.execute(query.order_by("instance_uuid", "name")).mappings():
                    found.setdefault(row["instance_uuid"], {})[row["name"]] = {
                        "value": row["value"], "sampled_at": to_iso(row["sampled_at"]),
                        "source": row["source"]}
        return found

    @_retry
    def prune_instance_metrics(self, max_age_s: float = 0.0) -> int:
        """Delete the samples of instances DELETED or not in ``instances`` (archived, purged),
        and those older than ``max_age_s`` (the readers' staleness limit) or
        :data:`RETENTION_S`, whichever is longer; how many."""
        cutoff = self.now() - timedelta(seconds=max(max_age_s, RETENTION_S))
        live = sa.select(instances.c.id).where(instances.c.uuid == instance_metrics.c.instance_uuid,
                                               instances.c.state != states.DELETED)
        statement = sa.delete(instance_metrics).where(
            sa.or_(instance_metrics.c.sampled_at < cutoff, ~live.exists()))
        with self._transaction(write=True) as connection:
            return connection.execute(statement).rowcount


def report_rows(reports: Mapping[str, HostReport]) -> list[dict[str, Any]]:
    """The ``instance_metrics`` rows (without their time) of ``{host: report}``, each with the
    ``host`` that reported it: a sample is kept only if the database places its instance on that host."""
    rows: list[dict[str, Any]] = []
    for host, report in reports.items():
        for uuid, samples in (report.instance_usage or {}).items():
            rows.extend({"instance_uuid": uuid, "name": name, "value": value, "source": AGENT, "host": host}
                        for name, value in samples.items())
    return rows
