"""The jobs and job_steps tables: drains and rebalance plans the schedulers carry on
(scheduler.moves.jobs), their leases, and the steps of a drain.

A job is held by one scheduler at a time, by lease, as the scaling groups are
(scheduler.db.scaling_groups): each period a scheduler claims the jobs it may carry on
(:meth:`JobQueries.claim_jobs`: those it holds, those held by nobody or whose lease
expired), which bumps each one's ``version``; what it then writes of a job is a
compare-and-set on that version (:meth:`JobQueries.set_job`), and each step's change a
compare-and-set on the step's status (:meth:`JobQueries.set_job_step`). A scheduler whose
lease was taken over, or that acts on a message delivered twice, writes nothing.
"""

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from scheduler.db.engine import DatabaseEngine, TimeValue, _retry, to_db_time
from scheduler.db.models import job_steps, jobs, migrations
from scheduler.db.rows import _row_dict

DRAIN, REBALANCE = "drain", "rebalance"
KINDS = (DRAIN, REBALANCE)
RUNNING, STOPPING, DONE, STOPPED = "running", "stopping", "done", "stopped"
#: Every state of a job; ACTIVE ones are carried on, ENDED ones never change again.
JOB_STATES = (RUNNING, STOPPING, DONE, STOPPED)
ACTIVE = (RUNNING, STOPPING)
ENDED = (DONE, STOPPED)
PENDING, STEP_RUNNING, STEP_DONE, FAILED = "pending", "running", "done", "failed"
STEP_STATUSES = (PENDING, STEP_RUNNING, STEP_DONE, FAILED)
#: list_jobs answers with at most this many, the newest.
MAX_LISTED = 100

#: What set_job may write (the version, the lease and the times are the queries').
_JOB_VALUES = frozenset({"state", "reason", "max_parallel"})
_STEP_VALUES = frozenset({"status", "migration_id", "dest_host", "reason"})


def active_key(kind: str, host: str | None = None, plan_id: int | None = None) -> str:
    """What one job at a time may hold while it is not ended: the host drained, the plan applied."""
    return f"{kind}:{host if kind == DRAIN else plan_id}"


