"""Committing the moves the MovePlanner decides: the migration row and both hosts' claims written
in the batch's unit of work, each step told to the agent whose step it is once it commits, and
the moves' ends."""

from __future__ import annotations

import logging
from typing import Any

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler import states
from scheduler.db.engine import to_db_time
from scheduler.db.moves import FINISH, MIGRATE, PREPARE
from scheduler.moves.planner import EVACUATION, RESIZE, MoveRefused, flavor_of
from scheduler.planning.applier import context_values
from scheduler.planning.plan import Placement
from scheduler.telemetry import scheduler_metrics as telemetry

LOG = logging.getLogger(__name__)


def flavor_columns(flavor: Flavor) -> dict[str, Any]:
    """The instance row's columns of ``flavor``."""
    return {"flavor_name": flavor.name, "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb,
            "ephemeral_gb": flavor.ephemeral_gb, "vcpus": flavor.vcpus}


def with_flavor(instance: dict[str, Any], flavor: Flavor) -> dict[str, Any]:
    """The instance's stored request, at ``flavor``: what later moves and reschedules place."""
    request_spec = dict(instance.get("request_spec") or {})
    request_spec["instance_type"] = flavor.to_wire()
    return request_spec


class MoveApplier:
    """Records, claims and casts the moves the MovePlanner decides, and their ends.

    During a move both hosts hold the instance: its row names its host and its
    ``move_host``; the source releases it only once the destination has it
    ACTIVE (a migration or an evacuation) or the resize is confirmed. Every
    change of a row is a compare-and-set on its state and hosts: of two
    operators moving one instance, or a message delivered twice, one acts.
    """

    def __init__(self, database: Any, hosts: Any, outbox: Any, compute: Any) -> None:
        self._db = database
        self._hosts = hosts
        self._outbox = outbox
        self._compute = compute

    def start(self, move: Any, spec: RequestSpec, placement: Placement) -> dict[str, Any]:
        """Record the move of ``move.instance`` to ``placement``, with what its destination is to be
        told, and tell it once the transaction commits; the migration row. Raises MoveRefused when
        the instance changed since it was read (its placement given back)."""
        instance, dest = move.instance, placement.host
        uuid, source = instance["uuid"], move.source
        old = flavor_of(instance)
        now = self._db.now()
        values = {"state": states.MIGRATING, "move_host": dest, "scheduled_at": now,
                  **flavor_columns(move.flavor)}
        if not self._db.update_instances_if([(uuid, values, {"state": states.ACTIVE, "host": source,
                                                             "move_host": None})]):
            with self._hosts.lock:
                self._hosts.release(dest, uuid)
            raise MoveRefused(f"Instance {uuid} changed while its move was decided (another move, or a "
                              "delete): not moved")
        request_spec, filter_properties = spec.instance_to_wire(uuid)
        filter_properties["limits"] = placement.limits
        request = {"instance": {"uuid": uuid, "flavor": move.flavor.to_wire(),
                                "project_id": instance.get("project_id")},
                   "request_spec": request_spec, "filter_properties": filter_properties,
                   "migration": {"kind": move.kind, "source_host": source, "live": move.live,
                                 "old_flavor": old.to_wire()}}
        migration = self._db.create_migration({
            "instance_uuid": uuid, "kind": move.kind, "status": "migrating",
            "source_host": source, "source_node": instance.get("node"), "dest_host": dest,
            "dest_node": placement.node, "old_flavor": old.to_wire(), "new_flavor": move.flavor.to_wire(),
            "request": request, "step": PREPARE if self._compute.moves_by_steps else None})
        self.send_move(move.context, migration, request)
        self._outbox.send(telemetry.count_move, move.kind, "started")
        return migration

    def send_move(self, context: Any, migration: dict[str, Any],
                  request: dict[str, Any] | None = None) -> bool:
        """Tell the agent whose step a move under way is at to take it (again: an agent that has
        done it already answers again, one doing it ignores the repeat), once the transaction
        commits: a move between two agents at its step (its destination prepares or finishes, its
        source migrates out), one taken in alone (compute API 1.x) to its destination. False for a
        move recorded without its request (by a Berth before 0011), which cannot be told again."""
        request = request or migration.get("request")
        if not request:
            return False
        ctxt, uuid, step = context_values(context), migration["instance_uuid"], migration.get("step")
        if step == MIGRATE:
            self._outbox.send(self._compute.migrate_out, ctxt, migration["source_host"], uuid,
                              self._step_migration(migration, request), migration.get("transfer") or {})
        elif step == FINISH:
            self._outbox.send(self._compute.finish_move, ctxt, migration["dest_host"], uuid, migration["id"])
        else:
            send = self._compute.move_instance if step is None else self._compute.prepare_move
            self._outbox.send(send, ctxt, migration["dest_host"], request["instance"],
                              request["request_spec"], request["filter_properties"],
                              dict(request["migration"], id=migration["id"]))
        return True

    @staticmethod
    def _step_migration(migration: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """The migration as the agents of a move between two agents are told it."""
        return dict(request["migration"], id=migration["id"], dest_host=migration["dest_host"])

    def step_done(self, context: Any, migration: dict[str, Any], host: str, outcome: str,
                  transfer: dict[str, Any] | None, figures: dict[str, Any] | None = None) -> bool:
        """A step of a move between two agents is done (``outcome``: prepared, from its destination,
        with its ``transfer``; migrated, from its source, with its driver's ``figures`` of the
        migration, when it measured them): record the next step and tell its agent,
        once the transaction commits (an evacuation, whose source is down, goes from prepare to
        finish). False when the move is no longer at that step (a repeat)."""
        if outcome == "prepared":
            # An evacuation's source is down: its destination rebuilds the instance, as Nova's does.
            after = FINISH if migration["kind"] == EVACUATION else MIGRATE
            step, values = PREPARE, {"step": after, "transfer": transfer or {}}
        else:
            step, values = MIGRATE, {"step": FINISH}
            if figures:
                values["figures"] = figures
        moved = self._db.update_migration(migration["id"], values, expected_status="migrating",
                                          expected_step=step)
        if moved is None:
            return False
        LOG.info("Instance %s: %s %s %s on %s; next: %s", migration["instance_uuid"], migration["kind"],
                 migration["id"], outcome, host, values["step"])
        self.send_move(context, moved)
        return True

    def send_end(self, context: Any, migration: dict[str, Any], reason: str) -> None:
        """Tell the agents what follows the end of ``migration`` (its ended status), once the
        transaction commits: a resize in place ends on its host, at the size confirmed or at the
        old one; a move kept lets its source go, one undone its destination. Repeats are harmless."""
        uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
        kept = migration["status"] in ("confirmed", "completed")
        if source == dest:
            self._outbox.send(self._compute.end_resize, context_values(context), dest, uuid, migration["id"],
                              kept)
            return
        self.terminate(context, source if kept else dest, uuid, reason)
        if not kept and migration.get("step") is not None:
            # Its source may have stopped it, or handed it over: it runs it again.
            self._outbox.send(self._compute.abort_move, context_values(context), source, uuid,
                              migration["id"])

    def _end(self, migration: dict[str, Any], instance_values: dict[str, Any], expected: dict[str, Any],
             status: str, reason: str | None = None) -> dict[str, Any] | None:
        """Write the end of a move on both rows, if the instance is still as ``expected``; the
        migration as ended, or None. Both rows in one transaction: the caller's unit of work."""
        uuid = migration["instance_uuid"]
        if not self._db.update_instances_if([(uuid, instance_values, expected)]):
            return None
        now = self._db.now()
        ended = {"status": status, "reason": reason}
        if status != "finished":
            ended["finished_at"] = now
        self._db.update_migration(migration["id"], ended)
        outcome = "completed" if status == "finished" else status
        seconds = (now - to_db_time(migration["created_at"])).total_seconds()
        self._outbox.send(telemetry.count_move, migration["kind"], outcome, seconds)
        return dict(migration, **ended)

    def finish(self, context: Any, migration: dict[str, Any], instance: dict[str, Any]) -> bool:
        """The destination has the instance: a resize waits for confirmation, any other move ends and
        the source is told to release it. False when the instance is no longer moving there."""
        uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
        expected = {"state": states.MIGRATING, "host": source, "move_host": dest}
        moved = {"host": dest, "node": migration["dest_node"],
                 "request_spec": with_flavor(instance, Flavor.from_wire(migration["new_flavor"]))}
        if migration["kind"] == RESIZE:
            values = dict(moved, state=states.VERIFY_RESIZE, move_host=source)
            return self._end(migration, values, expected, "finished") is not None
        values = dict(moved, state=states.ACTIVE, move_host=None)
        ended = self._end(migration, values, expected, "completed")
        if ended is None:
            return False
        LOG.info("Instance %s moved from %s to %s (%s %s)", uuid, source, dest, migration["kind"],
                 migration["id"])
        self.send_end(context, ended, f"moved to {dest} ({migration['kind']} {migration['id']})")
        return True

    def fail(self, context: Any, migration: dict[str, Any], reason: str) -> bool:
        """The move failed: the instance stays ACTIVE on its source with its old size."""
        uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
        values = {"state": states.ACTIVE, "move_host": None,
                  **flavor_columns(Flavor.from_wire(migration["old_flavor"]))}
        expected = {"state": states.MIGRATING, "host": source, "move_host": dest}
        if self._end(migration, values, expected, "error", reason) is None:
            return False
        LOG.warning("Instance %s: %s %s to %s failed (%s); it stays ACTIVE on %s", uuid, migration["kind"],
                    migration["id"], dest, reason, source)
        self._compensated_release(dest, uuid)
        if migration.get("step") is not None and source != dest:
            # Of a move between two agents, each lets go of its part (one of them said it failed).
            self.send_end(context, dict(migration, status="error"), reason)
        return True

    def abandon(self, context: Any, migration: dict[str, Any], reason: str) -> bool:
        """Fail a move its agents never ended, and tell them to let go of what they took: the
        destination the instance, or, on its own host, the new size; the source of a move between
        two agents runs the instance again."""
        if not self.fail(context, migration, reason):
            return False
        if migration.get("step") is None or migration["source_host"] == migration["dest_host"]:
            self.send_end(context, dict(migration, status="error"), reason)
        return True

    def confirm(self, context: Any, migration: dict[str, Any]) -> bool:
        """A resize confirmed: its source releases the old size."""
        uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
        expected = {"state": states.VERIFY_RESIZE, "host": dest, "move_host": source}
        ended = self._end(migration, {"state": states.ACTIVE, "move_host": None}, expected, "confirmed")
        if ended is None:
            return False
        LOG.info("Instance %s: resize %s confirmed on %s", uuid, migration["id"], dest)
        self.send_end(context, ended, f"resize {migration['id']} to {dest} confirmed")
        return True

    def revert(self, context: Any, migration: dict[str, Any], instance: dict[str, Any]) -> bool:
        """A resize reverted: back on its source at its old size, which the source held all along."""
        uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
        old = Flavor.from_wire(migration["old_flavor"])
        values = {"state": states.ACTIVE, "host": source, "node": migration["source_node"], "move_host": None,
                  "request_spec": with_flavor(instance, old), **flavor_columns(old)}
        expected = {"state": states.VERIFY_RESIZE, "host": dest, "move_host": source}
        ended = self._end(migration, values, expected, "reverted")
        if ended is None:
            return False
        LOG.info("Instance %s: resize %s reverted; back on %s at its old size", uuid, migration["id"], source)
        if source != dest:
            self._compensated_release(dest, uuid)
        self.send_end(context, ended, f"resize {migration['id']} reverted to {source}")
        return True

    def terminate(self, context: Any, host: str, instance_uuid: str, reason: str) -> None:
        self._outbox.send(self._compute.terminate_instance, context_values(context), host, instance_uuid,
                          reason)

    def _compensated_release(self, host: str, instance_uuid: str) -> None:
        """Give back what this scheduler counts of the instance on ``host`` once the transaction
        commits (a rollback keeps it)."""
        self._outbox.send(self._hosts.release, host, instance_uuid)
