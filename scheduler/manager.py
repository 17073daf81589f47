"""The scheduler service's RPC endpoint: every public method is an RPC method; the claim
protocol, build expiry and reconciliation it drives live in their own modules."""

import logging
import threading

from compute_agent.client import ComputeClient
from scheduler import filters, hints, host_names, lookups, rpc, states, weighers
from scheduler.build_expiry import BuildExpiry
from scheduler.claims import HostClaims
from scheduler.client import CAST_AT
from scheduler.exception import InstanceNotFound, InvalidRequest, NoValidHost
from scheduler.host_manager import HostManager
from scheduler.outbox import Outbox
from scheduler.reconciler import Reconciler
from scheduler.request_spec import MAX_LIST, RequestSpec, Retry, _text, parse_uuid
from scheduler.selection import Selector
from scheduler.status_page.recent import Recent
from scheduler.telemetry import scheduler_metrics as telemetry
from scheduler.undo import UndoLog

LOG = logging.getLogger(__name__)


class ReportBuffer:
    """The newest report of each host, until the service saves them to the database."""

    def __init__(self):
        self._lock = threading.Lock()
        self._reports = {}

    def put(self, host, report):
        with self._lock:
            self._reports[host] = report

    def drain(self):
        with self._lock:
            reports, self._reports = self._reports, {}
        return reports

    def put_back(self, reports):
        """Keep ``reports`` (drained, then not saved) for the next save, unless newer ones came."""
        with self._lock:
            for host, report in reports.items():
                self._reports.setdefault(host, report)


