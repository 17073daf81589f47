"""Deciding where the instances of a segment of requests go: a Plan, and nothing written.

The planner reads (the hints' instances, server groups and hosts) only through the
lookups it is handed (scheduler.planning.lookups), is given the rows of the
instances it admits, and consumes hosts in this scheduler's table as it selects;
what it decides is written, claimed and cast by the Applier.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from berth_contract.request_spec import RequestSpec
from scheduler import rpc, states
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.planning import lookups
from scheduler.planning.plan import (
    Admission,
    Admissions,
    Build,
    Invalid,
    Job,
    Placement,
    Plan,
    Prepared,
    Refusal,
    RowUpdate,
)
from scheduler.policy import hints
from scheduler.policy.filters import BaseHostFilter
from scheduler.policy.selection import Decision
from scheduler.policy.weighers import BaseHostWeigher
from scheduler.telemetry import scheduler_metrics as telemetry

LOG = logging.getLogger(__name__)

#: Runs a compensation should the transaction that decided it roll back (UndoLog.add).
Compensate = Callable[..., None]


def job_context(item: tuple[Any, ...]) -> Any:
    """The context of an item ((Job or Admission, ...), ...) of a loop over jobs."""
    first = item[0]
    return (first.job if isinstance(first, Admission) else first).context


class Planner:
    """Admission, checks and selection of a segment's requests, into a Plan."""

    def __init__(self, conf: Any, stored: lookups.Lookups, hosts: Any, selector: Any, compensate: Compensate,
                 installed_filters: dict[str, type[BaseHostFilter]],
                 installed_weighers: dict[str, type[BaseHostWeigher]]) -> None:
        self._conf = conf
        self._stored = stored  # the hints' instances, their hosts, server groups: read, never written
        self._hosts = hosts
        self.selector = selector
        self._compensate = compensate
        self._installed_filters = installed_filters
        self._installed_weighers = installed_weighers
        #: Adds the fragmentation hint to a refusal's reason (FragmentationHints), if set.
        self.fragmentation: Any = None

    # -- what each message should do ----------------------------------------

    def begin_attempt(self, jobs: Iterable[Job]) -> None:
        """Count the attempt."""
        for job in jobs:
            job.spec.retry.num_attempts += 1

    def admit(self, jobs: Sequence[Job], rows: dict[str, dict[str, Any]]) -> Admissions:
        """What each job's message should place, given the rows of its instances.

        A redelivered request places nothing twice: its instances that are
        SCHEDULED already are returned apart, to have their builds sent again.
        A reschedule applies only while the instance is still on the host that
        sent it back, at the attempt that host was given: a reschedule delivered
        twice, or sent back late by a host the instance has left, changes nothing.
        A send-back naming an instance the database does not have is refused whole:
        an agent may not boot what it was never given.
        An instance named twice in a batch is placed by the first request naming it.
        """
        admitted = Admissions(each=[], new=set(), expected={}, deleted=[])
        taken: set[str] = set()
        for job in rpc.each_request(jobs, lambda job: job.context):
            sender = job.spec.retry.hosts[-1][0] if job.spec.retry.hosts else None
            if sender is not None:
                unknown = [u for u in job.spec.instance_uuids if u not in rows]
                if unknown:
                    admitted.invalid.append(Invalid(job, unknown_sent_back(job.spec, sender, unknown),
                                                    recorded=False))
                    continue
            admission = Admission(job, [], [])
            for instance_uuid in job.spec.instance_uuids:
                if instance_uuid in taken:
                    LOG.info("Instance %s is named twice in a batch: placed once", instance_uuid)
                    continue
                if sender is None:
                    dealt_with = self._admit(admission, instance_uuid, rows.get(instance_uuid), admitted)
                else:  # each has a row: a send-back naming one that has none is refused above
                    dealt_with = self._admit_sent_back(admission, instance_uuid, rows[instance_uuid], sender,
                                                       admitted)
                if dealt_with:
                    taken.add(instance_uuid)
            admitted.each.append(admission)
        admitted.new = taken - set(rows) - set(admitted.deleted)
        return admitted

    def _admit_sent_back(self, admission: Admission, instance_uuid: str, row: dict[str, Any], sender: str,
                         admitted: Admissions) -> bool:
        """Admit one instance of a reschedule (its row read); whether the batch has dealt with it.
        What the instance held on the host that sent it back is given back."""
        attempt = admission.job.spec.retry.num_attempts - 1
        if (row["host"], row["attempts"]) != (sender, attempt):
            LOG.info("Instance %s: reschedule sent back by %s (attempt %d) ignored: the instance is "
                     "on %s (attempt %s) now", instance_uuid, sender, attempt, row["host"] or "no host",
                     row["attempts"])
            return False
        self._hosts.release(sender, instance_uuid)
        if row["state"] in states.RESCHEDULABLE:
            admission.to_place.append(instance_uuid)
            admitted.expected[instance_uuid] = {"state": states.RESCHEDULABLE, "host": sender,
                                                "attempts": attempt}
            return True
        return self._admit(admission, instance_uuid, row, admitted)

    def _admit(self, admission: Admission, instance_uuid: str, row: dict[str, Any] | None,
               admitted: Admissions) -> bool:
        """Admit one instance; whether the batch has dealt with it (placed, or deleted)."""
        state = (row or {}).get("state")
        if state is None or state == states.SCHEDULING:
            admission.to_place.append(instance_uuid)
            if row is not None:
                admitted.expected[instance_uuid] = {"state": (states.SCHEDULING,), "host": row["host"],
                                                    "attempts": row["attempts"]}
            return True
        if state == states.DELETING:
            admitted.deleted.append(instance_uuid)
            return True
        LOG.info("Instance %s is %s already: not scheduled again", instance_uuid, state)
        if state == states.SCHEDULED:
            admission.placed.append(row)  # type: ignore[arg-type]
        return False

    def prepare(self, admitted: Admissions) -> Prepared:
        """The jobs to place, past the attempt limit and the hints' checks; the others refused.

        A request for new instances only (no row yet) that fails those checks is
        invalid, whatever the fleet: it is refused once, as a whole, and none of the
        instances it asks for is recorded, but those it names. Instances that have
        rows (reschedules) go to ERROR with the reason."""
        max_attempts = self._conf.scheduler.max_attempts
        prepared = Prepared(placing=[], refusals=[], resends=[], invalid=list(admitted.invalid))
        for admission in rpc.each_request(admitted.each, lambda admission: admission.job.context):
            context, spec = admission.job.context, admission.job.spec
            if getattr(context, "redelivered", False):
                # This message may have been decided and committed by a worker that died
                # before its casts were confirmed: send them again (agents build once).
                for instance in admission.placed:
                    limits = (instance.get("filter_properties") or {}).get("limits") or {}
                    prepared.resends.append(build(context, spec, instance["uuid"], instance["host"], limits))
            if not admission.to_place:
                continue
            spec.instance_uuids = admission.to_place
            fresh = not spec.retry.hosts and all(u in admitted.new for u in spec.instance_uuids)
            if self.hosts_tried(spec) > max_attempts:
                if fresh:
                    prepared.invalid.append(Invalid(admission.job, InvalidRequest(
                        f"run_instance: filter_properties.retry.num_attempts: a new request is past "
                        f"[scheduler] max_attempts ({max_attempts})")))
                    continue
                reason = f"Exceeded maximum number of attempts ({max_attempts})"
                if spec.retry.exc_reason:
                    reason += f"; last failure: {spec.retry.exc_reason}"
                LOG.info("Instances %s: %s", ", ".join(spec.instance_uuids), reason)
                prepared.refusals.append(Refusal(spec, reason, telemetry.ERROR))
                continue
            try:
                # zone, server group, same/different host hints; then whether they can be honoured
                lookups.prepare_spec(self._stored, spec, add_members=False)
                self.check_honoured(spec)
            except lookups.InvalidHint as exc:
                if fresh:
                    prepared.invalid.append(Invalid(admission.job, exc))
                    continue
                LOG.info("Instances %s: %s", ", ".join(spec.instance_uuids), exc)
                prepared.refusals.append(Refusal(spec, str(exc), telemetry.NO_VALID_HOST))
                continue
            except NoValidHost as exc:
                LOG.info("Instances %s: %s", ", ".join(spec.instance_uuids), exc)
                prepared.refusals.append(Refusal(spec, str(exc), telemetry.NO_VALID_HOST))
                continue
            prepared.placing.append(admission.job)
        return prepared

    def retry_host(self, spec: RequestSpec) -> str | None:
        """The host that sent ``spec`` back, when it builds it again ([scheduler]
        build_retries_same_host), else None."""
        if not spec.retry.hosts:
            return None  # a first attempt: the option is not read (a lookup per placement)
        retries = self._conf.scheduler.build_retries_same_host
        if not retries or spec.retry.timed_out:
            return None
        host = spec.retry.hosts[-1][0]
        return host if spec.retry.trailing(host) <= retries else None

    def hosts_tried(self, spec: RequestSpec) -> int:
        """The hosts this attempt makes: max_attempts counts them, not a build tried again on its host."""
        again = self.retry_host(spec) is not None
        return spec.retry.num_attempts - spec.retry.same_host_retries() - again

    def check_honoured(self, spec: RequestSpec) -> None:
        """Raise InvalidHint when no enabled plugin honours a hint, the zone or the group
        policy the request asks for (scheduler.policy.hints)."""
        why = hints.unhonoured(spec, self.selector.filters + self.selector.weighers,
                               self._installed_filters, self._installed_weighers)
        if why is not None:
            raise lookups.InvalidHint(f"Request refused: {why}")

    # -- where they go --------------------------------------------------------

    @property
    def hosts(self) -> Any:
        """The scheduler's hosts (HostManager): its table and lock."""
        return self._hosts

    def select(self, spec: RequestSpec, decided: dict[str, Decision] | None = None,
               among: list[Any] | None = None, unplaced: dict[str, NoValidHost] | None = None,
               whole_fleet: bool = False) -> list[Placement]:
        """A Placement for each instance of ``spec``, consumed in this scheduler's table and given
        back should the transaction that records them roll back; how each host was chosen into
        ``decided`` ({uuid: Decision}). ``among``: only these hosts (views of the table) are
        considered. ``whole_fleet``: a move, weighed on the whole fleet whoever owns the hosts
        (Selector.select). Raises NoValidHost.

        A request for as many as fit may get fewer placements than instances: each instance
        left out goes into ``unplaced`` with the NoValidHost that stopped the placing."""
        decisions: list[Decision] | None = None if decided is None else []
        short: list[NoValidHost] = []
        chosen = None if among is not None else self._select_again(spec, decisions)
        if chosen is None:
            hosts = self._hosts.table if among is None else among
            chosen = self.selector.select(hosts, spec, decisions, LOG.isEnabledFor(logging.DEBUG), short,
                                          whole_fleet)
        if decisions and decided is not None:
            decided.update(zip(spec.instance_uuids, decisions, strict=False))
        if unplaced is not None:
            for instance_uuid in spec.instance_uuids:
                unplaced.pop(instance_uuid, None)  # placed again: after a claim conflict
            unplaced.update((instance_uuid, short[0]) for instance_uuid in spec.instance_uuids[len(chosen):])
        placements = []
        for host, instance_uuid in zip(chosen, spec.instance_uuids, strict=False):
            self._compensate(self._hosts.release, host.host, instance_uuid)
            placements.append(Placement(instance_uuid, host.host, host.nodename, dict(host.limits)))
        return placements

    def _select_again(self, spec: RequestSpec, decisions: list[Decision] | None) -> list[Any] | None:
        """The host that failed to build ``spec``, chosen again if it still passes the filters;
        None to choose among the others. Raises NoValidHost when max_attempts leaves no other."""
        host = self.retry_host(spec)
        if host is None:
            return None
        uuids = ", ".join(spec.instance_uuids)
        retry, retries = spec.retry.trailing(host), self._conf.scheduler.build_retries_same_host
        table = self._hosts.table
        row = table.index.get(host)
        why = "it is no longer in the host table"
        if row is not None:
            # Without its own failures in the retry record, RetryFilter keeps the host for this choice.
            tried = dataclasses.replace(spec.retry, hosts=spec.retry.hosts[:-retry])
            again = dataclasses.replace(spec, retry=tried)
            detail = LOG.isEnabledFor(logging.DEBUG)
            try:
                chosen = self.selector.select([table.view(row)], again, decisions, detail)
            except NoValidHost as exc:
                why = f"it no longer passes the filters ({exc})"
            else:
                LOG.info("Instances %s: built again on %s, which failed to build them (retry %d of %d, "
                         "[scheduler] build_retries_same_host)", uuids, host, retry, retries)
                return chosen
        max_attempts = self._conf.scheduler.max_attempts
        if spec.retry.num_attempts - spec.retry.same_host_retries() > max_attempts:
            raise NoValidHost(f"Not built again on {host}: {why}; [scheduler] max_attempts ({max_attempts}) "
                              f"leaves no other host to try; last failure: {spec.retry.exc_reason}")
        LOG.info("Instances %s: not built again on %s: %s; placed on another host", uuids, host, why)
        return None

    def plan(self, admitted: Admissions, prepared: Prepared,
             outcomes: Sequence[list[Placement] | NoValidHost], decided: dict[str, Decision],
             now: Any, unplaced: dict[str, NoValidHost] | None = None) -> Plan:
        """The Plan of a segment: rows for what was placed and refused, builds for what was placed.
        ``unplaced``: the instances of requests for as many as fit that did not fit (Planner.select)."""
        plan = Plan(deleted=admitted.deleted, group_members=[job.spec for job in prepared.placing],
                    resends=prepared.resends, refusals=prepared.refusals, invalid=prepared.invalid)
        # The request each new instance is booted by: ``berth server show`` names it, every log line
        # carries it.
        booted_by = {u: rpc.request_id_of(admission.job.context)
                     for admission in admitted.each for u in admission.job.spec.instance_uuids}
        for job, placements in rpc.each_request(zip(prepared.placing, outcomes, strict=True), job_context):
            spec = job.spec
            if isinstance(placements, NoValidHost):
                reason = str(placements) if self.fragmentation is None else self.fragmentation.reason(
                    spec, placements)
                if spec.retry.exc_reason and spec.retry.hosts and "last failure: " not in reason:
                    # A reschedule with no host left: the build's own failure is what the user needs.
                    reason += f"; last failure: {spec.retry.exc_reason}"
                LOG.info("Instances %s: %s", ", ".join(spec.instance_uuids), reason)
                plan.refusals.append(Refusal(spec, reason, telemetry.NO_VALID_HOST, placements.removed))
                continue
            if len(placements) < spec.num_instances:
                plan.refusals.append(self._shortfall(job, len(placements), unplaced or {}))
            for placement in placements:
                instance_uuid = placement.instance_uuid
                request_spec, filter_properties = spec.instance_to_wire(instance_uuid)
                filter_properties["limits"] = placement.limits
                values = {"state": states.SCHEDULED, "host": placement.host, "node": placement.node,
                          "attempts": spec.retry.num_attempts, "scheduled_at": now,
                          "filter_properties": filter_properties}
                if instance_uuid in admitted.new:  # created when scheduled, not a moment after
                    wire = (request_spec, filter_properties)
                    created = dict(values, created_at=now, request_id=booted_by.get(instance_uuid))
                    plan.creates.append(instance_record(spec, instance_uuid, wire, created))
                else:
                    plan.updates.append(RowUpdate(instance_uuid, values, admitted.expected[instance_uuid]))
                plan.builds.append(Build(job.context, spec, instance_uuid, placement.host, request_spec,
                                         filter_properties, decided.get(instance_uuid)))
        for refusal in plan.refusals:
            for instance_uuid in refusal.spec.instance_uuids:
                values = {"state": states.ERROR, "fault_reason": refusal.reason, "host": None, "node": None}
                if refusal.spec.min_instances is not None:
                    # Asked for as many as fit: those that did not are not booted, nothing to clean up.
                    values.update(state=states.DELETED, deleted_at=now)
                if instance_uuid in admitted.new:
                    plan.creates.append(instance_record(refusal.spec, instance_uuid, values=dict(
                        values, request_id=booted_by.get(instance_uuid))))
                else:
                    plan.updates.append(RowUpdate(instance_uuid, values, admitted.expected[instance_uuid]))
        for invalid in plan.invalid:
            spec = invalid.job.spec
            # Their client looks for them: it finds why they are not built.
            if invalid.recorded and spec.uuids_named:
                reason = f"Invalid request: {invalid.error}"
                plan.creates.extend(refused_record(spec, uuid, reason, booted_by.get(uuid))
                                    for uuid in spec.instance_uuids)
        return plan


    def _shortfall(self, job: Job, placed: int, unplaced: dict[str, NoValidHost]) -> Refusal:
        """The refusal of the instances of ``job`` past the ``placed`` first, which did not fit;
        the job's request is cut down to those placed."""
        spec = job.spec
        left_out = spec.instance_uuids[placed:]
        why = unplaced[left_out[0]]
        reason = (f"Not placed: {placed} of {spec.num_instances} fit, and the request asked for as many "
                  f"as fit (at least {spec.at_least}); {why}")
        LOG.info("Instances %s: %s", ", ".join(left_out), reason)
        refused = dataclasses.replace(spec, instance_uuids=left_out)
        spec.instance_uuids = spec.instance_uuids[:placed]  # what is booted, and joins its server group
        return Refusal(refused, reason, telemetry.NO_VALID_HOST, why.removed)


