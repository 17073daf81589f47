"""The RPC methods that move instances (scheduler API 1.1): resize, confirm and revert it,
migrate, evacuate a host that is down, list the moves, and the destinations' word that a
move ended (move_update).

A request Berth will not honour as asked is refused with the reason
(MoveRefused, NoValidHost's reasons included) and changes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from berth_contract import host_names
from berth_contract.request_spec import Flavor, parse_uuid
from scheduler import api_versions, rpc, states
from scheduler.db.moves import FIGURES
from scheduler.exception import InstanceNotFound, InvalidRequest, NoValidHost
from scheduler.moves.planner import (
    EVACUATION,
    LIVE_MIGRATION,
    MIGRATION,
    RESIZE,
    Move,
    MoveRefused,
    check_movable,
    flavor_of,
)
from scheduler.planning.applier import log_decision
from scheduler.policy.selection import Decision

LOG = logging.getLogger(__name__)

#: The statuses of a migration row, Nova's names.
STATUSES = ("migrating", "finished", "confirmed", "reverted", "completed", "error")
OUTCOMES = ("done", "failed")
#: What the agents of a move between two agents say besides (scheduler API 1.5): a step done.
STEP_OUTCOMES = ("prepared", "migrated")
#: list_migrations answers with at most this many, the newest.
MAX_LISTED = 1000


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{where} must be true or false, got {value!r}"[:200])
    return value


class MoveEndpoint:
    RPC_API = api_versions.SCHEDULER

    def __init__(self, conf: Any, database: Any, hosts: Any, applier: Any, move_planner: Any,
                 move_applier: Any) -> None:
        self._conf = conf
        self._db = database
        self._hosts = hosts  # HostManager
        self._applier = applier  # the claims of the placements
        self._planner = move_planner
        self._moves = move_applier

    # -- starting a move ------------------------------------------------------------

    @rpc.callers(rpc.OPERATOR)
    def migrate_instance(self, context, instance_uuid, host=None, force=False, live=False):
        """Move the instance to the host the filters and weighers choose, its own left out; to
        ``host`` if given, which must pass the filters unless ``force``. The migration row."""
        uuid = parse_uuid(instance_uuid, "migrate_instance: instance_uuid")
        if host is not None:
            host_names.check(host, "migrate_instance: host")
        if _bool(force, "migrate_instance: force") and host is None:
            raise InvalidRequest("migrate_instance: force needs a host to force")
        kind = LIVE_MIGRATION if _bool(live, "migrate_instance: live") else MIGRATION
        instance = self._db.get_instance(uuid)
        repeated = self._under_way(context, instance, kind, lambda m: host in (None, m["dest_host"]))
        if repeated is not None:
            return repeated
        instance = check_movable(instance, uuid, "migrated")
        self._check_source(instance)
        return self._start(Move(context, instance, kind, flavor_of(instance), host, force))

    def _check_source(self, instance: dict[str, Any]) -> None:
        """Refuse to migrate or resize an instance whose host is down: only an evacuation moves it."""
        host = instance["host"]
        state = self._hosts.get(host)
        if state is None or not self._hosts.is_up(state):
            why = "has not reported to this scheduler" if state is None else (
                f"is down (no report for more than [scheduler] service_down_time, "
                f"{self._conf.scheduler.service_down_time} s)")
            raise MoveRefused(f"Instance {instance['uuid']} cannot be moved: its host {host} {why}; a host "
                              f"that is down is evacuated (berth host evacuate {host})")

    @rpc.callers(rpc.CLIENT)
    def resize_instance(self, context, instance_uuid, flavor):
        """Give the instance ``flavor``: on its own host when it still fits there ([scheduler]
        resize_in_place), else on the host the filters choose. It then waits in VERIFY_RESIZE for
        confirm_resize or revert_resize. The migration row."""
        uuid = parse_uuid(instance_uuid, "resize_instance: instance_uuid")
        new = Flavor.from_wire(flavor, "resize_instance: flavor")
        instance = self._db.get_instance(uuid)
        repeated = self._under_way(context, instance, RESIZE,
                                   lambda m: Flavor.from_wire(m["new_flavor"]).to_wire() == new.to_wire())
        if repeated is not None:
            return repeated
        instance = check_movable(instance, uuid, "resized")
        old = flavor_of(instance)
        if (new.memory_mb, new.root_gb, new.ephemeral_gb, new.vcpus) == \
                (old.memory_mb, old.root_gb, old.ephemeral_gb, old.vcpus):
            raise MoveRefused(f"Instance {uuid} has that size already ({old.memory_mb} MB, {old.disk_gb} GB, "
                              f"{old.vcpus} vCPUs): nothing to resize")
        if new.root_gb < old.root_gb or new.ephemeral_gb < old.ephemeral_gb:
            raise MoveRefused(f"Instance {uuid} cannot be resized to a smaller disk (root {old.root_gb} -> "
                              f"{new.root_gb} GB, ephemeral {old.ephemeral_gb} -> {new.ephemeral_gb} GB): "
                              "a disk is never shrunk, as in Nova")
        self._check_source(instance)
        return self._start(Move(context, instance, RESIZE, new))

    @rpc.callers(rpc.OPERATOR)
    def evacuate_host(self, context, host):
        """Rebuild elsewhere each instance of ``host``, which must be down; for each instance, its
        migration or why it stays."""
        host_names.check(host, "evacuate_host: host")
        state = self._hosts.get(host)
        if state is None:
            raise MoveRefused(f"No host {host} has reported to this scheduler: nothing to evacuate")
        if self._hosts.is_up(state):
            down_time = self._conf.scheduler.service_down_time
            raise MoveRefused(f"Host {host} is up (it reported within [scheduler] service_down_time, "
                              f"{down_time} s): evacuate only a host that is down; drain it instead "
                              "(berth host drain)")
        answers = []
        for instance in self._db.list_instances(host=host, states=[states.ACTIVE, *states.MOVING]):
            uuid = instance["uuid"]
            repeated = self._under_way(context, instance, EVACUATION, lambda m: True)
            if repeated is not None:
                answers.append({"instance_uuid": uuid, "migration": repeated})
                continue
            try:
                check_movable(instance, uuid, "evacuated")
                migration = self._start(Move(context, instance, EVACUATION, flavor_of(instance)))
            except MoveRefused as exc:
                answers.append({"instance_uuid": uuid, "error": str(exc)})
            else:
                answers.append({"instance_uuid": uuid, "migration": migration})
        LOG.info("Evacuating host %s: %d of %d instance(s) moving", host,
                 sum("migration" in a for a in answers), len(answers))
        return answers

    def _under_way(self, context: Any, instance: dict[str, Any] | None, kind: str,
                   same: Any) -> dict[str, Any] | None:
        """The move of ``kind`` from the instance's host under way already, if ``same(migration)``
        says it is the one asked for: a request delivered again (its scheduler died after the
        commit, before its casts left) or repeated is answered with what was committed, and the
        destination is told again (it ignores a repeat)."""
        if instance is None or instance["state"] not in states.MOVING:
            return None
        migration = self._db.active_migration(instance["uuid"], request=True)
        source = instance["host"] if instance["state"] == states.MIGRATING else instance["move_host"]
        if migration is None or migration["kind"] != kind or migration["source_host"] != source \
                or not same(migration):
            return None
        LOG.info("Instance %s: its %s %s to %s (%s) asked for again; answered with it", instance["uuid"],
                 kind, migration["id"], migration["dest_host"], migration["status"])
        if migration["status"] == "migrating":
            self._moves.send_move(context, migration)
        migration.pop("request", None)
        migration.pop("transfer", None)
        return migration

    def _start(self, move: Move) -> dict[str, Any]:
        uuid = move.instance["uuid"]
        spec = self._planner.spec(move)
        decided: dict[str, Decision] = {}
        [outcome] = self._applier.place([spec], lambda s: self._planner.choose(move, s, decided))
        if isinstance(outcome, NoValidHost):
            raise MoveRefused(f"Instance {uuid} cannot be moved ({move.kind}): {outcome}")
        [placement] = outcome
        migration = self._moves.start(move, spec, placement)
        verb = ("Resizing in place" if placement.host == move.source
                else f"Moving ({move.kind}) from {move.source}")
        log_decision(uuid, placement.host, decided.get(uuid), verb=verb)
        return migration

    # -- ending it --------------------------------------------------------------------

    @rpc.callers(rpc.CLIENT)
    def confirm_resize(self, context, instance_uuid):
        uuid = parse_uuid(instance_uuid, "confirm_resize: instance_uuid")
        migration, instance = self._verifying(context, uuid, "confirmed")
        if migration["status"] == "finished" and not self._moves.confirm(context, migration):
            raise MoveRefused(f"Instance {uuid} changed meanwhile: its resize was not confirmed")
        return self._db.get_migration(migration["id"])

    @rpc.callers(rpc.CLIENT)
    def revert_resize(self, context, instance_uuid):
        uuid = parse_uuid(instance_uuid, "revert_resize: instance_uuid")
        migration, instance = self._verifying(context, uuid, "reverted")
        if migration["status"] == "finished" and not self._moves.revert(context, migration, instance):
            raise MoveRefused(f"Instance {uuid} changed meanwhile: its resize was not reverted")
        return self._db.get_migration(migration["id"])

    def _verifying(self, context: Any, uuid: str, verb: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The resize waiting to be ``verb`` and its instance; or, when its last resize was ``verb``
        already (a request delivered again, or repeated, or a confirm after the window's), that
        resize, its end told to the agents again."""
        instance = self._db.get_instance(uuid)
        if instance is None or instance["state"] == states.DELETED:
            raise InstanceNotFound(f"No instance {uuid}")
        if instance["state"] == states.ACTIVE:
            [last] = self._db.list_migrations(instance_uuid=uuid, limit=1) or [None]
            if last is not None and last["kind"] == RESIZE and last["status"] == verb:
                LOG.info("Instance %s: resize %s was %s already; answered with it", uuid, last["id"], verb)
                self._moves.send_end(context, last, f"resize {last['id']} {verb}")
                return last, instance
        migration = self._db.active_migration(uuid)
        waiting = migration is not None and migration["status"] == "finished"
        if instance["state"] != states.VERIFY_RESIZE or not waiting:
            raise MoveRefused(f"Instance {uuid} has no resize to be {verb}: it is {instance['state']}"
                              + (" (its move is under way)" if instance["state"] == states.MIGRATING else ""))
        return migration, instance

    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def move_update(self, context, instance_uuid, host, migration_id, outcome, fault=None, transfer=None,
                    figures=None):
        """From the destination's agent: the move ended, ``done`` or ``failed`` (``fault``: why). Of a
        move between two agents (1.5), also: ``prepared`` from its destination (``transfer``: what
        its source needs), ``migrated`` from its source (``figures``, 1.8: its driver's measures of
        the migration, recorded on it), and ``failed`` from either."""
        uuid = parse_uuid(instance_uuid, "move_update: instance_uuid")
        host_names.check(host, "move_update: host")
        if not isinstance(migration_id, int) or isinstance(migration_id, bool):
            raise InvalidRequest(f"move_update: migration_id must be an integer, got {migration_id!r}"[:200])
        if outcome not in OUTCOMES + STEP_OUTCOMES:
            raise InvalidRequest(
                f"move_update: outcome must be one of {', '.join(OUTCOMES + STEP_OUTCOMES)}, got "
                f"{outcome!r}"[:200])
        if fault is not None and not (isinstance(fault, dict) and isinstance(fault.get("reason", ""), str)):
            raise InvalidRequest("move_update: fault must be an object whose reason is a string")
        if transfer is not None and (outcome != "prepared" or not isinstance(transfer, dict)):
            raise InvalidRequest("move_update: transfer must be an object, and only of a move prepared")
        if figures is not None:
            _check_figures(figures, outcome)
        migration = self._db.get_migration(migration_id)
        if migration is None or migration["instance_uuid"] != uuid:
            raise InvalidRequest(f"move_update from {host}: no migration {migration_id} of instance {uuid}")
        self._check_sender(migration, host, outcome)
        if migration["status"] != "migrating":
            LOG.info("Instance %s: %s of migration %s, which is %s already; ignored", uuid, outcome,
                     migration_id, migration["status"])
            return
        if outcome in STEP_OUTCOMES:
            if not self._moves.step_done(context, migration, host, outcome, transfer, figures):
                LOG.info("Instance %s: %s of migration %s, which is at its %s step already; ignored", uuid,
                         outcome, migration_id, migration["step"])
            return
        instance = self._db.get_instance(uuid)
        if outcome == "done":
            ended = self._finish(context, migration, instance, host)
        else:
            reason = str((fault or {}).get("reason") or "move failed")[:4096]
            ended = self._moves.fail(context, migration, reason)
        if not ended:
            LOG.info("Instance %s is no longer moving to %s (%s); %s of migration %s ignored", uuid,
                     migration["dest_host"], instance["state"] if instance else "gone", outcome, migration_id)

    @staticmethod
    def _check_sender(migration: dict[str, Any], host: str, outcome: str) -> None:
        """Refuse the word of a host that has no say in it: the destination's (done, prepared,
        failed), or of a move between two agents its source's (migrated, failed)."""
        by_steps = migration.get("step") is not None
        from_source = host == migration["source_host"] and by_steps and outcome in ("migrated", "failed")
        from_dest = host == migration["dest_host"] and outcome != "migrated"
        if from_source or from_dest:
            return
        if by_steps:
            raise InvalidRequest(f"move_update from {host}: migration {migration['id']} goes from "
                                 f"{migration['source_host']} to {migration['dest_host']}; {host} cannot say "
                                 f"it {outcome}")
        if outcome in STEP_OUTCOMES:
            raise InvalidRequest(f"move_update from {host}: migration {migration['id']} is taken in "
                                 f"by its destination alone; it has no step {outcome}")
        raise InvalidRequest(f"move_update from {host}: migration {migration['id']} goes to "
                             f"{migration['dest_host']}, not {host}")

    def _finish(self, context: Any, migration: dict[str, Any], instance: dict[str, Any] | None,
                host: str) -> bool:
        """The destination took the instance: at the last step of a move between two agents (on the
        instance's own host, its only one), or of one taken in alone."""
        step = migration.get("step")
        if step not in (None, "finish") and migration["source_host"] != migration["dest_host"]:
            LOG.warning("Instance %s: %s says migration %s is done at its %s step; ignored", migration[
                "instance_uuid"], host, migration["id"], step)
            return True
        return self._moves.finish(context, migration, instance)

    # -- reading ------------------------------------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_migrations(self, context, host=None, status=None, instance_uuid=None):
        """Migrations, newest first (at most MAX_LISTED): of ``host`` (source or destination), in
        ``status``, of one instance."""
        if host is not None:
            host_names.check(host, "list_migrations: host")
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"list_migrations: status must be one of {', '.join(STATUSES)}, got "
                                 f"{status!r}"[:300])
        if instance_uuid is not None:
            instance_uuid = parse_uuid(instance_uuid, "list_migrations: instance_uuid")
        return self._db.list_migrations(host=host, status=status, instance_uuid=instance_uuid,
                                        limit=MAX_LISTED)


def _check_figures(figures: Any, outcome: str) -> None:
    """Refuse ``figures`` that are not {name: a whole number >= 0} of FIGURES, or not of a migrated step."""
    if outcome != "migrated":
        raise InvalidRequest(f"move_update: figures are of a move migrated, not {outcome}")
    if not isinstance(figures, dict):
        raise InvalidRequest(f"move_update: figures must be an object, got {figures!r}"[:200])
    for name, value in figures.items():
        if name not in FIGURES:
            raise InvalidRequest(f"move_update: figures: {name!r} is not one of {', '.join(FIGURES)}"[:200])
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidRequest(f"move_update: figures: {name} must be a whole number >= 0, got "
                                 f"{value!r}"[:200])
