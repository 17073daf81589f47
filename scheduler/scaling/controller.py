"""The scaling groups' controller: Kubernetes' reconcileAutoscaler and ReplicaSet, for the
groups this scheduler process holds.

Each sync (:meth:`ScalingController.sync_once`) claims the groups whose lease this owner
holds or may take, and for each one reads its members and history, plans the sync
(:func:`scheduler.scaling.sync_plan.plan_sync`: the count, the members to delete and to
create), and brings the members to the count decided:
new members' rows are written with the sync (one compare-and-set on the group's version)
and their builds cast after it commits; the members a scale-down removes are marked
DELETING and their deletes cast after it commits. A controller whose lease was taken
over writes nothing and casts nothing.

The groups go by chunks of ``SYNC_CHUNK`` (see scheduler/db/scaling_syncs.py): a chunk's
members and history are read in a few queries and its members' samples asked for at
once; its groups' records, new members included, are written in one transaction, still a
compare-and-set on each group's version (should that transaction fail, each group's is
written alone); its scale-downs' members are marked DELETING in one statement.

Whatever a controller that died between its commit and its casts left undone is found
again by the next one: members SCHEDULING without a host, or DELETING, whose row has not
changed for ``cast_grace_s`` get their cast again (the scheduler places a SCHEDULING row
once and deletes a DELETED one never, so a cast sent twice does nothing more).

No threads and no I/O of its own: the database, the casts, the metrics and the clock come in.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from scheduler import states
from scheduler.db.engine import DatabaseUnavailable, to_db_time, to_iso
from scheduler.db.scaling_syncs import SCALE_EVENTS_KEPT_S, SyncRecord
from scheduler.scaling import decide as policy
from scheduler.scaling import members as group_members
from scheduler.scaling import settled
from scheduler.scaling import status as group_status
from scheduler.scaling.behavior import history_horizon_s
from scheduler.scaling.members import COUNTED_STATES, TemplateError
from scheduler.scaling.replicas import Members
from scheduler.scaling.spec import (
    EXTERNAL,
    GroupSpec,
    Readiness,
    Recommendation,
    ScaleEvent,
    SpecError,
    parse_spec,
)
from scheduler.scaling.sync_plan import Backoff, History, PlanSettings, SyncPlan, plan_sync
from scheduler.utils import jsonutils
from scheduler.utils.log_once import LogOnce

LOG = logging.getLogger(__name__)
#: A group held to max_members is said once an hour.
_LIMITED = LogOnce(LOG, interval=3600.0)

#: cast_run_instance(request_spec, filter_properties): SchedulerClient.run_instance's wire dicts.
RunInstanceCast = Callable[[dict[str, Any], dict[str, Any]], None]
#: cast_run_instances([(request_spec, filter_properties), ...]): several at once, each a request
#: of its own (SchedulerClient.run_instances: one message where the API allows bundles).
RunInstancesCast = Callable[[list[tuple[dict[str, Any], dict[str, Any]]]], None]
#: cast_delete_instance(instance_uuid).
DeleteInstanceCast = Callable[[str], None]

SYNCED = "synced"
PAUSED = "paused"
DELETING = "deleting"
REMOVED = "removed"
LOST = "lost"  # the group was written since it was claimed: nothing written, nothing cast
FAILED = "failed"

#: The states whose members' casts may be lost: SCHEDULING (build) and DELETING (delete).
_RECAST_STATES = frozenset({states.SCHEDULING, states.DELETING})
#: Groups read, decided and written together.
SYNC_CHUNK = 500
_ANY_UUID = "00000000-0000-4000-8000-000000000000"  # a member's, to check a template with


class MetricsSource(Protocol):
    """Where the members' samples and the external metrics come from."""

    def member_usage(self, uuids: Sequence[str]) -> Mapping[str, Mapping[str, Decimal | float | int]]:
        """{uuid: {metric: last sample}} of those of ``uuids`` that have samples."""
        ...

    def external(self, name: str) -> Decimal | float | int | None:
        """The external metric ``name``'s value, None when unknown."""
        ...


