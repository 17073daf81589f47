"""An agent's part in a move between two agents (compute API 2.0), one step at a time.

The scheduler records each step and tells the next: the destination prepares (claims the
instance at its new flavor, its driver opens what the transfer needs) and answers
``prepared`` with its transfer; the source migrates the instance out through it and answers
``migrated``; the destination finishes (runs the instance) and answers ``done``. A step
that fails answers ``failed``, its host left as before the step; the scheduler then tells
the destination to let go (terminate_instance) and the source to run the instance again
(abort_move). Each agent writes its step to its instance records before the driver runs it,
so that a step interrupted by a stop or a kill runs again when the agent starts; a step told
again (the scheduler did not hear the answer) is answered again, not run twice.

What the records hold: the destination's record of the instance is MIGRATING with ``step``
(preparing, prepared, finishing) and ``transfer`` until it finishes (then ACTIVE); the
source's record keeps the instance ACTIVE with ``outgoing`` ({migration, transfer, step:
migrating or migrated, aborted}) until it is terminated (the move kept) or aborted.
"""

import functools
import logging
import time

from berth_contract.host_report import MOVE_STEPS
from compute_agent import driver as drivers
from compute_agent import telemetry
from scheduler.client import MOVE_FIGURES_VERSION
from scheduler.states import ACTIVE, MIGRATING

LOG = logging.getLogger(__name__)

#: What a report's move_steps say of each move: the destination's steps, then the source's.
PREPARING, PREPARED, FINISHING, MIGRATING_OUT, MIGRATED = MOVE_STEPS


def move_step(record):
    """[migration id, step] of a move between two agents ``record`` is part of, else None: what
    the report's move_steps say, for the scheduler to tell again what this agent missed."""
    outgoing = record.get("outgoing")
    if isinstance(outgoing, dict):
        return [outgoing["migration"]["id"], outgoing["step"]]
    if record.get("state") == MIGRATING and record.get("step"):
        return [record["migration"]["id"], record["step"]]
    return None


def driven(record):
    """The instance of ``record`` as its driver gets it to build it (spawn, or a move's destination
    steps): with its request's image, ``{"id" (when it names one), "properties"}``."""
    image = (record.get("request_spec") or {}).get("image")
    image = dict(image) if isinstance(image, dict) else {}
    properties = image.get("properties")
    image["properties"] = properties if isinstance(properties, dict) else {}
    return dict(record["instance"], image=image)


