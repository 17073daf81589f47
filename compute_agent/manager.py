"""The compute agent service: its RPC endpoint, its builds and its reports.

One :class:`ComputeManager` per host. It consumes ``compute.<host>``, claims
each instance against the limits the scheduler sent, records it in the
instance store, builds it in a worker thread, and tells the scheduler what
happened (``instance_update``). A claim the host cannot honour goes back to
the scheduler as a ``run_instance`` with this host in the retry record.
A move (``move_instance``) is claimed the same way by its destination, recorded
MIGRATING and taken in by the driver in a worker thread; a resize on the
instance's own host holds the larger of both flavors until ``end_resize``.
Either ends in a ``move_update`` to the scheduler.
A reporter thread fans ``report_resources`` out to the schedulers at once,
every ``report_interval`` seconds and (with ``report_on_change``) soon after
every claim or release.

Several managers can live in one process (all-in-one), each with its own
host name, driver and instance file.
"""

import collections
import copy
import functools
import logging
import threading
import time
from typing import NamedTuple

from compute_agent import driver as drivers
from compute_agent import telemetry, validate
from compute_agent.client import TOPIC
from compute_agent.fake_load_endpoint import FakeLoadEndpoint
from compute_agent.instance_store import InstanceStore
from compute_agent.move_steps import FINISHING, MIGRATING_OUT, PREPARING, MoveSteps, driven, move_step
from compute_agent.resource_tracker import (
    ClaimFailed,
    ResourceTracker,
    flavor_amounts,
    isotime,
    larger_amounts,
    larger_flavor,
)
from scheduler import api_versions, concurrency, rpc
from scheduler.client import HOST_STOPS_VERSION, PLACED_AT, SchedulerClient
from scheduler.exception import InstanceNotFound, InvalidRequest
from scheduler.states import (
    ACTIVE,
    BUILDING,
    DELETED,
    ERROR,
    MIGRATING,
    POWERING,
    POWERING_OFF,
    POWERING_ON,
    REBOOTING,
    SHUTOFF,
)

LOG = logging.getLogger(__name__)

JOIN_TIMEOUT = 10.0
#: Seconds an agent waits for a scheduler's answer to start_build before it asks again.
START_BUILD_TIMEOUT = 5.0
#: The power actions (compute API 2.1): what each is while under way, the state it ends in and the
#: state it must find.
POWER_OFF, POWER_ON, REBOOT = "power_off", "power_on", "reboot"
_POWER = {
    POWER_OFF: (POWERING_OFF, SHUTOFF, ACTIVE),
    POWER_ON: (POWERING_ON, ACTIVE, SHUTOFF),
    REBOOT: (REBOOTING, ACTIVE, ACTIVE),
}
#: The most console lines one console_output returns.
MAX_CONSOLE_LINES = 10000


class ClaimWords(NamedTuple):
    """How the log and the reasons name what _claim_and_record claims and records."""

    claim_failed: str
    record_failed: str
    recorded: str


INSTANCE = ClaimWords("Cannot claim resources for %s", "Cannot record instance %s", "the instance")
RESIZE = ClaimWords("Cannot claim the new flavor of %s", "Cannot record the resize of %s", "the resize")


def _context_values(context):
    """The caller's context as a dict, to forward with our own casts."""
    if context is None:
        return {}
    values = context if isinstance(context, dict) else getattr(context, "values", None)
    return dict(values) if isinstance(values, dict) else {}


class _Endpoint:
    """What both versions of the compute API serve alike; every method is a cast, whose arguments
    are checked (InvalidRequest: dead-lettered, or the caller's error) before anything changes."""

    def __init__(self, manager):
        self._manager = manager

    @rpc.callers(rpc.SCHEDULER)
    def run_instance(self, context, instance, request_spec=None, filter_properties=None):
        instance, request_spec, filter_properties = validate.run_instance_args(
            instance, request_spec, filter_properties
        )
        self._manager.run_instance(context, instance, request_spec, filter_properties)

    @rpc.callers(rpc.SCHEDULER)
    def terminate_instance(self, context, instance_uuid, reason=None):
        """``reason`` (1.1): why the scheduler terminates it, which is logged."""
        self._manager.terminate_instance(context, validate.instance_uuid(instance_uuid, "terminate_instance"),
                                         validate.reason(reason, "terminate_instance"))

    @rpc.callers(rpc.SCHEDULER)
    def end_resize(self, context, instance_uuid, migration_id, confirmed):
        """(1.2) Settle the resize in place ``migration_id``: hold the new flavor (``confirmed``)
        or the old one."""
        self._manager.end_resize(context, *validate.end_resize_args(instance_uuid, migration_id, confirmed))


