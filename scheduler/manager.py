"""The scheduler's RPC endpoint: placement, the agents' reports and updates, deletes and reads.

Every public method is an RPC method. What they drive (the planner and the
applier, the host table, the claims) is assembled in scheduler.service.
"""

import logging
import threading

from berth_contract import host_names, json_checks, traits
from berth_contract.host_report import HostReport
from berth_contract.request_spec import MAX_LIST, RequestSpec, Retry, _text, parse_uuid
from scheduler import api_versions, rpc, states
from scheduler.exception import InstanceNotFound, InvalidRequest, PowerRefused
from scheduler.planning import lookups
from scheduler.planning.applier import context_values, log_decision
from scheduler.planning.plan import Job

LOG = logging.getLogger(__name__)
#: Why delete_instance terminates an instance, as its agent logs it.
DELETED_BY_CLIENT = "deleted by a client (delete_instance)"


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
    RPC_API = api_versions.SCHEDULER

    def __init__(self, conf, database, host_manager, reports, scheduling):
        self._conf = conf
        self._db = database
        self.host_manager = host_manager
        self.reports = reports
        self._scheduling = scheduling
        #: With shared report ingestion: ``(exchange, forward(report))``, a report taken from the
        #: agents' exchange is passed on to the other schedulers (scheduler.fleet.report_digests).
        self.forward = None

    # -- placement -------------------------------------------------------

    @rpc.callers(rpc.CLIENT, rpc.AGENT_OF_HOST, host=lambda args: sent_back_by(args.get("filter_properties")))
    def run_instance(self, context, request_spec, filter_properties):
        """Place the instances of a request (or of a reschedule an agent sent back).

        A request that is not valid raises InvalidRequest (the RPC server
        dead-letters it, once) after recording the refusal on the new instances it
        names (none on those it only counts); a reschedule is accepted only from the
        agent of the host that sent it back (the last host of its retry record: see
        sent_back_by), and only for instances the database has (Planner.admit): a
        send-back refused records nothing.
        """
        job = Job(context, self._accept(context, request_spec, filter_properties))
        invalid = self._scheduling.schedule([job])
        if invalid:
            raise InvalidRequest(str(invalid[0].error))

    @rpc.batch_of("run_instance")
    def _run_instances(self, calls):
        """run_instance for the requests of a batch: their rows written a few statements
        at a time, their hosts chosen one request after the other, as run_instance would."""
        outcomes, jobs = [], []
        for context, kwargs in calls:
            try:
                jobs.append(Job(context, self._accept(context, **kwargs)))
                outcomes.append(None)
            except InvalidRequest as exc:
                outcomes.append(exc)
        invalid = {id(refused.job): InvalidRequest(str(refused.error))
                   for refused in self._scheduling.schedule(jobs)}
        placed = iter(jobs)
        return [outcome if outcome is not None else invalid.get(id(next(placed))) for outcome in outcomes]

    def _accept(self, context, request_spec, filter_properties):
        try:
            return RequestSpec.from_wire(request_spec, filter_properties)
        except InvalidRequest as exc:
            if sent_back_by(filter_properties) is None:  # a send-back records nothing, not even its refusal
                self._scheduling.applier.refuse_unread(request_spec, f"Invalid request: {exc}",
                                                       rpc.request_id_of(context))
            raise

    @rpc.read_only
    @rpc.callers(rpc.CLIENT)
    def select_destinations(self, context, request_spec, filter_properties):
        """Where the instances of a request go, for a caller that builds them itself:
        the chosen hosts' resources are consumed (as Nova's select_destinations does),
        and nothing is written to the database (no instance, no server group member:
        a group's placements are read from the instances the scheduler records). A request
        with min_num_instances gets a host for as many of its instances as fit, in order."""
        spec = RequestSpec.from_wire(request_spec, filter_properties)
        planner = self._scheduling.planner
        lookups.prepare_spec(self._db, spec, add_members=False)  # zone, server group, host hints
        planner.check_honoured(spec)
        decisions = []
        with self.host_manager.lock:
            chosen = planner.selector.select(self.host_manager.table, spec, decisions,
                                             LOG.isEnabledFor(logging.DEBUG))
            selected = [{"host": h.host, "nodename": h.nodename, "limits": dict(h.limits)} for h in chosen]
        for instance_uuid, host, decision in zip(spec.instance_uuids, selected, decisions, strict=False):
            log_decision(instance_uuid, host["host"], decision, verb="Selected")
        return selected

    # -- what the agents tell us ------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def report_resources(self, context, host, resources):
        [outcome] = self._reports([(context, {"host": host, "resources": resources})])
        if outcome is not None:
            raise outcome

    @rpc.batch_of("report_resources")
    def _reports(self, calls):
        """Take agents' reports, each as report_resources would: one step of the unit of work
        and one dispatch for a batch of them, not one each."""
        outcomes = [None] * len(calls)
        forward = self.forward
        for index, (context, kwargs) in enumerate(rpc.each_request(calls)):
            host = kwargs["host"]
            try:
                report = HostReport.from_wire(kwargs["resources"], host)
            except InvalidRequest as exc:
                outcomes[index] = exc
                continue
            if self.host_manager.update_from_report(report):
                self.reports.put(host, report)
                if forward is not None and getattr(context, "exchange", None) == forward[0]:
                    forward[1](report)
            else:
                LOG.debug("Report %s of %s is older than the one taken already; ignored",
                          report.report_seq, host)
        return outcomes

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
        applied = self._db.set_instance_states(updates)
        not_applied = [u for (u, *_), ok in zip(updates, applied, strict=True) if not ok]
        unknown = set(not_applied).difference(self._db.get_instances(not_applied)) if not_applied else set()
        for index, (instance_uuid, host, values, _), ok in zip(accepted, updates, applied, strict=True):
            state = values["state"]
            if instance_uuid in unknown:
                outcomes[index] = InvalidRequest(f"instance_update from {host}: no instance {instance_uuid}")
            elif not ok:
                with rpc.handling(calls[index][0]):
                    LOG.debug("Update %s for %s from %s is stale or late; ignored", state, instance_uuid,
                              host)
            elif state in (states.ERROR, states.DELETED):
                self.host_manager.release(host, instance_uuid)
            elif state == states.SHUTOFF and calls[index][1].get("fault") is not None:
                with rpc.handling(calls[index][0]):
                    LOG.info("Instance %s on %s is SHUTOFF: %s", instance_uuid, host,
                             calls[index][1]["fault"].get("reason"))
        return outcomes

    def _check_update(self, now, context, instance_uuid, host, state, fault=None):
        """(uuid, host, values to write, the states it may move the instance from) of a valid update;
        raises InvalidRequest. SHUTOFF with a fault is of a guest that powered itself off (1.7): it
        moves an ACTIVE instance too; without one, a stop's, it ends the stop alone."""
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
        preceding = _MAY_PRECEDE[state]
        if state == states.SHUTOFF and fault is not None:
            preceding = (*preceding, states.ACTIVE)
        return instance_uuid, host, values, preceding

    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def start_build(self, context, instance_uuid, host):
        """(1.4) Asked by ``host``'s agent before it builds ``instance_uuid``: ``{"build": True}`` once
        the instance is BUILDING on ``host`` (it was SCHEDULED or BUILDING there), else ``{"build":
        False, "reason": ...}``: placed again elsewhere meanwhile (its host went down, its build timed
        out), deleted, or unknown; the agent drops it. A compare-and-set against the one that places it
        again (scheduler.fleet.build_expiry): of a build cast to a host that stopped and a reschedule,
        exactly one goes ahead, however late the agent takes the cast from its queue."""
        uuid = parse_uuid(instance_uuid, "start_build: instance_uuid")
        host_names.check(host, "start_build: host")
        if self._db.update_instances_if([(uuid, {"state": states.BUILDING},
                                          {"host": host, "state": (states.SCHEDULED, states.BUILDING)})]):
            return {"build": True}
        current = self._db.get_instance(uuid)
        if current is None:
            reason = f"no instance {uuid} is known"
        elif current["state"] == states.DELETED:
            reason = f"{uuid} was deleted"
        else:
            reason = f"{uuid} is {current['state']} on {current['host'] or 'no host'} now"
        LOG.info("Build of %s on %s not started: %s", uuid, host, reason)
        return {"build": False, "reason": reason}

    # -- clients' requests and reads ----------------------------------------

    @rpc.callers(rpc.CLIENT)
    def delete_instance(self, context, instance_uuid):
        instance_uuid = parse_uuid(instance_uuid, "delete_instance: instance_uuid")
        for _ in range(3):  # a local delete compares and sets: read again what changed meanwhile
            current = self._db.get_instance(instance_uuid)
            if current is None or current["state"] == states.DELETED:
                return
            if not current["host"] or not self._host_down(current["host"]):
                break
            if self._local_delete(context, current):
                return
        if current["host"]:
            LOG.info("Deleting instance %s on host %s", instance_uuid, current["host"])
            self._db.update_instance(instance_uuid, {"state": states.DELETING})
            self._scheduling.applier.terminate(context_values(context), current["host"], instance_uuid,
                                               DELETED_BY_CLIENT)
            other = current.get("move_host")
            if other and other != current["host"]:
                # Held on both hosts while it moves: both drop it, and the move ends.
                self._scheduling.applier.terminate(context_values(context), other, instance_uuid,
                                                   DELETED_BY_CLIENT)
                migration = self._db.active_migration(instance_uuid)
                if migration is not None:
                    self._db.update_migration(migration["id"], {
                        "status": "error", "reason": "the instance was deleted during the move"})
        else:
            self._db.update_instance(
                instance_uuid, {"state": states.DELETED, "deleted_at": self._db.now()}
            )

    def _host_down(self, host):
        """Whether ``host`` is down (or unknown) to this scheduler: its agent cannot act on a cast."""
        state = self.host_manager.get(host)
        return state is None or not self.host_manager.is_up(state)

    def _local_delete(self, context, current):
        """Delete at once an instance whose host is down, as Nova's local delete does: DELETED now,
        its claim released, no terminate cast to a queue nobody reads. Should the host's agent report
        again holding it, the reconciler tells it to terminate it (scheduler.fleet.holdings). The other
        host of a move under way, if any, is told to let it go, and the move ends. True if done."""
        uuid, host = current["uuid"], current["host"]
        if not self._db.update_instances_if([(uuid, {"state": states.DELETED, "deleted_at": self._db.now()},
                                              {"state": current["state"], "host": host})]):
            return False  # it changed meanwhile
        self.host_manager.release(host, uuid)
        why = ("has not reported to this scheduler" if self.host_manager.get(host) is None else
               "is down: its agent stopped" if host in self.host_manager.stopped else
               f"is down (no report for more than [scheduler] service_down_time, "
               f"{self._conf.scheduler.service_down_time} s)")
        LOG.warning("Instance %s deleted while its host %s %s: DELETED at once (a local delete); its agent "
                    "is told to terminate it if it reports again holding it", uuid, host, why)
        other = current.get("move_host")
        if other and other != host:
            self._scheduling.applier.terminate(context_values(context), other, uuid, DELETED_BY_CLIENT)
            self.host_manager.release(other, uuid)
            migration = self._db.active_migration(uuid)
            if migration is not None:
                self._db.update_migration(migration["id"], {
                    "status": "error", "reason": "the instance was deleted during the move"})
        return True

    # -- an instance's power (1.6) -----------------------------------------------

    @rpc.callers(rpc.CLIENT)
    def stop_instance(self, context, instance_uuid):
        """(1.6) Power an ACTIVE instance off: POWERING_OFF now, SHUTOFF once its agent says so; its
        host keeps its claim. The instance as recorded, or PowerRefused saying why nothing changed."""
        return self._power(context, instance_uuid, "stop", states.ACTIVE, states.POWERING_OFF)

    @rpc.callers(rpc.CLIENT)
    def start_instance(self, context, instance_uuid):
        """(1.6) Power a SHUTOFF instance on: POWERING_ON now, ACTIVE once its agent says so."""
        return self._power(context, instance_uuid, "start", states.SHUTOFF, states.POWERING_ON)

    @rpc.callers(rpc.CLIENT)
    def reboot_instance(self, context, instance_uuid, hard=False):
        """(1.6) Reboot an ACTIVE instance (``hard``: power it off and on, as a reset does, rather
        than ask its guest; also of an instance in ERROR on its host, as Nova's hard reboot, which
        boots it again from its own disk): REBOOTING now, ACTIVE again once its agent says so."""
        if not isinstance(hard, bool):
            raise InvalidRequest(f"reboot_instance: hard must be true or false, got {hard!r}"[:200])
        from_states = (states.ACTIVE, states.ERROR) if hard else (states.ACTIVE,)
        return self._power(context, instance_uuid, "reboot", from_states, states.REBOOTING, hard)

    def _power(self, context, instance_uuid, verb, from_state, to_state, hard=False):
        """``from_state``: the state the instance must be in, or a tuple of those it may be in."""
        uuid = parse_uuid(instance_uuid, f"{verb}_instance: instance_uuid")
        current = self._db.get_instance(uuid)
        if current is None or current["state"] == states.DELETED:
            raise InstanceNotFound(f"No instance {uuid}")
        state, host = current["state"], current["host"]
        from_states = from_state if isinstance(from_state, tuple) else (from_state,)
        if state not in from_states:
            hint = "; a hard reboot boots one in ERROR on its host again" if state == states.ERROR else ""
            only = f"only {_AN[from_states[0]]} {' or '.join(from_states)} instance can be{hint}"
            said = f"it is {state}{_WHY.get(state, '')}"
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: {said}; {only}")
        if host is None:
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: it is on no host (it was never "
                               "built); delete it")
        host_state = self.host_manager.get(host)
        if host_state is None or not self.host_manager.is_up(host_state):
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: its host {host} is down (no report "
                               "within [scheduler] service_down_time, or its agent stopped)")
        if traits.POWER_CONTROL not in host_state.traits:
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: the driver of its host {host} does "
                               "not power instances off and on (its agent does not report "
                               f"{traits.POWER_CONTROL}: a driver without power_control, or an agent "
                               "older than compute API 2.1)")
        capped = self._scheduling.applier.can_power()
        if capped is not None:
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: {capped}")
        if not self._db.update_instances_if([(uuid, {"state": to_state},
                                              {"state": state, "host": host})]):
            now = self._db.get_instance(uuid) or {"state": states.DELETED}
            raise PowerRefused(f"Instance {uuid} cannot be {_PAST[verb]}: it changed meanwhile (it is "
                               f"{now['state']} now)")
        action = {"stop": "power_off", "start": "power_on", "reboot": "reboot"}[verb]
        LOG.info("Instance %s on %s: %s%s (%s)", uuid, host, verb, " --hard" if hard else "", to_state)
        self._scheduling.applier.power(context_values(context), host, uuid, action, hard)
        return dict(current, state=to_state)

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
            json_checks.sized_list(uuids, "uuids", 0, MAX_LIST, "instance UUIDs")
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