class JobQueries(DatabaseEngine):
    """Jobs created, read, claimed by lease, and compared-and-set."""

    @_retry
    def create_job(self, kind: str, max_parallel: int, host: str | None = None, plan_id: int | None = None,
                   live: bool = False, timeout: int | None = None,
                   instance_uuids: Sequence[str] = ()) -> dict[str, Any] | None:
        """A new job (running), a drain's steps one per instance of ``instance_uuids`` (pending,
        in order); None when a job that is not ended holds its host or plan already."""
        if kind not in KINDS:
            raise ValueError(f"job kind must be one of {', '.join(KINDS)}, got {kind!r}")
        now = self.now()
        values = {"kind": kind, "state": RUNNING, "host": host, "plan_id": plan_id,
                  "active_key": active_key(kind, host, plan_id), "live": bool(live),
                  "max_parallel": max_parallel, "timeout": timeout,
                  "deadline": None if timeout is None else now + timedelta(seconds=timeout),
                  "version": 0, "created_at": now, "updated_at": now}
        with self._transaction(write=True) as connection:
            try:
                with connection.begin_nested():  # a clash undoes this insert alone
                    inserted = connection.execute(jobs.insert().values(values))
                    (job_id,) = inserted.inserted_primary_key or (None,)
            except sa_exc.IntegrityError:
                return None
            if instance_uuids:
                connection.execute(job_steps.insert(), [
                    {"job_id": job_id, "position": position, "instance_uuid": uuid, "status": PENDING,
                     "updated_at": now} for position, uuid in enumerate(instance_uuids, 1)])
        assert job_id is not None
        found = self.get_job(job_id)
        assert found is not None
        return found

    @_retry
    def get_job(self, job_id: int) -> dict[str, Any] | None:
        """The job with its ``steps`` in order (a drain's; a rebalance job's are its plan's), or None."""
        with self._transaction() as connection:
            row = connection.execute(sa.select(jobs).where(jobs.c.id == job_id)).mappings().first()
            if row is None:
                return None
            steps = connection.execute(sa.select(job_steps).where(job_steps.c.job_id == job_id)
                                       .order_by(job_steps.c.position)).mappings().all()
        return {**_row_dict(row), "steps": [_row_dict(s) for s in steps]}

    @_retry
    def list_jobs(self, kind: str | None = None, host: str | None = None, plan_id: int | None = None,
                  active: bool = False, limit: int = MAX_LISTED) -> list[dict[str, Any]]:
        """Jobs newest first, without their steps: of ``kind``, draining ``host``, applying
        ``plan_id``, only those not ended if ``active``."""
        statement = sa.select(jobs).order_by(jobs.c.id.desc()).limit(limit)
        for column, value in ((jobs.c.kind, kind), (jobs.c.host, host), (jobs.c.plan_id, plan_id)):
            if value is not None:
                statement = statement.where(column == value)
        if active:
            statement = statement.where(jobs.c.state.in_(ACTIVE))
        with self._transaction() as connection:
            return [_row_dict(row) for row in connection.execute(statement).mappings()]

    # -- leases ---------------------------------------------------------------

    @_retry
    def claim_jobs(self, owner: str, now: TimeValue, lease_seconds: float,
                   limit: int) -> list[dict[str, Any]]:
        """The jobs not ended that ``owner`` holds for ``lease_seconds`` from ``now`` (the
        database's clock), at most ``limit``, oldest first: those it held already, then those
        held by nobody or whose lease expired. Each claim bumps the job's version: the version
        returned is the one to write with. A job another scheduler is claiming right now is
        left to it (FOR UPDATE SKIP LOCKED; SQLite has one writer at a time)."""
        start = to_db_time(now)
        claimable = sa.and_(jobs.c.state.in_(ACTIVE), sa.or_(
            jobs.c.lease_owner.is_(None), jobs.c.lease_owner == owner,
            jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= start))
        lease = {"lease_owner": owner, "lease_expires_at": start + timedelta(seconds=lease_seconds),
                 "version": jobs.c.version + 1}
        with self._transaction(write=True) as connection:
            ids = connection.scalars(
                sa.select(jobs.c.id).where(claimable)
                .order_by(sa.case((jobs.c.lease_owner == owner, 0), else_=1), jobs.c.id)
                .limit(limit).with_for_update(skip_locked=True)).all()
            if not ids:
                return []
            connection.execute(sa.update(jobs).where(jobs.c.id.in_(ids), claimable).values(lease))
            rows = connection.execute(sa.select(jobs).where(
                jobs.c.id.in_(ids), jobs.c.lease_owner == owner,
                jobs.c.lease_expires_at == lease["lease_expires_at"]).order_by(jobs.c.id)).mappings().all()
        return [_row_dict(row) for row in rows]

    @_retry
    def release_jobs(self, owner: str) -> int:
        """Give up ``owner``'s leases: another scheduler may claim its jobs at once. How many."""
        statement = sa.update(jobs).where(jobs.c.lease_owner == owner).values(
            lease_owner=None, lease_expires_at=None, version=jobs.c.version + 1)
        with self._transaction(write=True) as connection:
            return int(connection.execute(statement).rowcount)

    # -- compare-and-set -----------------------------------------------------

    @_retry
    def set_job(self, job_id: int, version: int, values: Mapping[str, Any]) -> int | None:
        """Compare-and-set: the job takes ``values`` (state, reason, max_parallel) if its version is
        ``version``; the new version, or None when another write came first. An ended state
        lets go of the host or plan (another job may take it) and of the lease."""
        unknown = set(values) - _JOB_VALUES
        if unknown:
            raise ValueError(f"not job columns: {', '.join(sorted(unknown))}")
        if values.get("state", RUNNING) not in JOB_STATES:
            raise ValueError(f"job state must be one of {', '.join(JOB_STATES)}, got {values['state']!r}")
        now = self.now()
        written: dict[str, Any] = {**values, "version": version + 1, "updated_at": now}
        if values.get("state") in ENDED:
            written.update(finished_at=now, active_key=None, lease_owner=None, lease_expires_at=None)
        statement = sa.update(jobs).where(jobs.c.id == job_id, jobs.c.version == version).values(written)
        with self._transaction(write=True) as connection:
            return version + 1 if connection.execute(statement).rowcount == 1 else None

    @_retry
    def stop_job(self, job_id: int, reason: str) -> bool:
        """An operator's stop: the job goes from running to stopping with ``reason``, whatever
        its version (which it bumps: the scheduler carrying it on re-reads it). False when it
        was not running."""
        statement = (sa.update(jobs).where(jobs.c.id == job_id, jobs.c.state == RUNNING)
                     .values(state=STOPPING, reason=reason, version=jobs.c.version + 1,
                             updated_at=self.now()))
        with self._transaction(write=True) as connection:
            return bool(connection.execute(statement).rowcount == 1)

    @_retry
    def set_job_step(self, job_id: int, position: int, expected_status: str,
                     values: Mapping[str, Any]) -> bool:
        """Compare-and-set: the step takes ``values`` (status, migration_id, dest_host, reason)
        if its status is ``expected_status``."""
        unknown = set(values) - _STEP_VALUES
        if unknown:
            raise ValueError(f"not job step columns: {', '.join(sorted(unknown))}")
        statement = (sa.update(job_steps)
                     .where(job_steps.c.job_id == job_id, job_steps.c.position == position,
                            job_steps.c.status == expected_status)
                     .values({**values, "updated_at": self.now()}))
        with self._transaction(write=True) as connection:
            return bool(connection.execute(statement).rowcount == 1)

    # -- what the steps' migrations say -----------------------------------------

    @_retry
    def migrations_by_id(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """{id: {status, dest_host, reason}} of the migrations ``ids`` (those that exist)."""
        ids = sorted(set(ids))
        if not ids:
            return {}
        statement = sa.select(migrations.c.id, migrations.c.status, migrations.c.dest_host,
                              migrations.c.reason).where(migrations.c.id.in_(ids))
        with self._transaction() as connection:
            return {row["id"]: dict(row) for row in connection.execute(statement).mappings()}