class InMemoryMetrics:
    """A :class:`MetricsSource` holding what it is told (tests, the what-if of a live group)."""

    def __init__(self) -> None:
        self.usage: dict[str, dict[str, Decimal | float | int]] = {}
        self.values: dict[str, Decimal | float | int] = {}

    def set_usage(self, uuid: str, **metrics: Decimal | float | int) -> None:
        self.usage.setdefault(uuid, {}).update(metrics)

    def set_external(self, name: str, value: Decimal | float | int | None) -> None:
        if value is None:
            self.values.pop(name, None)
        else:
            self.values[name] = value

    def member_usage(self, uuids: Sequence[str]) -> dict[str, dict[str, Decimal | float | int]]:
        return {uuid: dict(self.usage[uuid]) for uuid in uuids if uuid in self.usage}

    def external(self, name: str) -> Decimal | float | int | None:
        return self.values.get(name)


@dataclass(frozen=True)
class ControllerSettings:
    owner: str  # this controller's name in the leases: one per scheduler process
    period_s: float = 15.0  # --horizontal-pod-autoscaler-sync-period; the lease is as long
    max_groups: int = 10_000  # groups claimed per sync (its cost: the performance page)
    replace_backoff_s: float = PlanSettings.replace_backoff_s
    replace_backoff_max_s: float = PlanSettings.replace_backoff_max_s
    cast_grace_s: float = 60.0  # a member unchanged this long gets its build/delete cast again
    max_members: int = 1000  # a group's max is held to this (the API refuses more)
    max_new_members: int = PlanSettings.max_new_members
    readiness: Readiness = Readiness()

    def plan_settings(self) -> PlanSettings:
        return PlanSettings(self.max_new_members, self.replace_backoff_s, self.replace_backoff_max_s,
                            self.readiness)


@dataclass(frozen=True)
class MetricReading:
    """A metric as a sync read it: its ``current`` value (None: it could not be read) against
    its target, of type ``utilization`` (percent of the request), ``average`` or ``value``."""

    name: str
    type: str
    current: float | None
    target_type: str
    target: float


@dataclass(frozen=True)
class SyncResult:
    uuid: str
    name: str
    outcome: str  # SYNCED, PAUSED, DELETING, REMOVED, LOST or FAILED
    desired: int | None = None
    created: tuple[str, ...] = ()  # members whose build was cast
    deleted: tuple[str, ...] = ()  # members whose delete was cast
    recast: tuple[str, ...] = ()  # members whose earlier cast was sent again
    error: str | None = None
    members: int | None = None  # the members counted (all but those being deleted) as found, when SYNCED
    metrics: tuple[MetricReading, ...] = ()  # when SYNCED
    scale_event: int | None = None  # the count's change this sync made (> 0 up, < 0 down), when SYNCED


def _readings(decision: policy.Decision) -> tuple[MetricReading, ...]:
    readings = []
    for result in decision.metrics:
        spec = result.spec
        if spec.target_utilization is not None:
            target_type, target = "utilization", float(spec.target_utilization)
        elif spec.target_average is not None:
            target_type, target = "average", float(spec.target_average)
        else:
            target_type, target = "value", float(spec.target_value or 0)
        current = None if result.current is None else float(result.current)
        readings.append(MetricReading(spec.name, spec.type, current, target_type, target))
    return tuple(readings)


@dataclass
class _Sync:
    """A group's sync as decided, waiting to be written with its chunk."""

    group: Mapping[str, Any]
    members: list[dict[str, Any]]
    plan: SyncPlan
    new_rows: list[dict[str, Any]]
    record: SyncRecord