class ComputeEndpoint(_Endpoint):
    """What the agent exposes over RPC: version ``RPC_API`` (2.0) of the compute API
    (scheduler.api_versions.COMPUTE); ComputeV1Endpoint serves 1.x beside it."""

    RPC_API = api_versions.COMPUTE

    @rpc.callers(rpc.SCHEDULER)
    def prepare_move(self, context, instance, request_spec, filter_properties, migration):
        """Claim ``instance`` as the destination of ``migration`` and prepare to take it in (on its
        own host: resize it in place); answered with the scheduler's move_update."""
        self._manager.prepare_move(context, *validate.prepare_move_args(
            instance, request_spec, filter_properties, migration))

    @rpc.callers(rpc.SCHEDULER)
    def migrate_out(self, context, instance_uuid, migration, transfer):
        """Hand the instance over to the destination of ``migration``, which prepared ``transfer``."""
        self._manager.migrate_out(context, *validate.migrate_out_args(instance_uuid, migration, transfer))

    @rpc.callers(rpc.SCHEDULER)
    def finish_move(self, context, instance_uuid, migration_id):
        """Take in the instance the source of ``migration_id`` handed over."""
        self._manager.finish_move(context, *validate.move_step_args(instance_uuid, migration_id,
                                                                    "finish_move"))

    @rpc.callers(rpc.SCHEDULER)
    def abort_move(self, context, instance_uuid, migration_id):
        """Run the instance here again, as before the move ``migration_id`` (which failed, or a
        resize reverted)."""
        self._manager.abort_move(context, *validate.move_step_args(instance_uuid, migration_id, "abort_move"))


    @rpc.callers(rpc.SCHEDULER)
    def power_off_instance(self, context, instance_uuid):
        """(2.1) Power the instance off (SHUTOFF, its claim kept); answered with instance_update."""
        self._manager.power(context, validate.instance_uuid(instance_uuid, "power_off_instance"), POWER_OFF)

    @rpc.callers(rpc.SCHEDULER)
    def power_on_instance(self, context, instance_uuid):
        """(2.1) Power the SHUTOFF instance on; answered with instance_update ACTIVE."""
        self._manager.power(context, validate.instance_uuid(instance_uuid, "power_on_instance"), POWER_ON)

    @rpc.callers(rpc.SCHEDULER)
    def reboot_instance(self, context, instance_uuid, hard=False):
        """(2.1) Reboot the instance (``hard``: reset it); answered with instance_update ACTIVE."""
        if not isinstance(hard, bool):
            raise InvalidRequest(f"reboot_instance: hard must be true or false, got {hard!r}"[:200])
        self._manager.power(context, validate.instance_uuid(instance_uuid, "reboot_instance"), REBOOT, hard)

    @rpc.read_only
    @rpc.callers(rpc.CLIENT)
    def console_output(self, context, instance_uuid, lines=None):
        """(2.1) A call: ``{"instance_uuid", "host", "lines"}``, the last ``lines`` lines (None: the
        last MAX_CONSOLE_LINES) of the instance's serial console."""
        uuid = validate.instance_uuid(instance_uuid, "console_output")
        if lines is not None and (type(lines) is not int or not 0 < lines <= MAX_CONSOLE_LINES):
            raise InvalidRequest(f"console_output: lines must be a whole number from 1 to "
                                 f"{MAX_CONSOLE_LINES}, got {lines!r}"[:200])
        return self._manager.console_output(uuid, lines)


class ComputeV1Endpoint(_Endpoint):
    """Version 1.x of the compute API, served beside 2.0 for the schedulers of an older release (or
    capped below 2.0 while agents of an older release run): a move's destination takes it alone
    (move_instance). set_fake_load and clear_fake_load are served by FakeLoadEndpoint."""

    RPC_API = api_versions.COMPUTE.at("1.2")

    @rpc.callers(rpc.SCHEDULER)
    def move_instance(self, context, instance, request_spec, filter_properties, migration):
        """(1.2) Take ``instance`` over as the destination of ``migration`` (its own host's: a
        resize in place); the outcome goes back as the scheduler's move_update."""
        self._manager.move_instance(context, *validate.move_instance_args(
            instance, request_spec, filter_properties, migration))