class MoveSteps:
    """The ComputeManager's steps of a move between two agents (a mixin of compute_agent.manager)."""

    # -- destination: prepare ------------------------------------------------------------

    def prepare_move(self, context, instance, request_spec, filter_properties, migration):
        """Claim ``instance`` (its new flavor) and prepare to take it in; of an instance this host
        holds, resize it in place (the move's one step)."""
        ctxt = self._context(context)
        if migration["source_host"] == self.host:
            self.move_instance(context, instance, request_spec, filter_properties, migration)
            return
        uuid, migration_id = instance["uuid"], migration["id"]
        with self._lock:
            record = self.store.get(uuid)
            if self._step_repeated(ctxt, record, uuid, migration_id):
                return
            reason = self._claim_move_in(ctxt, instance, request_spec, filter_properties, migration,
                                         step=PREPARING)
        if reason is not None:
            LOG.warning("Cannot prepare to take in %s (%s %s) on %s: %s", uuid, migration["kind"],
                        migration_id, self.host, reason)
            self._step_failed(ctxt, uuid, migration_id, reason)
            return
        LOG.info("Claimed %s on %s; preparing to take it in from %s (%s %s)", uuid, self.host,
                 migration["source_host"], migration["kind"], migration_id)
        self._report_changed()
        self._start_work(ctxt, uuid, "prepare")

    def _step_repeated(self, ctxt, record, uuid, migration_id):
        """Whether the destination's ``record`` is of this move already: the step told again is
        answered again (prepared, done), or left to the worker that runs it."""
        if record is None or (record.get("migration") or {}).get("id") != migration_id:
            return False
        step = record.get("step")
        if record.get("state") == ACTIVE:
            LOG.info("Move %s of %s is done on %s already; saying so again", migration_id, uuid, self.host)
            self._step_said(ctxt, uuid, migration_id, "done")
        elif step == PREPARED:
            LOG.info("Move %s of %s is prepared on %s already; saying so again", migration_id, uuid,
                     self.host)
            self._step_said(ctxt, uuid, migration_id, "prepared", transfer=record.get("transfer") or {})
        else:
            LOG.info("Move %s of %s is %s on %s already; repeated request ignored", migration_id, uuid,
                     step, self.host)
        return True

    def _prepare(self, ctxt, uuid):
        record = self.store.get(uuid)
        if record is None or record.get("step") != PREPARING:
            return
        migration = record["migration"]
        ran, transfer = self._destination_step(ctxt, uuid, migration, PREPARING, functools.partial(
            self.driver.prepare_move_in, driven(record), migration))
        if not ran:
            return
        with self._lock:
            held = self.store.get(uuid)
            if not self._at(held, migration["id"], PREPARING):
                return  # terminated meanwhile
            try:
                self.store.put(uuid, dict(held, step=PREPARED, transfer=transfer))
            except Exception:
                LOG.exception("Cannot record %s as prepared; it is prepared again at the next start", uuid)
                return
            self._step_said(ctxt, uuid, migration["id"], "prepared", transfer=transfer)
        LOG.info("Prepared to take in %s on %s (%s %s)", uuid, self.host, migration["kind"], migration["id"])

    # -- source: migrate out -----------------------------------------------------------------

    def migrate_out(self, context, instance_uuid, migration, transfer):
        """Hand the instance over to ``migration["dest_host"]`` through ``transfer``."""
        ctxt = self._context(context)
        uuid, migration_id = instance_uuid, migration["id"]
        reason = None
        with self._lock:
            record = self.store.get(uuid)
            outgoing = (record or {}).get("outgoing")
            if outgoing is not None and outgoing["migration"]["id"] == migration_id:
                if outgoing["step"] == MIGRATED:
                    LOG.info("Move %s of %s is migrated out of %s already; saying so again", migration_id,
                             uuid, self.host)
                    self._step_said(ctxt, uuid, migration_id, "migrated", figures=outgoing.get("figures"))
                else:
                    LOG.info("Move %s of %s is migrating out of %s already; repeated request ignored",
                             migration_id, uuid, self.host)
                return
            if record is None:
                reason = f"{self.host}: does not hold {uuid}; cannot migrate it out"
            elif outgoing is not None:
                reason = (f"{self.host}: {uuid} is migrating out by move {outgoing['migration']['id']}; "
                          "cannot migrate it out again")
            elif record.get("state") != ACTIVE:
                reason = (f"{self.host}: {uuid} is {record.get('state')} here, not ACTIVE; cannot migrate "
                          "it out")
            else:
                outgoing = {"migration": migration, "transfer": transfer, "step": MIGRATING_OUT}
                try:
                    self.store.put(uuid, dict(record, outgoing=outgoing))
                except Exception as exc:
                    LOG.exception("Cannot record the move out of %s", uuid)
                    reason = f"{self.host}: cannot record the move out: {exc}"
        if reason is not None:
            LOG.warning("Cannot migrate %s out (%s %s): %s", uuid, migration["kind"], migration_id, reason)
            self._step_failed(ctxt, uuid, migration_id, reason)
            return
        LOG.info("Migrating %s out of %s to %s (%s %s)", uuid, self.host, migration["dest_host"],
                 migration["kind"], migration_id)
        self._start_work(ctxt, uuid, "migrate_out")

    def _migrate_out(self, ctxt, uuid):
        record = self.store.get(uuid)
        outgoing = (record or {}).get("outgoing")
        if outgoing is None or outgoing["step"] != MIGRATING_OUT:
            return
        if outgoing.get("aborted"):
            self._abort_out(uuid, outgoing["migration"]["id"])
            return
        migration = outgoing["migration"]
        started = time.monotonic()
        try:
            figures = self.driver.migrate_out(record["instance"], migration, outgoing["transfer"]) or None
        except drivers.BuildAborted:
            LOG.info("Migrating %s out interrupted; it resumes when the agent starts again", uuid)
            return
        except Exception as exc:
            self._driver_failed("Migrating out", uuid, exc, started)
            with self._lock:
                if self._drop_outgoing(uuid, migration["id"]):
                    self._step_failed(ctxt, uuid, migration["id"],
                                      f"{self.host}: migrating out failed: {exc}")
            return
        telemetry.MIGRATE_IN_SECONDS.observe(time.monotonic() - started)
        if figures is not None:
            telemetry.observe_live_migration(figures)
        with self._lock:
            held = self.store.get(uuid)
            outgoing = (held or {}).get("outgoing")
            if outgoing is None or outgoing["migration"]["id"] != migration["id"]:
                return  # terminated meanwhile
            aborted = outgoing.get("aborted")
            if not aborted:
                try:
                    self.store.put(uuid, dict(held, outgoing=dict(outgoing, step=MIGRATED, figures=figures)))
                except Exception:
                    LOG.exception("Cannot record %s as migrated out; it migrates out again at the next "
                                  "start", uuid)
                    return
                self._step_said(ctxt, uuid, migration["id"], "migrated", figures=figures)
        if aborted:
            self._abort_out(uuid, migration["id"])
            return
        LOG.info("Migrated %s out of %s to %s (%s %s)", uuid, self.host, migration["dest_host"],
                 migration["kind"], migration["id"])

    def abort_move(self, context, instance_uuid, migration_id):
        """Run the instance here again after a move that failed, or a resize reverted."""
        with self._lock:
            record = self.store.get(instance_uuid)
            outgoing = (record or {}).get("outgoing")
            if outgoing is None or outgoing["migration"]["id"] != migration_id:
                LOG.info("Move %s of %s aborted: %s holds no such move out; nothing to do", migration_id,
                         instance_uuid, self.host)
                return
            if outgoing["step"] == MIGRATING_OUT and instance_uuid in self._builds:
                # Its worker aborts it once the driver returns.
                try:
                    self.store.put(instance_uuid, dict(record, outgoing=dict(outgoing, aborted=True)))
                except Exception:
                    LOG.exception("Cannot record the abort of move %s of %s", migration_id, instance_uuid)
                return
        self._abort_out(instance_uuid, migration_id)

    def _abort_out(self, uuid, migration_id):
        record = self.store.get(uuid)
        try:
            self.driver.abort_move_out(record["instance"], record["outgoing"]["migration"])
        except Exception:
            LOG.exception("Running %s again on %s after move %s was aborted failed", uuid, self.host,
                          migration_id)
        with self._lock:
            if self._drop_outgoing(uuid, migration_id):
                LOG.info("Move %s of %s aborted: it runs on %s as before", migration_id, uuid, self.host)

    def _drop_outgoing(self, uuid, migration_id):
        """Forget the move out ``migration_id`` of ``uuid``; whether it was recorded."""
        held = self.store.get(uuid)
        outgoing = (held or {}).get("outgoing")
        if outgoing is None or outgoing["migration"]["id"] != migration_id:
            return False
        held = dict(held)
        del held["outgoing"]
        try:
            self.store.put(uuid, held)
        except Exception:
            LOG.exception("Cannot record the end of the move out of %s", uuid)
            return False
        return True

    # -- destination: finish --------------------------------------------------------------------

    def finish_move(self, context, instance_uuid, migration_id):
        """Run the instance its source handed over."""
        ctxt = self._context(context)
        uuid = instance_uuid
        with self._lock:
            record = self.store.get(uuid)
            step = (record or {}).get("step")
            if (record or {}).get("migration", {}).get("id") != migration_id:
                reason = f"{self.host}: holds no move {migration_id} of {uuid}; cannot finish it"
            elif step != PREPARED:
                self._step_repeated(ctxt, record, uuid, migration_id)
                return
            else:
                reason = None
                try:
                    self.store.put(uuid, dict(record, step=FINISHING))
                except Exception as exc:
                    LOG.exception("Cannot record %s as finishing", uuid)
                    reason = f"{self.host}: cannot record the move's finish: {exc}"
        if reason is not None:
            LOG.warning("Cannot finish move %s of %s: %s", migration_id, uuid, reason)
            self._step_failed(ctxt, uuid, migration_id, reason)
            return
        LOG.info("Finishing the move of %s into %s (%s)", uuid, self.host, migration_id)
        self._start_work(ctxt, uuid, "finish")

    def _finish(self, ctxt, uuid):
        record = self.store.get(uuid)
        if record is None or record.get("step") != FINISHING:
            return
        migration = record["migration"]
        ran, _ = self._destination_step(ctxt, uuid, migration, FINISHING, functools.partial(
            self.driver.finish_move_in, driven(record), migration, record.get("transfer") or {}))
        if not ran:
            return
        with self._lock:
            held = self.store.get(uuid)
            if not self._at(held, migration["id"], FINISHING):
                return  # terminated meanwhile
            held = {k: v for k, v in held.items() if k not in ("step", "transfer")}
            try:
                self.store.put(uuid, dict(held, state=ACTIVE))
            except Exception:
                LOG.exception("Cannot record %s as ACTIVE; it finishes again at the next start", uuid)
                return
            self._step_said(ctxt, uuid, migration["id"], "done")
        telemetry.MOVES.labels(telemetry.DONE).inc()
        LOG.info("Instance %s moved in to %s (%s %s)", uuid, self.host, migration["kind"], migration["id"])

    # -- both ---------------------------------------------------------------------------------

    def _destination_step(self, ctxt, uuid, migration, step, run):
        """Run the destination's driver ``step`` (preparing or finishing): (True, what it returned),
        or (False, None) when it was interrupted (it resumes at the next start) or failed (the
        instance let go of, and the scheduler told)."""
        started = time.monotonic()
        try:
            return True, run()
        except drivers.BuildAborted:
            LOG.info("%s the move of %s interrupted; it resumes when the agent starts again",
                     step.capitalize(), uuid)
        except Exception as exc:
            self._driver_failed(f"{step.capitalize()} the move", uuid, exc, started)
            self._give_up_move_in(ctxt, uuid, migration, step, f"{self.host}: {step} failed: {exc}")
        return False, None

    @staticmethod
    def _at(record, migration_id, step):
        return (record is not None and record.get("state") == MIGRATING and record.get("step") == step
                and record["migration"]["id"] == migration_id)

    def _give_up_move_in(self, ctxt, uuid, migration, step, reason):
        """The destination's step failed: let go of the instance (claim, record, what the driver
        made) and say so."""
        with self._lock:
            held = self.store.get(uuid)
            if not self._at(held, migration["id"], step):
                return  # terminated meanwhile
            self._let_go(uuid)
            self._step_failed(ctxt, uuid, migration["id"], reason)
        self._report_changed()
        self._destroy(held["instance"], "after its move failed")

    def _step_said(self, ctxt, uuid, migration_id, outcome, transfer=None, figures=None):
        """Tell the scheduler a step's ``outcome``; with the driver's ``figures`` of a migration,
        which a scheduler capped below MOVE_FIGURES_VERSION is not told (the driver logged them)."""
        if figures and not self.scheduler.can_send_version(MOVE_FIGURES_VERSION):
            LOG.info("Move %s of %s: its figures %s are not told to the scheduler: [upgrade_levels] "
                     "scheduler is below %s", migration_id, uuid, figures, MOVE_FIGURES_VERSION)
        self._tell(self.scheduler.move_update, ctxt, uuid, self.host, migration_id, outcome,
                   transfer=transfer, steps=True, figures=figures)

    def _step_failed(self, ctxt, uuid, migration_id, reason):
        telemetry.MOVES.labels(telemetry.FAILED).inc()
        self._tell(self.scheduler.move_update, ctxt, uuid, self.host, migration_id, "failed",
                   fault={"reason": reason}, steps=True)

    def _claim_move_in(self, ctxt, instance, request_spec, filter_properties, migration, step=None):
        """Claim and record ``instance`` MIGRATING in (at ``step`` of a move between two agents); None,
        or why not. Under the lock."""
        uuid = instance["uuid"]
        record = self.store.get(uuid)
        if migration.get("live") and not self.driver.capabilities.live_migration:
            return f"{self.host}: its {self.driver.name} driver cannot take in a live migration"
        if record is not None or uuid in self.tracker:
            state = (record or {}).get("state", "held")
            return f"{self.host}: holds {uuid} already ({state}); cannot take it in"
        claim = functools.partial(self._claim, instance, request_spec, filter_properties)
        held = {"instance": instance, "state": MIGRATING, "migration": migration,
                "request_spec": request_spec, "filter_properties": filter_properties,
                "request_id": ctxt.get("request_id")}
        if step is not None:
            held["step"] = step
        reason = self._claim_and_record(uuid, self._claim_words, claim, held)
        return None if reason is None else f"{self.host}: {reason}"