class _Readings:
    """The metrics a chunk's decisions read: its members' samples, asked for at once, and
    each external metric asked for once."""

    def __init__(self, source: MetricsSource, uuids: Sequence[str]) -> None:
        self._source = source
        self.usage = source.member_usage(uuids) if uuids else {}
        self._external: dict[str, Decimal | None] = {}

    def external(self, name: str) -> Decimal | None:
        if name not in self._external:
            value = self._source.external(name)
            if value is not None and not isinstance(value, Decimal):
                value = Decimal(str(value))
            self._external[name] = value
        return self._external[name]


@functools.lru_cache(maxsize=4096)
def _parsed_spec(text: str) -> tuple[GroupSpec, float] | SpecError:
    try:
        spec = parse_spec(jsonutils.loads(text))
    except SpecError as exc:
        return exc
    return spec, history_horizon_s(spec)


def _json_text(value: str | Mapping[str, Any]) -> str:
    return value if isinstance(value, str) else jsonutils.dumps(value)


def _json_object(value: str | Mapping[str, Any]) -> dict[str, Any]:
    return jsonutils.loads(value) if isinstance(value, str) else dict(value)


def _spec_of(group: Mapping[str, Any]) -> tuple[GroupSpec, float]:
    """The group's spec (its JSON text as claimed, or an object) parsed, and its history's
    horizon (:func:`history_horizon_s`), raising SpecError; once per distinct spec: most
    groups' specs stay the same from one sync to the next."""
    parsed = _parsed_spec(_json_text(group["spec"]))
    if isinstance(parsed, SpecError):
        raise parsed
    return parsed


@functools.lru_cache(maxsize=4096)
def _template_problem(template: str, project_id: str | None, flavor: str | None) -> str | None:
    """``flavor``: the JSON text of the stored flavor the template names, or None."""
    loaded = jsonutils.loads(template)
    flavors = {} if flavor is None else {loaded.get("flavor_name"): jsonutils.loads(flavor)}
    try:
        group_members.member_request({"template": loaded, "project_id": project_id}, _ANY_UUID, None,
                                     flavors)
    except TemplateError as exc:
        return str(exc)
    return None


@functools.lru_cache(maxsize=4096)
def _flavor_name(template: str) -> Any:
    loaded = jsonutils.loads(template)
    return loaded.get("flavor_name") if isinstance(loaded, dict) else None