class ComputeManager(MoveSteps):
    _context = staticmethod(_context_values)
    _claim_words = INSTANCE

    def __init__(self, conf, transport, host=None, driver=None):
        self.conf = conf
        self.transport = transport
        self.host = host or conf.host
        self.nodename = conf.compute_agent.nodename or self.host
        self.driver = driver if driver is not None else drivers.load_driver(conf)
        self.started_at = isotime()
        self.tracker = ResourceTracker.from_conf(
            conf, self.host, self.nodename, self.driver, started_at=self.started_at
        )
        self.store = InstanceStore(conf.state_path, self.host)
        self.scheduler = SchedulerClient(transport)
        # Orders claims, state changes and the instance_update casts that
        # announce them, so that the scheduler sees each instance's states in order.
        self._lock = threading.RLock()
        self._cond = threading.Condition()
        self._stopping = False
        self._dirty = False
        self._server = None
        self._reporter = None
        self._builds = {}
        self._terminating = set()  # uuids whose guest is being destroyed: not lost, going
        self._unsent = collections.deque()  # (method, args, kwargs) not sent yet, oldest first
        self._unsent_lock = threading.RLock()

    # -- service -------------------------------------------------------------

    def start(self):
        """Take the host (no other agent may serve it), load its instances, consume
        compute.<host> alone, report, resume builds.

        Raises HostTaken or rpc.QueueInUse when another agent serves the host.
        """
        self.store.acquire()
        try:
            self._start()
        except BaseException:
            self.store.release()
            raise

    def _start(self):
        resume = []
        records = self.store.load()
        for uuid, record in sorted(records.items()):
            instance = record.get("instance") or {}
            self.tracker.claim(uuid, _held_flavor(record), image_properties=_image_properties(record),
                               project_id=instance.get("project_id"), amounts=_held_amounts(record),
                               checked=False)
            if record.get("state") in (ACTIVE, SHUTOFF):
                try:
                    self.driver.restore_power_state(instance, powered_on=record["state"] == ACTIVE)
                except Exception:
                    LOG.exception("Cannot keep %s %s as its record says", uuid, record["state"])
            work = _unfinished(record)
            if work is not None:
                resume.append((uuid, record.get("request_id"), work))
        LOG.info(
            "Compute agent %s (node %s, %s driver) starting with %d instance(s), %d to build or move",
            self.host,
            self.nodename,
            self.driver.hypervisor_type,
            len(self.tracker.instance_uuids()),
            len(resume),
        )
        lost = self.driver.attach(sorted(uuid for uuid, record in records.items()
                                         if record.get("state") == ACTIVE))
        endpoints = self._endpoints()
        self._consuming_since = time.time()  # replaced when the server hears the broker again
        self._server = rpc.get_rpc_server(
            self.transport, rpc.Target(topic=TOPIC, server=self.host), endpoints,
            exclusive=True, access=rpc.Access.from_conf(self.conf), hearing=self,
        )
        try:
            self._server.start()
        except rpc.QueueInUse as exc:
            raise rpc.QueueInUse(f"another agent serves host {self.host}: {exc}; stop it, or give "
                                 "this one another [DEFAULT] host") from None
        self._reporter = concurrency.spawn(self._report_loop, name=f"report-{self.host}")
        for uuid, reason in sorted(lost.items()):
            self._lost(uuid, reason)
        for uuid, request_id, what in resume:
            # Placed before this agent began consuming: a build resumed asks before it goes on.
            ctxt = {"request_id": request_id or rpc.new_request_id(), PLACED_AT: 0}
            with rpc.handling(ctxt):
                LOG.info("Resuming the %s of %s", what, uuid)
            self._start_work(ctxt, uuid, what)

    def check_guests(self):
        """Put in ERROR the ACTIVE instances whose guest the driver finds gone or ended (a guest that
        died, or was killed, while the agent runs), and SHUTOFF those whose guest powered itself off;
        run before each periodic report."""
        active = sorted(self.store.select(lambda record: True if record.get("state") == ACTIVE else None))
        if not active:
            return
        try:
            lost = self.driver.lost(active)
            shut_down = self.driver.shut_down([uuid for uuid in active if uuid not in lost])
        except Exception:
            LOG.exception("Cannot look at the guests of %s", self.host)
            return
        for uuid, reason in sorted(lost.items()):
            self._lost(uuid, reason)
        for uuid, reason in sorted(shut_down.items()):
            if self.scheduler.hears_guests_shut_down():
                self._shut_down(uuid, reason)
            else:  # a scheduler of an older release would not take SHUTOFF from an ACTIVE instance
                self._lost(uuid, reason)

    def _shut_down(self, uuid, reason):
        """An instance whose guest powered itself off: SHUTOFF (its claim kept, as a stop's), the
        scheduler told why."""
        self._guest_ended(uuid, SHUTOFF, reason)

    def _lost(self, uuid, reason):
        """An instance whose guest the driver found gone (at start, or since): ERROR, with the
        reason; it stays held here until it is deleted, as Nova keeps an instance in ERROR on its
        host."""
        self._guest_ended(uuid, ERROR, reason)

    def _guest_ended(self, uuid, state, reason):
        """Record the ACTIVE instance ``uuid`` in ``state`` (ERROR, SHUTOFF) and tell the scheduler
        why; not one that is being terminated, or changed state meanwhile."""
        with self._lock:
            held = self.store.get(uuid)
            if held is None or held.get("state") != ACTIVE or uuid in self._terminating:
                return
            LOG.log(logging.WARNING if state == ERROR else logging.INFO, "Instance %s on %s: %s; it is %s",
                    uuid, self.host, reason, "in ERROR" if state == ERROR else state)
            try:
                self.store.set_state(uuid, state)
            except Exception:
                LOG.exception("Cannot record %s as %s", uuid, state)
            self._instance_update({"request_id": rpc.new_request_id()}, uuid, state, fault={"reason": reason})

    def _endpoints(self):
        """What the agent serves on compute.<host>: both versions of the compute API, and the fake
        driver's load."""
        return [ComputeEndpoint(self), ComputeV1Endpoint(self),
                FakeLoadEndpoint(self.host, self.driver, self.tracker, self._report_changed)]

    def stop(self):
        """Stop consuming, interrupt builds (they resume at the next start), join."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.stop()
            self._server.wait()
        self.driver.stop()
        threads = [self._reporter] if self._reporter is not None else []
        with self._lock:
            threads += list(self._builds.values())
        for thread in threads:
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                LOG.warning("%s did not stop within %.0f s", thread.name, JOIN_TIMEOUT)
        if self._server is not None:  # it started: the schedulers know the host
            self._report_stopped()
        self.store.release()
        LOG.info("Compute agent %s stopped", self.host)

    def _report_stopped(self):
        """The last report, saying the agent stopped: the schedulers take the host for down at once
        (no placement, its builds not begun placed again) rather than for service_down_time more."""
        self._send_unsent()
        try:
            sent = self.scheduler.report_stopped({}, self.host, self.tracker.report())
        except Exception as exc:
            LOG.warning("Cannot tell the schedulers that %s stops (%s): they take it for down once it has "
                        "not reported for their service_down_time", self.host, exc)
            return
        if sent:
            LOG.info("Told the schedulers that %s stops: it is down until its agent reports again", self.host)
        else:
            LOG.info("Not telling the schedulers that %s stops: [upgrade_levels] scheduler is below %s; they "
                     "take it for down once it has not reported for their service_down_time", self.host,
                     HOST_STOPS_VERSION)

    # -- RPC endpoint ----------------------------------------------------------

    def run_instance(self, context, instance, request_spec=None, filter_properties=None):
        ctxt = _context_values(context)
        request_spec = request_spec if isinstance(request_spec, dict) else {}
        filter_properties = filter_properties if isinstance(filter_properties, dict) else {}
        uuid = instance.get("uuid") if isinstance(instance, dict) else None
        if not uuid:
            LOG.error("run_instance without an instance uuid, ignored: %r", instance)
            return
        with self._lock:
            if uuid in self.store or uuid in self.tracker:
                LOG.info("Instance %s is already on %s; repeated build request ignored", uuid, self.host)
                return
            claim = functools.partial(self._claim, instance, request_spec, filter_properties)
            reason = self._claim_and_record(uuid, INSTANCE, claim, {
                "instance": instance,
                "state": BUILDING,
                "request_spec": request_spec,
                "filter_properties": filter_properties,
                "request_id": ctxt.get("request_id"),  # a build resumed after a restart keeps it
            })
            if reason is None:
                self._instance_update(ctxt, uuid, BUILDING)
        if reason is not None:
            telemetry.CLAIMS.labels(telemetry.REFUSED).inc()
            LOG.warning("Cannot build %s on %s: %s; sending it back", uuid, self.host, reason)
            self._reschedule(ctxt, instance, request_spec, filter_properties, reason)
            return
        telemetry.CLAIMS.labels(telemetry.CLAIMED).inc()
        LOG.info("Claimed %s on %s; building", uuid, self.host)
        self._report_changed()
        self._start_build(ctxt, uuid)

    def terminate_instance(self, context, instance_uuid, reason=None):
        """Destroy the instance and forget it; DELETED is reported only once its record
        is gone, so that what this agent holds after a restart is what it said. ``reason``:
        why the scheduler terminates it (None from a scheduler capped at compute API 1.0)."""
        ctxt = _context_values(context)
        record = self.store.get(instance_uuid)
        if record is not None:
            with self._lock:
                self._terminating.add(instance_uuid)
            try:
                self.driver.destroy(record.get("instance") or {"uuid": instance_uuid})
            except Exception:
                LOG.exception("Destroying %s failed; releasing its resources anyway", instance_uuid)
        with self._lock:
            self._terminating.discard(instance_uuid)
            try:
                self.store.delete(instance_uuid)
            except Exception as exc:
                # Still in the records, so still held: it would come back at the next start.
                LOG.error("Cannot remove %s from the instance records (%s); it stays held on %s, and "
                          "DELETING, until a terminate finds the records writable again",
                          instance_uuid, exc, self.host)
                return
            freed = self.tracker.free(instance_uuid)
            self._instance_update(ctxt, instance_uuid, DELETED)
        why = "" if reason is None else f" ({reason})"
        if record is None and not freed:
            LOG.warning("Terminate of %s%s, which %s does not hold: reported DELETED, as nothing of it "
                        "is here", instance_uuid, why, self.host)
        else:
            LOG.info("Terminated %s%s", instance_uuid, why)
            self._report_changed()

    # -- claims: builds, moves in, resizes in place --------------------------------

    def _claim(self, instance, request_spec, filter_properties):
        """Claim ``instance``'s flavor against the scheduler's limits (ClaimFailed when it does not fit)."""
        self.tracker.claim(instance["uuid"], instance.get("flavor"), filter_properties.get("limits"),
                           image_properties=_image_properties({"request_spec": request_spec}),
                           project_id=instance.get("project_id"))

    def _claim_and_record(self, uuid, words, claim, record, give_back=None):
        """Claim (``claim()``), then write ``record`` as ``uuid``'s; when the record cannot be
        written, give the claim back (``give_back()``, by default free the instance's claim), so
        that the host holds what its records say. None when both are done, else why not, as the
        scheduler is told (``words``: INSTANCE or RESIZE, which name what is claimed and recorded)."""
        try:
            claim()
        except ClaimFailed as exc:
            return str(exc)
        except Exception as exc:  # a malformed flavor or limits
            LOG.exception(words.claim_failed, uuid)
            return f"cannot claim: {exc}"
        try:
            self.store.put(uuid, record)
        except Exception as exc:
            LOG.exception(words.record_failed, uuid)
            if give_back is None:
                self.tracker.free(uuid)
            else:
                give_back()
            return f"cannot record {words.recorded}: {exc}"
        return None

    # -- builds ----------------------------------------------------------------

    def _start_build(self, ctxt, uuid):
        self._start_work(ctxt, uuid, "build")

    def _start_work(self, ctxt, uuid, what):
        """Run the ``what`` (build, move, resize) of ``uuid`` in a thread of its own, which
        stop() interrupts and joins."""
        work = {"build": self._do_build, "move": self._move_in, "resize": self._resize,
                "prepare": self._prepare, "migrate_out": self._migrate_out, "finish": self._finish,
                "power": self._power}[what]
        with self._lock:
            thread = concurrency.spawn(self._work, work, what, ctxt, uuid, name=f"{what}-{uuid}")
            self._builds[uuid] = thread

    def _work(self, work, what, ctxt, uuid):
        with rpc.handling(ctxt):
            try:
                work(ctxt, uuid)
            except Exception:
                LOG.exception("Unexpected error in the %s of %s", what, uuid)
            finally:
                with self._lock:
                    if self._builds.get(uuid) is threading.current_thread():
                        del self._builds[uuid]

    def _do_build(self, ctxt, uuid):
        record = self.store.get(uuid)
        if record is None or not self._may_build(ctxt, uuid):
            return
        instance = record["instance"]
        started = time.monotonic()
        try:
            self.driver.spawn(driven(record))
        except drivers.BuildAborted:
            telemetry.BUILDS.labels(telemetry.INTERRUPTED).inc()
            LOG.info("Build of %s interrupted; it resumes when the agent starts again", uuid)
            return
        except Exception as exc:
            telemetry.BUILDS.labels(telemetry.FAILED).inc()
            said = isinstance(exc, drivers.BuildFailed)  # said whole: no traceback
            LOG.log(logging.WARNING if said else logging.ERROR, "Build of %s failed: %s", uuid, exc,
                    exc_info=not said)
            self.tracker.build_finished(succeeded=False)  # BuildFailureWeigher
            with self._lock:
                held = self.store.get(uuid)
                if held is None or held.get("state") != BUILDING:
                    return  # terminated meanwhile
                self._let_go(uuid)
            self._report_changed()
            self._reschedule(
                ctxt,
                instance,
                record.get("request_spec") or {},
                record.get("filter_properties") or {},
                f"build failed: {exc}",
            )
            return
        with self._lock:
            if uuid in self.store:
                try:
                    self.store.set_state(uuid, ACTIVE)
                except Exception:
                    LOG.exception("Cannot record %s as ACTIVE", uuid)
                self._instance_update(ctxt, uuid, ACTIVE)
                self.tracker.build_finished(succeeded=True)
                telemetry.BUILDS.labels(telemetry.ACTIVE).inc()
                telemetry.BUILD_SECONDS.observe(time.monotonic() - started)
                LOG.info("Instance %s is ACTIVE on %s", uuid, self.host)
                return
        # Terminated while it was being built: undo what the build made.
        try:
            self.driver.destroy(instance)
        except Exception:
            LOG.exception("Destroying %s after its build failed", uuid)

    # -- an instance's power (compute API 2.1) ---------------------------------------

    def power(self, context, uuid, action, hard=False):
        """Record ``action`` (POWER_OFF, POWER_ON, REBOOT) on the instance's record, and run it with the
        driver in a worker thread, which tells the scheduler the outcome (instance_update). A repeat of
        one under way, or done already, is not done twice: one done is said again."""
        ctxt = _context_values(context)
        under_way, done, needs = _POWER[action]
        said, reason = None, None
        with self._lock:
            record = self.store.get(uuid)
            state = (record or {}).get("state")
            if not self.driver.capabilities.power_control:
                reason = f"{self.host}: its {self.driver.name} driver cannot power instances off and on"
            elif record is None:
                reason = f"{self.host}: does not hold {uuid}"
            elif state == under_way and (record.get("power") or {}).get("action") == action:
                LOG.info("%s of %s is under way on %s already; repeated request ignored", action, uuid,
                         self.host)
                return
            elif state == done and action != REBOOT:
                said = done  # done already: its word was lost, or the request came twice
            elif state != needs and not (action == REBOOT and hard and state == ERROR):
                reason = (f"{self.host}: {uuid} is {state} here, not {needs}; cannot "
                          f"{action.replace('_', ' ')} it")
            else:
                try:
                    self.store.put(uuid, dict(record, state=under_way,
                                              power={"action": action, "hard": hard}))
                except Exception as exc:
                    LOG.exception("Cannot record the %s of %s", action, uuid)
                    reason = f"{self.host}: cannot record the {action.replace('_', ' ')}: {exc}"
            if said is not None:
                LOG.info("%s of %s: it is %s on %s already; saying so again", action, uuid, said, self.host)
                self._instance_update(ctxt, uuid, said)
                return
        if reason is not None:
            LOG.warning("Cannot %s %s: %s", action.replace("_", " "), uuid, reason)
            self._instance_update(ctxt, uuid, ERROR, fault={"reason": reason})
            return
        LOG.info("%s%s of %s on %s", action, " (hard)" if hard else "", uuid, self.host)
        self._start_work(ctxt, uuid, "power")

    def _power(self, ctxt, uuid):
        record = self.store.get(uuid)
        power = (record or {}).get("power") or {}
        action = power.get("action")
        if action not in _POWER or record.get("state") != _POWER[action][0]:
            return
        under_way, done, _ = _POWER[action]
        instance = record["instance"]
        try:
            if action == POWER_OFF:
                self.driver.power_off(instance)
            elif action == POWER_ON:
                self.driver.power_on(instance)
            else:
                self.driver.reboot(instance, hard=bool(power.get("hard")))
        except drivers.BuildAborted:
            LOG.info("%s of %s interrupted; it resumes when the agent starts again", action, uuid)
            return
        except Exception as exc:
            LOG.exception("%s of %s failed", action, uuid)
            outcome, fault = ERROR, {"reason": f"{self.host}: {action.replace('_', ' ')} failed: {exc}"}
        else:
            outcome, fault = done, None
        with self._lock:
            held = self.store.get(uuid)
            if held is None or held.get("state") != under_way:
                return  # terminated meanwhile
            held = dict(held, state=outcome)
            held.pop("power", None)
            try:
                self.store.put(uuid, held)
            except Exception:
                LOG.exception("Cannot record %s as %s", uuid, outcome)
            self._instance_update(ctxt, uuid, outcome, fault=fault)
        LOG.info("Instance %s is %s on %s (%s)", uuid, outcome, self.host, action)

    def console_output(self, uuid, lines=None):
        """The console's last ``lines`` of an instance this host holds (compute API 2.1)."""
        record = self.store.get(uuid)
        if record is None:
            raise InstanceNotFound(f"{self.host} does not hold instance {uuid}")
        said = self.driver.console_output(record.get("instance") or {"uuid": uuid},
                                          lines or MAX_CONSOLE_LINES)
        if said is None:
            raise InvalidRequest(f"{self.host}: its {self.driver.name} driver keeps no console of its "
                                 "instances")
        return {"instance_uuid": uuid, "host": self.host, "lines": list(said)}

    # The RPC server's word on its connection: a build placed before it consumes again may have
    # waited in the queue while the host was taken for down, and placed again elsewhere.
    def deaf(self, since):
        pass

    def heard(self, now):
        self._consuming_since = time.time()

    def _waited(self, ctxt):
        """Whether a build cast with ``ctxt`` may have waited in this host's queue while the agent was
        not consuming it: placed before the agent (re)began consuming (by the two machines' clocks,
        which NTP keeps within milliseconds), or resumed at start. One that does not say when it was
        placed (from a scheduler before PLACED_AT, which could not answer start_build, or cast by a
        tool) is built as before."""
        placed_at = ctxt.get(PLACED_AT)
        if not isinstance(placed_at, int | float) or isinstance(placed_at, bool):
            return False
        return placed_at < self._consuming_since

    def _may_build(self, ctxt, uuid):
        """Whether the scheduler still places ``uuid`` here (start_build, scheduler API 1.4): a build
        cast may have waited in this host's queue while the host was down and the instance was placed
        again elsewhere, or the instance was placed again while this agent was stopped mid-build. One
        placed elsewhere is dropped here (its claim and record), unbuilt. Until a scheduler answers,
        the build waits (stop() ends the wait: it resumes, and asks, at the next start). Capped below
        1.4, or with schedulers that do not serve 1.4 yet, the agent builds without asking."""
        if not self._waited(ctxt) or not self.scheduler.can_send_version(HOST_STOPS_VERSION):
            return True
        delay = 1.0
        while True:
            try:
                answer = self.scheduler.start_build(ctxt, uuid, self.host, timeout=START_BUILD_TIMEOUT)
                break
            except rpc.RemoteError as exc:
                if exc.exc_type in ("UnsupportedVersion", "NoSuchMethod"):
                    LOG.warning("The scheduler does not serve start_build (%s); building %s without asking. "
                                "Set [upgrade_levels] scheduler = 1.3 while schedulers older than 1.4 run",
                                exc, uuid)
                    return True
                error = exc
            except Exception as exc:
                error = exc
            with self._cond:
                if self._stopping:
                    return False  # resumed, and asked again, at the next start
                LOG.warning("Cannot ask the scheduler whether to build %s (%s); asking again in %.0f s",
                            uuid, error, delay)
                self._cond.wait(delay)
                if self._stopping:
                    return False
            delay = min(delay * 2, 30.0)
        if isinstance(answer, dict) and answer.get("build"):
            return True
        reason = answer.get("reason") if isinstance(answer, dict) else None
        with self._lock:
            held = self.store.get(uuid)
            if held is None or held.get("state") != BUILDING:
                return False  # terminated meanwhile
            try:
                self.store.delete(uuid)
            except Exception:
                LOG.exception("Cannot remove %s from the instance records; it stays held until terminated",
                              uuid)
                return False
            self.tracker.free(uuid)
        LOG.info("Not building %s on %s: the scheduler placed it elsewhere meanwhile (%s); claim dropped",
                 uuid, self.host, reason or "no reason given")
        self._report_changed()
        return False

    # -- moves: this host the destination (migration_move) or the host of a resize in place --

    def move_instance(self, context, instance, request_spec, filter_properties, migration):
        """Claim ``instance`` (its new flavor) against the limits and take it over in a worker
        thread; of an instance this host holds (``migration["source_host"]`` is this host), resize
        its claim in place. The outcome goes to the scheduler as move_update."""
        ctxt = _context_values(context)
        if migration["source_host"] == self.host:
            if migration["kind"] == "resize":
                self._resize_in_place(ctxt, instance, filter_properties, migration)
            else:
                self._move_failed(ctxt, instance["uuid"], migration["id"],
                                  f"{self.host}: cannot take in a {migration['kind']} from itself")
            return
        uuid, migration_id = instance["uuid"], migration["id"]
        with self._lock:
            record = self.store.get(uuid)
            if self._repeated(ctxt, record, uuid, migration_id, "Move"):
                return
            reason = self._claim_move_in(ctxt, instance, request_spec, filter_properties, migration)
        if reason is not None:
            LOG.warning("Cannot take in %s (%s %s) on %s: %s", uuid, migration["kind"], migration_id,
                        self.host, reason)
            self._move_failed(ctxt, uuid, migration_id, reason)
            return
        LOG.info("Claimed %s on %s; taking it in from %s (%s %s)", uuid, self.host,
                 migration["source_host"], migration["kind"], migration_id)
        self._report_changed()
        self._start_work(ctxt, uuid, "move")

    def _move_in(self, ctxt, uuid):
        record = self.store.get(uuid)
        if record is None or record.get("state") != MIGRATING:
            return
        instance, migration = record["instance"], record["migration"]
        started = time.monotonic()
        try:
            self.driver.migrate_in(instance, migration)
        except drivers.BuildAborted:
            LOG.info("Move of %s interrupted; it resumes when the agent starts again", uuid)
            return
        except Exception as exc:
            self._driver_failed("Move", uuid, exc, started)
            with self._lock:
                if not self._moving(uuid, migration["id"]):
                    return  # terminated meanwhile
                self._let_go(uuid)
                self._move_failed(ctxt, uuid, migration["id"], f"{self.host}: migration failed: {exc}")
            self._report_changed()
            self._destroy(instance, "after its move failed")
            return
        telemetry.MIGRATE_IN_SECONDS.observe(time.monotonic() - started)
        with self._lock:
            if self._moving(uuid, migration["id"]):
                try:
                    self.store.set_state(uuid, ACTIVE)
                except Exception:
                    LOG.exception("Cannot record %s as ACTIVE", uuid)
                self._move_done(ctxt, uuid, migration["id"])
                LOG.info("Instance %s moved in to %s (%s %s)", uuid, self.host, migration["kind"],
                         migration["id"])
                return
        # Terminated while it was moving in (the move aborted, or the instance deleted).
        self._destroy(instance, "after its move was aborted")

    @staticmethod
    def _driver_failed(what, uuid, exc, started):
        """Time and log a move or resize the driver failed: one WARNING line for a failure it says
        whole (drivers.MoveFailed), an ERROR with the traceback for anything else."""
        telemetry.MIGRATE_IN_SECONDS.observe(time.monotonic() - started)
        said = isinstance(exc, drivers.MoveFailed)
        LOG.log(logging.WARNING if said else logging.ERROR, "%s of %s failed: %s", what, uuid, exc,
                exc_info=not said)

    def _repeated(self, ctxt, record, uuid, migration_id, what):
        """Whether ``record`` holds this migration already: a request delivered again (or told again
        by the scheduler, which has not heard its end), not done twice. One done here is said done
        again."""
        if record is None or _migration_id(record) != migration_id:
            return False
        resize = record.get("resize")
        if (resize or {}).get("resized") or (not resize and record.get("state") == ACTIVE):
            LOG.info("%s %s of %s is done on %s already; saying so again", what, migration_id, uuid,
                     self.host)
            self._move_done(ctxt, uuid, migration_id)
            return True
        LOG.info("%s %s of %s is on %s already; repeated move request ignored", what, migration_id, uuid,
                 self.host)
        return True

    def _let_go(self, uuid):
        """Free ``uuid``'s claim and forget its record, after its build or move in failed. Under
        the lock."""
        self.tracker.free(uuid)
        try:
            self.store.delete(uuid)
        except Exception:
            LOG.exception("Cannot remove %s from the instance records", uuid)

    def _moving(self, uuid, migration_id):
        record = self.store.get(uuid) or {}
        return record.get("state") == MIGRATING and _migration_id(record) == migration_id

    def _resize_in_place(self, ctxt, instance, filter_properties, migration):
        uuid, migration_id = instance["uuid"], migration["id"]
        reason = None
        with self._lock:
            record = self.store.get(uuid)
            if self._repeated(ctxt, record, uuid, migration_id, "Resize"):
                return
            if not self.driver.capabilities.resize_in_place:
                reason = f"{self.host}: its {self.driver.name} driver cannot resize an instance in place"
            elif record is None:
                reason = f"{self.host}: does not hold {uuid}; cannot resize it in place"
            elif record.get("resize"):
                reason = (f"{self.host}: the resize {record['resize'].get('migration_id')} of {uuid} has not "
                          "ended (end_resize); cannot resize it again")
            elif record.get("state") != ACTIVE:
                reason = f"{self.host}: {uuid} is {record.get('state')} here, not ACTIVE; cannot resize it"
            else:
                old_flavor = record["instance"].get("flavor")
                claim = functools.partial(self.tracker.resize, uuid, instance.get("flavor"),
                                          filter_properties.get("limits"))
                resize = {"migration_id": migration_id, "old_flavor": old_flavor,
                          "new_flavor": instance.get("flavor"), "resized": False}
                reason = self._claim_and_record(
                    uuid, RESIZE, claim, dict(record, migration=migration, resize=resize),
                    give_back=functools.partial(self.tracker.settle_resize, uuid, old_flavor))
                if reason is not None:
                    reason = f"{self.host}: {reason}"
        if reason is not None:
            LOG.warning("Cannot resize %s (resize %s) on %s: %s", uuid, migration_id, self.host, reason)
            self._move_failed(ctxt, uuid, migration_id, reason)
            return
        LOG.info("Claimed the new flavor of %s on %s (resize %s); resizing", uuid, self.host, migration_id)
        self._report_changed()
        self._start_work(ctxt, uuid, "resize")

    def _resize(self, ctxt, uuid):
        record = self.store.get(uuid)
        resize = (record or {}).get("resize")
        if not resize or resize.get("resized"):
            return
        migration_id = resize["migration_id"]
        instance = dict(record["instance"], flavor=resize["new_flavor"])
        started = time.monotonic()
        try:
            self.driver.resize(instance, record.get("migration") or {"id": migration_id, "kind": "resize"})
        except drivers.BuildAborted:
            LOG.info("Resize of %s interrupted; it resumes when the agent starts again", uuid)
            return
        except Exception as exc:
            self._driver_failed("Resize", uuid, exc, started)
            with self._lock:
                held = self.store.get(uuid)
                if (held or {}).get("resize", {}).get("migration_id") != migration_id:
                    return  # terminated (or settled) meanwhile
                del held["resize"]
                try:
                    self.store.put(uuid, held)
                except Exception:
                    LOG.exception("Cannot record the failed resize of %s", uuid)
                self.tracker.settle_resize(uuid, resize["old_flavor"])
                self._move_failed(ctxt, uuid, migration_id, f"{self.host}: resize failed: {exc}")
            self._report_changed()
            return
        telemetry.MIGRATE_IN_SECONDS.observe(time.monotonic() - started)
        with self._lock:
            held = self.store.get(uuid)
            if (held or {}).get("resize", {}).get("migration_id") != migration_id:
                return  # terminated (or settled) meanwhile
            held["resize"]["resized"] = True
            try:
                self.store.put(uuid, held)
            except Exception:
                LOG.exception("Cannot record %s as resized", uuid)
            self._move_done(ctxt, uuid, migration_id)
            LOG.info("Instance %s resized on %s (resize %s); holding the larger flavor until it ends",
                     uuid, self.host, migration_id)

    def end_resize(self, context, instance_uuid, migration_id, confirmed):
        """Hold the new flavor (``confirmed``) or the old one, and no longer the larger of both;
        the record's flavor follows. A repeat, or another migration, changes nothing."""
        ending = "confirmed" if confirmed else "reverted"
        with self._lock:
            record = self.store.get(instance_uuid)
            resize = (record or {}).get("resize")
            if not resize or resize.get("migration_id") != migration_id:
                LOG.info("Resize %s of %s %s: %s has no such resize under way; nothing to do",
                         migration_id, instance_uuid, ending, self.host)
                return
            flavor = resize["new_flavor"] if confirmed else resize["old_flavor"]
            record["instance"] = dict(record["instance"], flavor=flavor)
            del record["resize"]
            try:
                self.store.put(instance_uuid, record)
            except Exception as exc:
                LOG.error("Cannot record the end of resize %s of %s (%s); it stays held at the larger "
                          "flavor until an end_resize finds the records writable again",
                          migration_id, instance_uuid, exc)
                return
            self.tracker.settle_resize(instance_uuid, flavor)
        LOG.info("Resize %s of %s %s on %s", migration_id, instance_uuid, ending, self.host)
        self._report_changed()

    def _move_done(self, ctxt, uuid, migration_id):
        telemetry.MOVES.labels(telemetry.DONE).inc()
        self._tell(self.scheduler.move_update, ctxt, uuid, self.host, migration_id, "done")

    def _move_failed(self, ctxt, uuid, migration_id, reason):
        telemetry.MOVES.labels(telemetry.FAILED).inc()
        self._tell(self.scheduler.move_update, ctxt, uuid, self.host, migration_id, "failed",
                   fault={"reason": reason})

    def _destroy(self, instance, when):
        try:
            self.driver.destroy(instance)
        except Exception:
            LOG.exception("Destroying %s %s", instance.get("uuid"), when)

    def _reschedule(self, ctxt, instance, request_spec, filter_properties, reason):
        """Send the instance back to the scheduler with this host in its retry record."""
        uuid = instance["uuid"]
        spec = copy.deepcopy(request_spec)
        spec["instance_uuids"] = [uuid]
        spec["num_instances"] = 1
        props = copy.deepcopy(filter_properties)
        props.pop("limits", None)  # this host's limits; the scheduler computes the next host's
        retry = props.get("retry")
        if not isinstance(retry, dict):
            retry = props["retry"] = {"num_attempts": 1, "hosts": []}
        retry.setdefault("num_attempts", 1)
        retry.setdefault("hosts", []).append([self.host, self.nodename])
        retry["exc_reason"] = f"{self.host}: {reason}"
        self._tell(self.scheduler.run_instance, ctxt, spec, props)

    # -- messages to the scheduler ----------------------------------------------

    def _cast(self, method, *args, **kwargs):
        try:
            method(*args, **kwargs)
            return True
        except Exception:
            LOG.exception("Cannot send %s to the scheduler", getattr(method, "__name__", method))
            return False

    def _tell(self, method, *args, **kwargs):
        """Send what the scheduler must not miss (an instance's new state, a send-back):
        what cannot be sent now is kept, in order, and sent again before each report
        until it goes through; what follows waits behind it."""
        with self._unsent_lock:
            self._unsent.append((method, args, kwargs))
        self._send_unsent()

    def _send_unsent(self):
        with self._unsent_lock:
            while self._unsent:
                method, args, kwargs = self._unsent[0]
                try:
                    method(*args, **kwargs)
                except Exception as exc:
                    LOG.warning("Cannot send %s to the scheduler now (%s); %d message(s) kept to send "
                                "again", getattr(method, "__name__", method), exc, len(self._unsent))
                    return False
                self._unsent.popleft()
            return True

    def _instance_update(self, ctxt, uuid, state, fault=None):
        self._tell(self.scheduler.instance_update, ctxt, uuid, self.host, state, fault=fault)

    def send_report(self):
        """Fan this host's compute-node record out to the schedulers now."""
        try:
            self.tracker.set_totals(self.driver.get_totals())
        except Exception:
            LOG.exception("Cannot read the host's totals; reporting the previous ones")
        self.tracker.io_workload = len(self._builds)  # IoOpsFilter: builds in progress
        self._send_unsent()
        # One snapshot: a move's step and its claim change together under the lock, and a report
        # naming a step of an instance it does not hold is refused whole.
        with self._lock:
            resources = self.tracker.report()
            # Sent empty too: the scheduler tells again what an agent that says nothing open missed.
            resources["open_moves"] = self.store.select(_open_move)
            move_steps = self.store.select(move_step)
        if move_steps:
            resources["move_steps"] = move_steps
        if self._cast(self.scheduler.report_resources, {}, self.host, resources):
            telemetry.REPORTS.inc()
        return resources

    def _report_changed(self):
        if not self.conf.compute_agent.report_on_change:
            return
        with self._cond:
            self._dirty = True
            self._cond.notify_all()

    def _report_loop(self):
        opts = self.conf.compute_agent
        next_periodic = time.monotonic()
        last = None
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    due = next_periodic
                    if self._dirty:
                        soonest = now if last is None else last + opts.report_min_interval
                        due = min(due, soonest)
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                self._dirty = False
            if time.monotonic() >= next_periodic:
                self.check_guests()
            try:
                self.send_report()
            except Exception:
                LOG.exception("Resource report failed")
            last = time.monotonic()
            next_periodic = last + opts.report_interval


def _migration_id(record):
    migration = record.get("migration")
    return migration.get("id") if isinstance(migration, dict) else None


def _open_move(record):
    """[migration id, "moving" or "done"] of a move ``record`` holds open (an instance this agent
    takes in; a resize in place, done or not, whose end it has not heard), else None: what the
    scheduler sets against its record, to tell this agent again what it missed."""
    resize = record.get("resize")
    if isinstance(resize, dict):
        found, step = resize.get("migration_id"), "done" if resize.get("resized") else "moving"
    elif record.get("state") == MIGRATING and not record.get("step"):
        found, step = _migration_id(record), "moving"
    else:
        return None  # none, or a move between two agents (move_steps)
    return [found, step] if type(found) is int else None


def _unfinished(record):
    """The work ``record`` holds unfinished, which the agent resumes at start: "build", "move" (taken
    in alone), "resize" (in place), a step of a move between two agents ("prepare", "migrate_out",
    "finish"), a power action ("power"), or None."""
    state, outgoing = record.get("state"), record.get("outgoing")
    if state == BUILDING:
        return "build"
    if state == MIGRATING:
        return {None: "move", PREPARING: "prepare", FINISHING: "finish"}.get(record.get("step"))
    if isinstance(outgoing, dict) and outgoing.get("step") == MIGRATING_OUT:
        return "migrate_out"
    if (record.get("resize") or {}).get("resized") is False:
        return "resize"
    if state in POWERING:
        return "power"
    return None


def _held_flavor(record):
    """What an instance record holds: its flavor, or the larger of both while it is resized."""
    resize = record.get("resize")
    if isinstance(resize, dict):
        return larger_flavor(resize.get("old_flavor"), resize.get("new_flavor"))
    return (record.get("instance") or {}).get("flavor")


def _held_amounts(record):
    """The resource classes an instance record holds: its flavor's, or per class the larger of
    both flavors' while it is resized."""
    resize = record.get("resize")
    if isinstance(resize, dict):
        return larger_amounts(*(flavor_amounts(resize.get(key)) for key in ("old_flavor", "new_flavor")))
    return flavor_amounts((record.get("instance") or {}).get("flavor"))


def _image_properties(record):
    """The image properties of an instance record's request, {} when it has none."""
    image = (record.get("request_spec") or {}).get("image")
    properties = image.get("properties") if isinstance(image, dict) else None
    return properties if isinstance(properties, dict) else {}
