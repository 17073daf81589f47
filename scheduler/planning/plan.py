"""What a scheduling decision is made of: the jobs it was asked, and the plan it returns.

The planner decides, the applier commits: the plan is everything the one tells
the other, as a Nomad scheduler hands its plan to the planner that applies it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from berth_contract.request_spec import RequestSpec
from scheduler.policy.selection import Decision


@dataclasses.dataclass
class Job:
    """One run_instance message (or a reschedule): who asked, and what."""

    context: Any
    spec: RequestSpec


@dataclasses.dataclass
class Admission:
    """What a job's message should still do, given the instances' rows."""

    job: Job
    #: The instances it should place now.
    to_place: list[str]
    #: The rows of its instances that are SCHEDULED already: a redelivered request sends their builds again.
    placed: list[dict[str, Any]]


@dataclasses.dataclass
class Admissions:
    """The admissions of a segment's jobs, and what their rows said."""

    each: list[Admission]
    #: Of the instances to place, those that have no row yet.
    new: set[str]
    #: For those that have one, what the row must still hold when it is written ({column: expected}).
    expected: dict[str, dict[str, Any]]
    #: Instances deleted before they were placed: DELETED now, not placed.
    deleted: list[str]
    #: Send-backs naming an instance the database does not have: refused, nothing recorded.
    invalid: list[Invalid] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Placement:
    """One instance on one host, consumed in this scheduler's table."""

    instance_uuid: str
    host: str
    node: str
    limits: dict[str, Any]


@dataclasses.dataclass
class Build:
    """A build cast to an agent, once what decided it is committed."""

    context: Any
    spec: RequestSpec
    instance_uuid: str
    host: str
    request_spec: dict[str, Any]
    filter_properties: dict[str, Any]
    #: How the host was chosen (None for a build sent again): what the scheduler logs.
    decision: Decision | None = None


@dataclasses.dataclass
class Refusal:
    """A request that will not be placed, with the reason its instances show."""

    spec: RequestSpec
    reason: str
    #: The placement outcome it counts as (scheduler.telemetry.scheduler_metrics: ERROR, NO_VALID_HOST).
    outcome: str
    #: (filter, hosts it removed) when the filters refused every host.
    removed: tuple[tuple[str, int], ...] = ()


@dataclasses.dataclass
class Invalid:
    """A request for new instances only that fails the checks before placing, whatever the
    fleet (a hint naming nothing, past max_attempts), or a send-back naming an instance the
    database does not have: refused once, as a whole (dead-lettered), and recorded only on
    the instances a client's request names, as its client looks for them."""

    job: Job
    error: Exception
    #: Whether the instances it names get a row saying why (not those of a forged send-back).
    recorded: bool = True


@dataclasses.dataclass
class Prepared:
    """A segment's requests after the checks before placing."""

    #: The jobs to place, cut down to the instances still to place.
    placing: list[Job]
    #: Requests refused before placing: their instances go to ERROR with the reason.
    refusals: list[Refusal]
    #: Builds decided before, to send again (a request delivered again).
    resends: list[Build]
    invalid: list[Invalid]


@dataclasses.dataclass
class RowUpdate:
    """A placement (or refusal) of an instance that has a row: written only if the row is
    still as it was read."""

    instance_uuid: str
    values: dict[str, Any]
    expected: dict[str, Any]


@dataclasses.dataclass
class Plan:
    """What one segment of a batch decided: the rows to write, the builds to send, the refusals
    to count. Nothing of it is done until the applier commits it."""

    #: Rows of new instances, placed or refused.
    creates: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Placements and refusals of instances that have a row.
    updates: list[RowUpdate] = dataclasses.field(default_factory=list)
    #: Instances deleted before they were placed, to record as DELETED.
    deleted: list[str] = dataclasses.field(default_factory=list)
    #: New members of the server groups of the requests placed.
    group_members: list[RequestSpec] = dataclasses.field(default_factory=list)
    #: Builds of the instances placed, cast once the rows are committed.
    builds: list[Build] = dataclasses.field(default_factory=list)
    #: Builds decided before (a request delivered again), cast again: agents build once.
    resends: list[Build] = dataclasses.field(default_factory=list)
    refusals: list[Refusal] = dataclasses.field(default_factory=list)
    #: Requests refused as invalid: the rows of the instances they name.
    invalid: list[Invalid] = dataclasses.field(default_factory=list)