#: The states an agent's update may move an instance from, by the state it reports: ACTIVE ends a
#: build, a start or a reboot, SHUTOFF a stop; a late or repeated one finds the instance past them and
#: changes nothing (a stop's SHUTOFF does not undo the start that followed it).
_MAY_PRECEDE = {
    states.BUILDING: (states.SCHEDULED,),
    states.ACTIVE: (states.SCHEDULED, states.BUILDING, states.POWERING_ON, states.REBOOTING),
    states.SHUTOFF: (states.POWERING_OFF,),
    states.ERROR: (states.SCHEDULED, states.BUILDING, states.ACTIVE, *states.POWER),
    states.DELETED: tuple(s for s in states.ALL if s != states.DELETED),
}
_AN = {states.ACTIVE: "an", states.SHUTOFF: "a"}
#: How a refusal names each power action.
_PAST = {"stop": "stopped", "start": "started", "reboot": "rebooted"}
#: What a refusal adds about the state the instance is in.
_WHY = {
    states.SHUTOFF: " (stopped already)",
    states.POWERING_OFF: " (being stopped)",
    states.POWERING_ON: " (being started)",
    states.REBOOTING: " (being rebooted)",
    states.MIGRATING: " (being moved)",
    states.VERIFY_RESIZE: " (resized, waiting for confirm or revert)",
    states.BUILDING: " (being built)",
    states.SCHEDULING: " (not placed yet)",
    states.SCHEDULED: " (not built yet)",
    states.DELETING: " (being deleted)",
    states.ACTIVE: " (running already)",
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
        # the moving averages of the load its agent measures (None: not measured)
        "cpu_util": round(float(state.cpu_util), 4) if state.util_measured else None,
        "mem_util": round(float(state.mem_util), 4) if state.util_measured else None,
        "inventories": _inventories_view(state),
        "traits": sorted(state.traits),
        "instance_load": _instance_load_view(state.table.instance_load.get(state.row)),
    }