class SchedulerManager:
    def __init__(self, conf, transport, database, rng=None):
        self._conf = conf
        self._db = database
        self._compute = ComputeClient(transport)
        self.host_manager = HostManager(conf)
        self.selector = Selector(
            filters.enabled_filters(conf),
            weighers.enabled_weighers(conf),
            conf.filter_scheduler.host_subset_size,
            rng,
            shuffle_best_same_weighed_hosts=conf.filter_scheduler.shuffle_best_same_weighed_hosts,
        )
        self._installed_filters = filters.all_filters()
        self._installed_weighers = weighers.all_weighers()
        self.reports = ReportBuffer()
        #: The latest refusals, for the status page.
        self.refusals = Recent()
        self.outbox = Outbox(batch=transport.publisher.batch)
        self.undo = UndoLog()
        # Collaborators the service drives: not RPC methods (an endpoint's callables are).
        self.claims = HostClaims(database, self.host_manager, conf.scheduler.service_down_time)
        self.build_expiry = BuildExpiry(conf, database, self._schedule, self._terminate)
        self.reconciler = Reconciler(database, conf.scheduler.service_down_time, self._terminate)

    # -- placement -------------------------------------------------------

    @rpc.callers(rpc.CLIENT, rpc.AGENT_OF_HOST, host=lambda args: sent_back_by(args.get("filter_properties")))
    def run_instance(self, context, request_spec, filter_properties):
        """Place the instances of a request (or of a reschedule an agent sent back).

        A request that is not valid raises InvalidRequest (the RPC server
        dead-letters it, once) after recording the refusal on the new instances it
        names (none on those it only counts); a reschedule is accepted only from the
        agent of the host that sent it back (the last host of its retry record: see
        sent_back_by).
        """
        job = (context, self._accept(context, request_spec, filter_properties))
        refused = self._schedule([job])
        if refused:
            raise refused[id(job[1])]

    @rpc.batch_of("run_instance")
    def _run_instances(self, calls):
        """run_instance for the requests of a batch: their rows written a few statements
        at a time, their hosts chosen one request after the other, as run_instance would."""
        outcomes, jobs = [], []
        for context, kwargs in calls:
            try:
                jobs.append((context, self._accept(context, **kwargs)))
                outcomes.append(None)
            except InvalidRequest as exc:
                outcomes.append(exc)
        refused = self._schedule(jobs)
        specs = iter(spec for _, spec in jobs)
        return [outcome if outcome is not None else refused.get(id(next(specs))) for outcome in outcomes]

    def _accept(self, context, request_spec, filter_properties):
        try:
            spec = RequestSpec.from_wire(request_spec, filter_properties)
        except InvalidRequest as exc:
            self._fail_named_instances(request_spec, f"Invalid request: {exc}")
            raise
        return spec

    def _schedule(self, jobs):
        """Place the requests of ``jobs`` ([(context, spec)]), in order; the requests refused
        as invalid, ``{id(spec): InvalidRequest}`` (see _ready_to_place).

        A request whose hints read where instances are (a server group,
        same_host, different_host) sees the placements of the requests before
        it: those are written first.
        """
        segment, refused = [], {}
        for job in jobs:
            if segment and lookups.reads_placements(job[1]):
                refused.update(self._schedule_segment(segment))
                segment = []
            segment.append(job)
        if segment:
            refused.update(self._schedule_segment(segment))
        return refused

    def _schedule_segment(self, jobs):
        """Place the requests of ``jobs`` in one go: their rows written together, then the
        builds cast to the agents (through the outbox: out once the batch commits). Returns
        the requests refused as invalid, as _schedule."""
        self._begin_attempt(jobs)
        to_schedule, new, expected = self._instances_to_schedule(jobs)
        placing, errors, refused = self._ready_to_place(jobs, to_schedule, new)
        now = self._db.now()
        decided = {}
        specs = [spec for _, spec in placing]
        outcomes = self.claims.place(specs, telemetry.timed(lambda spec: self._select(spec, decided)))
        rows, updates, casts = [], [], []
        for (context, spec), placements in rpc.each_request(zip(placing, outcomes, strict=True),
                                                            _job_context):
            if isinstance(placements, NoValidHost):
                LOG.info("Instances %s: %s", ", ".join(spec.instance_uuids), placements)
                errors.append((spec, str(placements), telemetry.NO_VALID_HOST))
                self.outbox.send(telemetry.count_refusal, placements.removed)
                continue
            for instance_uuid, (host, node, limits) in zip(spec.instance_uuids, placements, strict=True):
                request_spec, filter_properties = spec.instance_to_wire(instance_uuid)
                filter_properties["limits"] = limits
                values = {"state": states.SCHEDULED, "host": host, "node": node,
                          "attempts": spec.retry.num_attempts, "scheduled_at": now,
                          "filter_properties": filter_properties}
                if instance_uuid in new:
                    wire = (request_spec, filter_properties)
                    rows.append(_instance_record(spec, instance_uuid, wire, values))
                else:
                    updates.append((instance_uuid, values, expected[instance_uuid]))
                casts.append((context, spec, instance_uuid, host, request_spec, filter_properties))
        for spec, reason, outcome in errors:
            self.outbox.send(telemetry.count_outcome, outcome, len(spec.instance_uuids))
            self.outbox.send(self.refusals.add, instances=list(spec.instance_uuids), reason=reason)
            for instance_uuid in spec.instance_uuids:
                values = {"state": states.ERROR, "fault_reason": reason, "host": None, "node": None}
                if instance_uuid in new:
                    rows.append(_instance_record(spec, instance_uuid, values=values))
                else:
                    updates.append((instance_uuid, values, expected[instance_uuid]))
        for spec, exc in refused.values():
            if spec.uuids_named:  # their client looks for them: it finds why they are not built
                reason = f"Invalid request: {exc}"
                rows.extend(_refused_record(spec, uuid, reason) for uuid in spec.instance_uuids)
                self.outbox.send(telemetry.count_outcome, telemetry.ERROR, len(spec.instance_uuids))
        taken = self._create_placed(rows)
        taken.update(self._update_placed(updates))
        scheduled = telemetry.Scheduled()
        for context, spec, instance_uuid, host, request_spec, filter_properties in rpc.each_request(casts):
            if instance_uuid not in taken:
                _log_decision(instance_uuid, host, decided.get(instance_uuid), spec.retry.num_attempts)
                self._send_build(context, spec, instance_uuid, host, request_spec, filter_properties)
                scheduled.add(spec.retry.num_attempts, (context or {}).get(CAST_AT))
        if scheduled:
            self.outbox.send(scheduled.count)
        return {key: InvalidRequest(str(exc)) for key, (_, exc) in refused.items()}

    def _begin_attempt(self, jobs):
        """Count the attempt; a reschedule gives back what it held on the host that sent it back."""
        for _context, spec in jobs:
            spec.retry.num_attempts += 1
            for host, _node in spec.retry.hosts[-1:]:
                for instance_uuid in spec.instance_uuids:
                    self.host_manager.release(host, instance_uuid)

    def _ready_to_place(self, jobs, to_schedule, new):
        """([(context, spec)] to place, [(spec, reason, outcome)] refused before placing,
        {id(spec): (spec, exception)} refused as invalid): the jobs' specs cut down to the
        instances still to place, past the attempt limit and the hints' checks. A redelivered
        request sends the builds it decided before again.

        A request for new instances only (no row yet, ``new``) that fails those checks is
        invalid, whatever the fleet: it is refused once, as a whole, and none of the
        instances it asks for is recorded, but those it names (see _schedule_segment).
        Instances that have rows (reschedules) go to ERROR with the reason."""
        max_attempts = self._conf.scheduler.max_attempts
        placing, errors, refused = [], [], {}
        for (context, spec), (uuids, placed) in rpc.each_request(zip(jobs, to_schedule, strict=True),
                                                                 _job_context):
            if getattr(context, "redelivered", False):
                # This message may have been decided and committed by a worker that died
                # before its casts were confirmed: send them again (agents build once).
                for instance in placed:
                    self._cast_build(context, spec, instance["uuid"], instance["host"],
                                     (instance.get("filter_properties") or {}).get("limits") or {})
            if not uuids:
                continue
            spec.instance_uuids = uuids
            fresh = not spec.retry.hosts and all(u in new for u in uuids)
            if spec.retry.num_attempts > max_attempts:
                reason = f"Exceeded maximum number of attempts ({max_attempts})"
                if spec.retry.exc_reason:
                    reason += f"; last failure: {spec.retry.exc_reason}"
                if fresh:
                    refused[id(spec)] = (spec, InvalidRequest(
                        f"run_instance: filter_properties.retry.num_attempts: a new request is past "
                        f"[scheduler] max_attempts ({max_attempts})"))
                    continue
                LOG.info("Instances %s: %s", ", ".join(uuids), reason)
                errors.append((spec, reason, telemetry.ERROR))
                continue
            try:
                # zone, server group, same/different host hints; then whether they can be honoured
                lookups.prepare_spec(self._db, spec, add_members=False)
                self._check_honoured(spec)
                lookups.add_members(self._db, spec)
            except lookups.InvalidHint as exc:
                if fresh:
                    refused[id(spec)] = (spec, exc)
                    continue
                LOG.info("Instances %s: %s", ", ".join(uuids), exc)
                errors.append((spec, str(exc), telemetry.NO_VALID_HOST))
                continue
            except NoValidHost as exc:
                LOG.info("Instances %s: %s", ", ".join(uuids), exc)
                errors.append((spec, str(exc), telemetry.NO_VALID_HOST))
                continue
            placing.append((context, spec))
        return placing, errors, refused

    def _update_placed(self, updates):
        """Write the new placements (or refusals) of instances that have a row, each only
        if the row is still as read: the uuids another worker changed meanwhile (a
        reschedule delivered twice), whose placements here are given back."""
        if not updates:
            return {}
        done = self._db.update_instances_if(updates)
        taken = {uuid: values.get("host") for uuid, values, _ in updates if uuid not in done}
        if taken:
            LOG.info("Instances %s were changed by another worker meanwhile; left as it left them",
                     ", ".join(sorted(taken)))
            with self.host_manager.lock:
                for instance_uuid, host in taken.items():
                    if host is not None:
                        self.host_manager.release(host, instance_uuid)
        return taken

    def _create_placed(self, rows):
        """Insert the rows of new instances, placed or refused; the uuids another
        worker inserted first (a request delivered twice), whose placements here are
        given back."""
        created = set(self._db.create_instances(rows))
        taken = {row["uuid"]: row.get("host") for row in rows if row["uuid"] not in created}
        if taken:
            LOG.info("Instances %s were scheduled by another worker meanwhile", ", ".join(sorted(taken)))
            with self.host_manager.lock:
                for instance_uuid, host in taken.items():
                    if host is not None:
                        self.host_manager.release(host, instance_uuid)
        return taken

    def _check_honoured(self, spec):
        """Raise InvalidHint when no enabled plugin honours a hint, the zone or the group
        policy the request asks for (scheduler.hints)."""
        why = hints.unhonoured(spec, self.selector.filters + self.selector.weighers,
                               self._installed_filters, self._installed_weighers)
        if why is not None:
            raise lookups.InvalidHint(f"Request refused: {why}")

    def _select(self, spec, decided=None):
        """[(host, node, limits)] for the instances of ``spec``, consumed in memory, and
        given back should the transaction that records them roll back; how each host was
        chosen into ``decided`` ({uuid: selection.Decision})."""
        placements = []
        decisions = None if decided is None else []
        chosen = self.selector.select(self.host_manager.table, spec, decisions,
                                      LOG.isEnabledFor(logging.DEBUG))
        if decisions:
            decided.update(zip(spec.instance_uuids, decisions, strict=True))
        for host, instance_uuid in zip(chosen, spec.instance_uuids, strict=True):
            self.undo.add(self.host_manager.release, host.host, instance_uuid)
            placements.append((host.host, host.nodename, dict(host.limits)))
        return placements

    @rpc.read_only
    @rpc.callers(rpc.CLIENT)
    def select_destinations(self, context, request_spec, filter_properties):
        """Where the instances of a request go, for a caller that builds them itself:
        the chosen hosts' resources are consumed (as Nova's select_destinations does),
        and nothing is written to the database (no instance, no server group member:
        a group's placements are read from the instances the scheduler records)."""
        spec = RequestSpec.from_wire(request_spec, filter_properties)
        lookups.prepare_spec(self._db, spec, add_members=False)  # zone, server group, host hints
        self._check_honoured(spec)
        decisions = []
        with self.host_manager.lock:
            chosen = self.selector.select(self.host_manager.table, spec, decisions,
                                          LOG.isEnabledFor(logging.DEBUG))
            selected = [{"host": h.host, "nodename": h.nodename, "limits": dict(h.limits)} for h in chosen]
        for instance_uuid, host, decision in zip(spec.instance_uuids, selected, decisions, strict=True):
            _log_decision(instance_uuid, host["host"], decision, verb="Selected")
        return selected

    def _instances_to_schedule(self, jobs):
        """For each job, (uuids its message should place, instances it placed already);
        the set of those uuids that have no row yet; and, for those that have one, what
        the row must still hold when it is written ({column: expected}).

        A redelivered request places nothing twice: its instances that are
        SCHEDULED already are returned apart, to have their builds sent again.
        A reschedule applies only while the instance is still on the host that
        sent it back, at the attempt that host was given: a reschedule delivered
        twice, or sent back late by a host the instance has left, changes nothing.
        An instance named twice in a batch is placed by the first request naming it.
        """
        current = self._db.get_instances([u for _, spec in jobs for u in spec.instance_uuids])
        taken, gone, out, expected = set(), [], [], {}
        for _, spec in rpc.each_request(jobs):
            sender = spec.retry.hosts[-1][0] if spec.retry.hosts else None
            wanted, placed = [], []
            for instance_uuid in spec.instance_uuids:
                if instance_uuid in taken:
                    LOG.info("Instance %s is named twice in a batch: placed once", instance_uuid)
                    continue
                row = current.get(instance_uuid)
                state = (row or {}).get("state")
                if sender is not None and row is not None and state in states.RESCHEDULABLE:
                    attempt = spec.retry.num_attempts - 1
                    if (row["host"], row["attempts"]) != (sender, attempt):
                        LOG.info("Instance %s: reschedule sent back by %s (attempt %d) ignored: the "
                                 "instance is on %s (attempt %s) now", instance_uuid, sender, attempt,
                                 row["host"] or "no host", row["attempts"])
                        continue
                    wanted.append(instance_uuid)
                    taken.add(instance_uuid)
                    expected[instance_uuid] = {"state": states.RESCHEDULABLE, "host": sender,
                                               "attempts": attempt}
                elif state is None or state == states.SCHEDULING:
                    wanted.append(instance_uuid)
                    taken.add(instance_uuid)
                    if row is not None:
                        expected[instance_uuid] = {"state": (states.SCHEDULING,), "host": row["host"],
                                                   "attempts": row["attempts"]}
                elif state == states.DELETING:
                    gone.append(instance_uuid)
                    taken.add(instance_uuid)
                else:
                    LOG.info("Instance %s is %s already: not scheduled again", instance_uuid, state)
                    if state == states.SCHEDULED and sender is None:
                        placed.append(row)
            out.append((wanted, placed))
        now = self._db.now()
        self._db.update_instances([(u, {"state": states.DELETED, "deleted_at": now}) for u in gone])
        return out, taken - set(current), expected

    def _cast_build(self, context, spec, instance_uuid, host, limits):
        request_spec, filter_properties = spec.instance_to_wire(instance_uuid)
        filter_properties["limits"] = limits
        self._send_build(context, spec, instance_uuid, host, request_spec, filter_properties)

    def _send_build(self, context, spec, instance_uuid, host, request_spec, filter_properties):
        instance = {
            "uuid": instance_uuid,
            "flavor": spec.flavor.to_wire(),
            "project_id": spec.project_id,
        }
        self.outbox.send(
            self._compute.run_instance, _ctxt(context), host, instance, request_spec, filter_properties
        )

    def _fail_named_instances(self, request_spec, reason):
        """Record the refusal on the instances a bad request names, so their owner can see it."""
        uuids = request_spec.get("instance_uuids") if isinstance(request_spec, dict) else None
        valid = []
        for i, value in enumerate(uuids if isinstance(uuids, list) else []):
            try:
                valid.append(parse_uuid(value, f"instance_uuids[{i}]"))
            except InvalidRequest:
                continue
        if valid:
            # Only instances this request created: a bad message naming an
            # existing instance must not change it.
            created = self._db.create_instances(
                [{"uuid": u, "state": states.ERROR, "fault_reason": reason} for u in valid]
            )
            self.outbox.send(telemetry.count_outcome, telemetry.ERROR, len(created))

    def _terminate(self, context, host, instance_uuid):
        self.outbox.send(self._compute.terminate_instance, context, host, instance_uuid)

    # -- what the agents tell us ------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def report_resources(self, context, host, resources):
        host_names.check(host, "report_resources: host")
        if self.host_manager.update_from_report(host, resources):  # checks the report (check_report)
            self.reports.put(host, resources)
        else:
            LOG.debug("Report %s of %s is older than the one taken already; ignored",
                      resources.get("report_seq"), host)

    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def instance_update(self, context, instance_uuid, host, state, fault=None):
        outcome = self._instance_updates(
            [(context, {"instance_uuid": instance_uuid, "host": host, "state": state, "fault": fault})])[0]
        if outcome is not None:
            raise outcome

    @rpc.batch_of("instance_update")
    def _instance_updates(self, calls):
        """Apply agents' instance updates, a few statements for the lot.

        Only the instance's current host speaks for it: a late word from a host
        it was taken from (rescheduled after build_timeout) changes nothing.
        Several schedulers share the queue: an agent's BUILDING and ACTIVE may be
        handled in either order. A state only moves forward (and DELETING only to
        DELETED), so the later one is not undone by the earlier.
        """
        outcomes, updates, accepted = [None] * len(calls), [], []
        now = self._db.now()
        for index, (context, kwargs) in enumerate(calls):
            try:
                update = self._check_update(now, context, **kwargs)
            except InvalidRequest as exc:
                outcomes[index] = exc
                continue
            updates.append(update)
            accepted.append(index)
        applied = self._db.set_instance_states(
            [(u, host, values, _MAY_PRECEDE[values["state"]]) for u, host, values in updates])
        not_applied = [u for (u, _, _), ok in zip(updates, applied, strict=True) if not ok]
        unknown = set(not_applied).difference(self._db.get_instances(not_applied)) if not_applied else set()
        for index, (instance_uuid, host, values), ok in zip(accepted, updates, applied, strict=True):
            state = values["state"]
            if instance_uuid in unknown:
                outcomes[index] = InvalidRequest(f"instance_update from {host}: no instance {instance_uuid}")
            elif not ok:
                with rpc.handling(calls[index][0]):
                    LOG.debug("Update %s for %s from %s is stale or late; ignored", state, instance_uuid,
                              host)
            elif state in (states.ERROR, states.DELETED):
                self.host_manager.release(host, instance_uuid)
        return outcomes

    def _check_update(self, now, context, instance_uuid, host, state, fault=None):
        """(uuid, host, values to write) of a valid update; raises InvalidRequest."""
        instance_uuid = parse_uuid(instance_uuid, "instance_update: instance_uuid")
        if not isinstance(state, str) or state not in states.FROM_AGENT:
            raise InvalidRequest(
                f"instance_update: state must be one of {', '.join(states.FROM_AGENT)}, got {state!r}"[:300]
            )
        host_names.check(host, "instance_update: host")
        if fault is not None and not (
            isinstance(fault, dict) and isinstance(fault.get("reason", ""), str | type(None))
        ):
            raise InvalidRequest("instance_update: fault must be an object whose reason is a string")
        values = {"state": state}
        if state == states.ACTIVE:
            values["launched_at"] = now
        elif state == states.ERROR:
            values["fault_reason"] = str((fault or {}).get("reason") or "Build failed")[:4096]
        elif state == states.DELETED:
            values["deleted_at"] = now
        return instance_uuid, host, values

    # -- clients' requests and reads ----------------------------------------

    @rpc.callers(rpc.CLIENT)
    def delete_instance(self, context, instance_uuid):
        instance_uuid = parse_uuid(instance_uuid, "delete_instance: instance_uuid")
        current = self._db.get_instance(instance_uuid)
        if current is None or current["state"] == states.DELETED:
            return
        if current["host"]:
            LOG.info("Deleting instance %s on host %s", instance_uuid, current["host"])
            self._db.update_instance(instance_uuid, {"state": states.DELETING})
            self.outbox.send(self._compute.terminate_instance, _ctxt(context), current["host"], instance_uuid)
        else:
            self._db.update_instance(
                instance_uuid, {"state": states.DELETED, "deleted_at": self._db.now()}
            )

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_hosts(self, context):
        with self.host_manager.lock:
            hosts = sorted(self.host_manager.get_all_host_states(), key=lambda h: h.host)
            zone = self._conf.filter_scheduler.default_availability_zone
            return [dict(_host_view(h, self.host_manager.is_up(h), zone),
                         disabled_reason=self.host_manager.disabled.get(h.host)) for h in hosts]

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_instances(self, context, host=None, state=None, include_deleted=False, uuids=None, name=None):
        """Instances, newest first; with ``uuids`` (at most MAX_LIST), only those; with ``name``,
        only those of that display name."""
        if uuids is not None:
            if not isinstance(uuids, list) or len(uuids) > MAX_LIST:
                raise InvalidRequest(f"uuids must be a list of at most {MAX_LIST} instance UUIDs")
            uuids = [parse_uuid(u, "list_instances: uuids") for u in uuids]
        if state is not None and (not isinstance(state, str) or state not in states.ALL):
            raise InvalidRequest(f"state must be one of {', '.join(states.ALL)}, got {state!r}"[:300])
        if host is not None:
            host_names.check(host, "list_instances: host")
        if not isinstance(include_deleted, bool):
            raise InvalidRequest(f"include_deleted must be true or false, got {include_deleted!r}"[:300])
        if name is not None:
            name = _text(name, "list_instances: name")
        return self._db.list_instances(
            host=host, states=[state] if state else None, include_deleted=bool(include_deleted), uuids=uuids,
            name=name,
        )

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_instance(self, context, instance_uuid):
        instance_uuid = parse_uuid(instance_uuid, "instance_uuid")
        instance = self._db.get_instance(instance_uuid)
        if instance is None:
            raise InstanceNotFound(f"No instance {instance_uuid}")
        return instance