def _template_error(group: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why no member can be made of the group's template, None if one can; checked once
    per distinct template and flavor (``flavors``: the stored ones, by name)."""
    template = _json_text(group["template"])
    name = _flavor_name(template)
    flavor = flavors.get(name) if isinstance(name, str) else None
    return _template_problem(template, group.get("project_id"),
                             None if flavor is None else json.dumps(flavor, sort_keys=True))


def _failed(group: Mapping[str, Any], exc: Exception, log: bool = True) -> SyncResult:
    if log:
        LOG.error("Scaling group %s (%s): sync failed: %s", group["name"], group["uuid"], exc,
                  exc_info=(type(exc), exc, exc.__traceback__))
    return SyncResult(group["uuid"], group["name"], FAILED, error=str(exc))


class ScalingController:
    """Syncs the scaling groups this owner holds; see the module's docstring."""

    def __init__(self, settings: ControllerSettings, database: Any, cast_run_instance: RunInstanceCast,
                 cast_delete_instance: DeleteInstanceCast, metrics_source: MetricsSource,
                 clock: Callable[[], datetime] | None = None,
                 cast_run_instances: RunInstancesCast | None = None) -> None:
        """``database``: a scheduler.db.api.Database; ``clock``: the database's time
        (``database.now``) unless given; ``cast_run_instances``: how a group's builds of one sync
        are cast together (else one cast_run_instance each)."""
        self.settings = settings
        self._db = database
        self._run_instance = cast_run_instance
        self._run_instances = cast_run_instances
        self._delete_instance = cast_delete_instance
        self._metrics = metrics_source
        self._clock = clock or database.now
        self._plan_settings = settings.plan_settings()
        #: The stored flavors by name, as read with the chunk of groups being synced: a template
        #: names one of them (a flavor created or changed later is used from the next sync).
        self._flavors: dict[str, dict[str, Any]] = {}

    def sync_once(self, now: datetime | None = None) -> list[SyncResult]:
        """Claim this owner's groups for one period and sync each; one result per group."""
        at = to_db_time(now) if now is not None else self._clock()
        groups = self._db.claim_scaling_groups(self.settings.owner, at, self.settings.period_s,
                                               self.settings.max_groups, json_text=True)
        results = []
        for start in range(0, len(groups), SYNC_CHUNK):
            results.extend(self._sync_chunk(groups[start:start + SYNC_CHUNK], at))
        return results

    def release(self) -> int:
        """Give up this owner's leases (when the process stops): how many."""
        return int(self._db.release_scaling_groups(self.settings.owner))

    def sync_group(self, group: Mapping[str, Any], now: datetime) -> SyncResult:
        """Sync ``group`` as claimed (its version is the one to write with) at ``now``."""
        return self._sync_chunk([group], to_db_time(now))[0]

    # -- a chunk of groups ---------------------------------------------------------------

    def _sync_chunk(self, groups: Sequence[Mapping[str, Any]], now: datetime) -> list[SyncResult]:
        """Sync ``groups``: read together, decided one by one, written together, then their
        members marked and cast; one group's trouble does not stop the others."""
        try:
            found = self._db.read_scaling_syncs([g["uuid"] for g in groups])
            self._flavors = {flavor["name"]: flavor for flavor in self._db.list_flavors()}
            counted = [m["uuid"] for g in groups if g["deleted_at"] is None
                       for m in found[g["uuid"]]["members"] if m["state"] in COUNTED_STATES]
            readings = _Readings(self._metrics, counted)
        except Exception as exc:
            LOG.exception("Scaling groups: reading %d group(s) to sync failed", len(groups))
            return [_failed(group, exc, log=False) for group in groups]
        results: dict[str, SyncResult] = {}
        decided: list[_Sync] = []
        for group in groups:
            try:
                outcome = self._sync_or_decide(group, found[group["uuid"]], readings, now)
            except Exception as exc:
                outcome = _failed(group, exc)
            if isinstance(outcome, SyncResult):
                results[group["uuid"]] = outcome
            else:
                decided.append(outcome)
        written, unwritten = self._record(decided, now)
        results.update(unwritten)
        results.update(self._act(written, now))
        return [results[group["uuid"]] for group in groups]

    def _record(self, syncs: Sequence[_Sync], now: datetime) -> tuple[list[_Sync], dict[str, SyncResult]]:
        """Write the decided syncs, all in one transaction; if that fails, each alone, so
        that one group's trouble (a new member's uuid taken...) fails that group only.
        (those written, {uuid: result} of those not written)."""
        written: list[_Sync] = []
        unwritten: dict[str, SyncResult] = {}
        try:
            done = self._db.record_scaling_syncs(now, [sync.record for sync in syncs]) if syncs else set()
        except DatabaseUnavailable as exc:  # through every retry: one by one would wait as long each
            LOG.error("Writing %d scaling groups' syncs failed: %s", len(syncs), exc)
            return [], {sync.record.uuid: _failed(sync.group, exc, log=False) for sync in syncs}
        except Exception:
            LOG.exception("Writing %d scaling groups' syncs together failed; writing each alone", len(syncs))
            alone = list(syncs)
        else:
            alone = []
            for sync in syncs:
                if sync.record.uuid in done:
                    written.append(sync)
                else:
                    unwritten[sync.record.uuid] = self._lost(sync.group)
        for sync in alone:
            record = sync.record
            try:
                done = self._db.record_scaling_syncs(now, [record])
            except Exception as exc:
                unwritten[record.uuid] = _failed(sync.group, exc)
                continue
            if record.uuid in done:
                written.append(sync)
            else:
                unwritten[record.uuid] = self._lost(sync.group)
        return written, unwritten

    @staticmethod
    def _lost(group: Mapping[str, Any]) -> SyncResult:
        LOG.info("Scaling group %s: written since it was claimed; nothing done", group["name"])
        return SyncResult(group["uuid"], group["name"], LOST)

    def _act(self, syncs: Sequence[_Sync], now: datetime) -> dict[str, SyncResult]:
        """After the commit: the chosen members marked DELETING (all of the chunk's at once)
        and their deletes cast, the new members' builds cast, stale casts sent again."""
        victims = [m["uuid"] for sync in syncs for m in sync.plan.victims]
        marking_error: Exception | None = None
        marked: set[str] = set()
        if victims:
            try:
                marked = self._db.set_members_state_if(victims, states.DELETING, COUNTED_STATES)
            except Exception as exc:
                marking_error = exc
        results = {}
        for sync in syncs:
            group, plan, record = sync.group, sync.plan, sync.record
            try:
                if plan.victims and marking_error is not None:
                    raise marking_error
                if record.scale_event is not None:
                    LOG.info("Scaling group %s: %s", group["name"], record.scale_event[1])
                deleted = tuple(m["uuid"] for m in plan.victims if m["uuid"] in marked)
                for uuid in deleted:
                    self._delete_instance(uuid)
                self._build([(row["request_spec"], row["filter_properties"]) for row in sync.new_rows])
                recast = self._recast(sync.members, now, {m["uuid"] for m in plan.victims})
            except Exception as exc:
                results[group["uuid"]] = _failed(group, exc)
                continue
            counted = sum(1 for m in sync.members if m["state"] in COUNTED_STATES)
            created = tuple(row["uuid"] for row in sync.new_rows)
            results[group["uuid"]] = SyncResult(
                group["uuid"], group["name"], SYNCED, plan.decision.desired, created, deleted, recast,
                members=counted, metrics=_readings(plan.decision),
                scale_event=record.scale_event[0] if record.scale_event is not None else None)
        return results

    # -- one group -----------------------------------------------------------------------

    def _sync_or_decide(self, group: Mapping[str, Any], found: Mapping[str, Any],
                        readings: _Readings, now: datetime) -> SyncResult | _Sync:
        """A group being deleted, paused or whose spec is bad is synced here, alone (its
        result); any other gets its decision and plan, to be written with its chunk."""
        members = found["members"]
        if group["deleted_at"] is not None:
            return self._sync_deleting(group, members, now)
        try:
            spec, horizon_s = _spec_of(group)
        except SpecError as exc:
            status = {"synced_at": group_status.iso(now), "error": str(exc)}
            written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
            return SyncResult(group["uuid"], group["name"], FAILED if written else LOST, error=str(exc))
        spec = self._held_to_max_members(group, spec)
        if group["paused"]:
            return self._sync_paused(group, members, now, None)
        cutoff = now - timedelta(seconds=horizon_s)
        history = {key: [r for r in found[key] if r["recorded_at"] >= cutoff]
                   for key in ("recommendations", "scale_events")}
        oldest = found["oldest_recommendation"]
        events_kept = min(cutoff, now - timedelta(seconds=SCALE_EVENTS_KEPT_S))
        prunable = ((oldest is not None and oldest < cutoff)
                    or any(e["recorded_at"] < events_kept for e in found["scale_events"]))
        plan = self._plan(group, spec, members, history, readings, now)
        decision = plan.decision
        if plan.paused:
            return self._sync_paused(group, members, now, decision)
        replace_failures, replace_after = group["replace_failures"], to_db_time(group["replace_after"])
        if plan.backoff is not None:
            wait_s = plan.backoff.wait_s
            replace_failures = plan.backoff.failures
            replace_after = None if wait_s is None else now + timedelta(seconds=wait_s)
        new_rows = self._new_rows(group, members, plan)
        reason = None
        if decision.scale_event is not None:
            reason = group_status.event_reason(group["desired"], decision)
        shown = [e for e in found["scale_events"] if e["recorded_at"] >= events_kept]
        events = [{"at": to_iso(e["recorded_at"]), "change": e["change"], "reason": e["reason"]}
                  for e in shown[-group_status.EVENTS_SHOWN:]]
        status = group_status.group_status(members, decision, events, now, reason, replace_failures,
                                           replace_after, _template_error(group, self._flavors), plan.pending)
        values = {"desired": decision.desired, "status": status, "replace_after": replace_after,
                  "replace_failures": replace_failures}
        record = SyncRecord(group["uuid"], group["version"], values, list(plan.recorded),
                            None if decision.scale_event is None else (decision.scale_event, reason),
                            new_rows, cutoff if prunable else None)
        return _Sync(group, members, plan, new_rows, record)

    def _held_to_max_members(self, group: Mapping[str, Any], spec: GroupSpec) -> GroupSpec:
        """``spec`` with its max (and min) held to max_members: a group stored before the bound
        was set, or lowered, grows no further than any other may."""
        limit = self.settings.max_members
        if spec.max <= limit:
            return spec
        _LIMITED.log(group["uuid"], logging.WARNING,
                     "Scaling group %s has max %d, above [scaling] max_members: held to %d members "
                     "(set its max to at most %d to silence this)", group["name"], spec.max, limit, limit)
        return dataclasses.replace(spec, max=limit, min=min(spec.min, limit))

    def _plan(self, group: Mapping[str, Any], spec: GroupSpec, members: Sequence[Mapping[str, Any]],
              history: Mapping[str, Sequence[Mapping[str, Any]]], readings: _Readings,
              now: datetime) -> SyncPlan:
        """The group's sync planned on its members, their samples and its history within the
        horizon."""
        counted = [m for m in members if m["state"] in COUNTED_STATES]
        readiness = self.settings.readiness
        seen: Members | None = settled.settle(spec, counted, readings.usage, now, readiness)
        if seen is None:
            seen = [group_members.to_member(m, readings.usage.get(m["uuid"], {}), now) for m in counted]
        external: dict[str, Decimal] = {}
        for metric in spec.metrics:
            if metric.type == EXTERNAL:
                value = readings.external(metric.name)
                if value is not None:
                    external[metric.name] = value
        recommendations = None
        if group["last_synced_at"] is not None:
            recommendations = [Recommendation(group_members.seconds_between(r["recorded_at"], now) or 0.0,
                                              r["replicas"]) for r in history["recommendations"]]
        events = [ScaleEvent(group_members.seconds_between(e["recorded_at"], now) or 0.0, e["change"])
                  for e in history["scale_events"]]
        replace_after = group["replace_after"]
        wait_s = None if replace_after is None else (to_db_time(replace_after) - now).total_seconds()
        backoff = Backoff(group["replace_failures"], wait_s)
        return plan_sync(spec, group["desired"], members, seen, external, History(recommendations, events),
                         self._plan_settings, backoff, _template_error(group, self._flavors))

    def _new_rows(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]],
                  plan: SyncPlan) -> list[dict[str, Any]]:
        """The rows of the members ``plan`` creates, named after those it keeps."""
        if not plan.create:
            return []
        kept = [m for m in members if m not in plan.replacing]
        names = group_members.new_names(group["name"], kept, plan.create)
        templated = {**group, "template": _json_object(group["template"])}
        return [group_members.member_row(templated, str(uuidlib.uuid4()), name, self._flavors)
                for name in names]

    def _delete(self, victims: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Mark ``victims`` DELETING (those not deleted meanwhile) and cast their deletes."""
        marked = self._db.set_members_state_if([m["uuid"] for m in victims], states.DELETING, COUNTED_STATES)
        done = tuple(m["uuid"] for m in victims if m["uuid"] in marked)
        for uuid in done:
            self._delete_instance(uuid)
        return done

    def _recast(self, members: Sequence[Mapping[str, Any]], now: datetime,
                gone: Set[str] = frozenset()) -> tuple[str, ...]:
        """Cast again the builds of members SCHEDULING without a host, and the deletes of
        members DELETING, whose rows have not changed for the grace period (but those
        ``gone``, deleted by this sync); each row is touched first, so that it waits a
        grace period again."""
        grace = self.settings.cast_grace_s
        stale = [m for m in members
                 if m["state"] in _RECAST_STATES
                 and (m["state"] == states.DELETING or not m["host"])
                 and m["uuid"] not in gone
                 and (group_members.seconds_between(m["updated_at"], now) or 0.0) >= grace]
        if not stale:
            return ()
        touched = self._db.update_instances_if(
            [(m["uuid"], {}, {"state": m["state"], "host": m["host"]}) for m in stale])
        builds = [m["uuid"] for m in stale if m["uuid"] in touched and m["state"] != states.DELETING]
        stored = self._db.get_instances(builds) if builds else {}  # their requests, as first cast
        recast, builds = [], []
        for member in stale:
            if member["uuid"] not in touched:
                continue
            recast.append(member["uuid"])
            if member["state"] == states.DELETING:
                self._delete_instance(member["uuid"])
            else:
                builds.append(self._request_of(stored.get(member["uuid"], member)))
        self._build(builds)
        if recast:
            LOG.info("Cast again (no news for %g s): %s", grace, ", ".join(recast))
        return tuple(recast)

    def _build(self, requests: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Cast run_instance for each (request_spec, filter_properties): together when they are
        several and cast_run_instances was given."""
        if self._run_instances is not None and len(requests) > 1:
            self._run_instances(requests)
            return
        for request_spec, filter_properties in requests:
            self._run_instance(request_spec, filter_properties)

    def _request_of(self, member: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        if member.get("request_spec") and member.get("filter_properties") is not None:
            return member["request_spec"], member["filter_properties"]
        group = self._db.get_scaling_group(member["scaling_group_uuid"])
        return group_members.member_request(group, member["uuid"], member.get("display_name"), self._flavors)

    def _sync_paused(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]], now: datetime,
                     decision: policy.Decision | None) -> SyncResult:
        """A paused group: its status written, nothing else (not even its last sync time, so
        that it starts again as a group never synced)."""
        status = group_status.paused_status(members, group["desired"], now, decision)
        written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
        return SyncResult(group["uuid"], group["name"], PAUSED if written else LOST, group["desired"])

    def _sync_deleting(self, group: Mapping[str, Any], members: Sequence[Mapping[str, Any]],
                       now: datetime) -> SyncResult:
        """A group being deleted: its members deleted, then the group removed."""
        if not members:
            removed = self._db.remove_scaling_group_if(group["uuid"], group["version"])
            return SyncResult(group["uuid"], group["name"], REMOVED if removed else LOST, 0)
        status = {"synced_at": group_status.iso(now), "deleting": True,
                  "members": group_status.member_counts(members)}
        written = self._db.update_scaling_group_if(group["uuid"], group["version"], {"status": status})
        if written is None:
            return SyncResult(group["uuid"], group["name"], LOST)
        deleted = self._delete([m for m in members if m["state"] in COUNTED_STATES])
        recast = self._recast([m for m in members if m["state"] == states.DELETING], now)
        if not self._db.list_scaling_group_members(group["uuid"]) and self._db.remove_scaling_group_if(
                group["uuid"], written["version"]):
            return SyncResult(group["uuid"], group["name"], REMOVED, 0, deleted=deleted, recast=recast)
        return SyncResult(group["uuid"], group["name"], DELETING, 0, deleted=deleted, recast=recast)