#: What the classic resource classes' "used" is on a host: their own columns, not a resource class's.
_CLASSIC_USED = {"VCPU": "vcpus_used", "MEMORY_MB": "ram_used_mb", "DISK_GB": "disk_used_gb"}


def _inventories_view(state):
    """{resource class: its inventory as last reported, and the units used} ({} when none reported)."""
    found = {}
    for name, inventory in sorted(state.inventories.items()):
        used = getattr(state, _CLASSIC_USED[name]) if name in _CLASSIC_USED else state.used(name)
        found[name] = {"total": inventory.total, "reserved": inventory.reserved,
                       "allocation_ratio": float(inventory.allocation_ratio), "min_unit": inventory.min_unit,
                       "max_unit": inventory.largest, "step_size": inventory.step_size,
                       "used": _number(used)}
    return found


def _instance_load_view(load):
    """The measured use of the host's instances (moving averages), None when its agent measures none."""
    if load is None:
        return None
    return {"background_cpu": round(float(load.background_cpu), 4),
            "background_memory_mb": round(float(load.background_memory_mb), 1),
            "instances": {uuid: {"cpu": round(float(cpu), 4), "memory_mb": round(float(memory), 1)}
                          for uuid, (cpu, memory) in sorted(load.usage.items())}}


def _number(value):
    value = float(value)
    return int(value) if value.is_integer() else round(value, 4)