#: The states an agent's update may move an instance from, by the state it reports.
_MAY_PRECEDE = {
    states.BUILDING: (states.SCHEDULED,),
    states.ACTIVE: (states.SCHEDULED, states.BUILDING),
    states.ERROR: (states.SCHEDULED, states.BUILDING, states.ACTIVE),
    states.DELETED: tuple(s for s in states.ALL if s != states.DELETED),
}


def sent_back_by(filter_properties):
    """The host a run_instance's ``filter_properties`` send back from (the last host of its
    retry record, read as RequestSpec reads it), or None: a new request, or one whose retry
    record RequestSpec refuses."""
    retry = filter_properties.get("retry") if isinstance(filter_properties, dict) else None
    try:
        hosts = Retry.from_wire(retry).hosts
    except InvalidRequest:
        return None
    return hosts[-1][0] if hosts else None


def _job_context(item):
    """The context of an item ((context, spec), ...) of a loop over jobs."""
    return item[0][0]


def _hosts(count):
    return f"{count} host{'s' if count != 1 else ''}"


def _log_decision(instance_uuid, host, decision, attempt=1, verb="Placed"):
    """One INFO line per instance: where it goes and out of how many hosts; at DEBUG, what each
    filter left and the heaviest hosts."""
    again = f"attempt {attempt}; " if attempt > 1 else ""
    if decision is None:
        LOG.info("%s instance %s on host %s", verb, instance_uuid, host)
    elif decision.forced:
        LOG.info("%s instance %s on host %s (%sforced: %s considered, no filter run)", verb, instance_uuid,
                 host, again, _hosts(decision.considered))
    else:
        LOG.info("%s instance %s on host %s (%s%s considered, %d passed the filters)", verb, instance_uuid,
                 host, again, _hosts(decision.considered), decision.passed)
    if decision is not None and decision.top and LOG.isEnabledFor(logging.DEBUG):
        LOG.debug("Instance %s: of %s, %s; heaviest: %s", instance_uuid, _hosts(decision.considered),
                  ", ".join(f"{name} left {left}" for name, left in decision.filters) or "no filter run",
                  ", ".join(f"{name} {weight:.3f}" for name, weight in decision.top))