def build(context: Any, spec: RequestSpec, instance_uuid: str, host: str, limits: dict[str, Any],
          decision: Decision | None = None) -> Build:
    """The build of one instance of ``spec`` on ``host``, against ``limits``."""
    request_spec, filter_properties = spec.instance_to_wire(instance_uuid)
    filter_properties["limits"] = limits
    return Build(context, spec, instance_uuid, host, request_spec, filter_properties, decision)


def unknown_sent_back(spec: RequestSpec, sender: str, unknown: list[str]) -> InvalidRequest:
    """The refusal of a send-back from ``sender`` naming ``unknown``, instances the database does not have."""
    if not spec.uuids_named:
        named = f"no instance (it asks for {spec.num_instances} by count)"
    else:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        named = (f"instance{'s' if len(unknown) > 1 else ''} {shown}, which the database does not have "
                 f"on {sender}")
    return InvalidRequest(f"run_instance: a send-back from {sender} names {named}: refused, nothing created")


def refused_record(spec: RequestSpec, instance_uuid: str, reason: str,
                   request_id: str | None = None) -> dict[str, Any]:
    """The row of an instance a request named and that is refused as invalid: its fault and
    what a listing shows, not the request (it is dead-lettered whole)."""
    return {"uuid": instance_uuid, "state": states.ERROR, "fault_reason": reason, "request_id": request_id,
            "project_id": spec.project_id, "display_name": spec.display_names.get(instance_uuid),
            "flavor_name": spec.flavor.name,
            "memory_mb": spec.flavor.memory_mb, "root_gb": spec.flavor.root_gb,
            "ephemeral_gb": spec.flavor.ephemeral_gb, "vcpus": spec.flavor.vcpus, "attempts": 0}


def instance_record(spec: RequestSpec, instance_uuid: str, wire: tuple[dict, dict] | None = None,
                    values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The row of a new instance of ``spec``: in SCHEDULING unless ``values`` say otherwise.
    ``wire``: its (request_spec, filter_properties) when already built."""
    request_spec, filter_properties = wire or spec.instance_to_wire(instance_uuid)
    record = {
        "uuid": instance_uuid,
        "project_id": spec.project_id,
        "state": states.SCHEDULING,
        "display_name": spec.display_names.get(instance_uuid),
        "flavor_name": spec.flavor.name,
        "memory_mb": spec.flavor.memory_mb,
        "root_gb": spec.flavor.root_gb,
        "ephemeral_gb": spec.flavor.ephemeral_gb,
        "vcpus": spec.flavor.vcpus,
        "request_spec": request_spec,
        "filter_properties": filter_properties,
        "attempts": 0,
    }
    if values:
        record.update(values)
    return record
