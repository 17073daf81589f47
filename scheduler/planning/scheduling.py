"""Placing a batch of requests: the planner decides each segment, the applier commits it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from berth_contract.request_spec import RequestSpec
from scheduler.exception import NoValidHost
from scheduler.planning import lookups
from scheduler.planning.applier import Applier
from scheduler.planning.plan import Invalid, Job, Placement
from scheduler.planning.planner import Planner
from scheduler.policy.selection import Decision


class Scheduling:
    def __init__(self, database: Any, planner: Planner, applier: Applier) -> None:
        self._db = database
        self.planner = planner
        self.applier = applier

    def schedule(self, jobs: Sequence[Job]) -> list[Invalid]:
        """Place the requests of ``jobs``, in order; the requests refused as invalid (see
        Planner.prepare), for the caller to refuse.

        A request whose hints read where instances are (a server group,
        same_host, different_host) sees the placements of the requests before
        it: those are committed first.
        """
        segment: list[Job] = []
        invalid: list[Invalid] = []
        for job in jobs:
            if segment and lookups.reads_placements(job.spec):
                invalid += self._schedule_segment(segment)
                segment = []
            segment.append(job)
        if segment:
            invalid += self._schedule_segment(segment)
        return invalid

    def _schedule_segment(self, jobs: list[Job]) -> list[Invalid]:
        """Place the requests of ``jobs`` in one go: their rows written together, then the
        builds cast to the agents (through the outbox: out once the batch commits)."""
        planner = self.planner
        planner.begin_attempt(jobs)
        rows = self._db.get_instances([u for job in jobs for u in job.spec.instance_uuids])
        admitted = planner.admit(jobs, rows)
        prepared = planner.prepare(admitted)
        decided: dict[str, Decision] = {}
        unplaced: dict[str, NoValidHost] = {}
        now = self._db.now()

        def select(spec: RequestSpec) -> list[Placement]:
            return planner.select(spec, decided, unplaced=unplaced)

        outcomes = self.applier.place([job.spec for job in prepared.placing], select)
        plan = planner.plan(admitted, prepared, outcomes, decided, now, unplaced)
        self.applier.commit(plan)
        return plan.invalid