def _ctxt(context):
    """The caller's context values, to pass on with the casts this request causes."""
    return context.to_dict() if hasattr(context, "to_dict") else dict(context or {})


def _refused_record(spec, instance_uuid, reason):
    """The row of an instance a request named and that is refused as invalid: its fault and
    what a listing shows, not the request (it is dead-lettered whole)."""
    return {"uuid": instance_uuid, "state": states.ERROR, "fault_reason": reason,
            "project_id": spec.project_id, "display_name": spec.display_names.get(instance_uuid),
            "flavor_name": spec.flavor.name,
            "memory_mb": spec.flavor.memory_mb, "root_gb": spec.flavor.root_gb,
            "ephemeral_gb": spec.flavor.ephemeral_gb, "vcpus": spec.flavor.vcpus, "attempts": 0}


def _instance_record(spec, instance_uuid, wire=None, values=None):
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


def _host_view(state, up, default_zone):
    aggregates = state.aggregates
    zones = sorted({zone for a in aggregates for zone in a.zones}) or [default_zone]
    return {
        "host": state.host,
        "nodename": state.nodename,
        "state": "up" if up and not state.disabled else ("disabled" if state.disabled else "down"),
        "memory_mb": state.total_usable_ram_mb,
        "memory_mb_used": state.ram_used_mb,
        "free_ram_mb": state.free_ram_mb,
        "local_gb": state.total_usable_disk_gb,
        "local_gb_used": state.disk_used_gb,
        "free_disk_gb": state.free_disk_gb,
        "vcpus": state.vcpus_total,
        "vcpus_used": state.vcpus_used,
        "running_vms": state.num_instances,
        "pending": len(state.pending),
        "reported_at": state.reported_at,
        "aggregates": sorted(a.name for a in aggregates),
        "availability_zone": ",".join(zones),
    }
