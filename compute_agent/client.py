"""The compute agent's RPC API (scheduler.api_versions.COMPUTE), as the scheduler calls it.

Each method sends the oldest version of the API that carries what it sends, under
the cap ``[upgrade_levels] compute`` of the transport's configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler import api_versions, rpc
from scheduler.conf import upgrade_levels
from scheduler.rpc.client import Context

TOPIC = "compute"
API = api_versions.COMPUTE
#: The version of the compute API whose moves go between two agents, step by step.
MOVE_STEPS_VERSION = "2.0"
#: The version of the compute API from which agents power instances off, on, reboot them and read
#: their consoles.
POWER_VERSION = "2.1"
#: The power actions a scheduler casts, each the agent's method of that name + "_instance".
POWER_ACTIONS = ("power_off", "power_on", "reboot")
#: Seconds a client waits for an agent's console by default.
CONSOLE_TIMEOUT = 10.0


class ComputeClient:
    def __init__(self, transport: Any):
        self._client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC),
                                     version_cap=upgrade_levels.cap(transport.conf, API), api=API.name)
        self._v2 = self._client.can_send_version(MOVE_STEPS_VERSION)

    def can_send_version(self, version: str) -> bool:
        """Whether ``[upgrade_levels] compute`` lets this client send ``version``."""
        return self._client.can_send_version(version)

    @property
    def moves_by_steps(self) -> bool:
        """Whether moves go between two agents step by step (2.0), not to the destination alone
        (1.x: ``[upgrade_levels] compute`` is below 2.0 while agents of an older release run)."""
        return self._v2

    def _to(self, host: str, version: str) -> Any:
        """The client for ``host``, at 2.0 unless capped below it (then at ``version``)."""
        return self._client.prepare(server=host, version=MOVE_STEPS_VERSION if self._v2 else version)

    def run_instance(self, ctxt: Context, host: str, instance: dict, request_spec: dict,
                     filter_properties: dict) -> None:
        self._to(host, "1.0").cast(
            ctxt,
            "run_instance",
            instance=instance,
            request_spec=request_spec,
            filter_properties=filter_properties,
        )

    def run_instances(self, builds: Sequence[tuple[Context, str, dict, dict, dict]]) -> None:
        """run_instance for each ``(context, host, instance, request_spec, filter_properties)`` of
        ``builds``, those to one host in one bundle where several go there (agents of compute 2.0
        and later take bundles; under a lower cap each alone)."""
        by_host: dict[str, list[tuple[Context, dict, dict, dict]]] = {}
        for ctxt, host, *build in builds:
            by_host.setdefault(host, []).append((ctxt, *build))
        for host, each in by_host.items():
            if len(each) == 1:
                self.run_instance(each[0][0], host, *each[0][1:])
                continue
            calls = [(ctxt, {"instance": instance, "request_spec": request_spec,
                             "filter_properties": filter_properties})
                     for ctxt, instance, request_spec, filter_properties in each]
            self._to(host, "1.0").cast_each("run_instance", calls,
                                            bundled_from=MOVE_STEPS_VERSION if self._v2 else None)

    def terminate_instance(self, ctxt: Context, host: str, instance_uuid: str,
                           reason: str | None = None) -> None:
        """Tell the agent of ``host`` to destroy the instance. ``reason`` (1.1): why, which the agent
        logs; left out, and the message sent as 1.0, when the cap is 1.0."""
        if reason is not None and self.can_send_version("1.1"):
            self._to(host, "1.1").cast(
                ctxt, "terminate_instance", instance_uuid=instance_uuid, reason=reason)
            return
        self._to(host, "1.0").cast(ctxt, "terminate_instance", instance_uuid=instance_uuid)

    def move_instance(self, ctxt: Context, host: str, instance: dict, request_spec: dict,
                      filter_properties: dict, migration: dict) -> None:
        """Tell the agent of ``host``, the destination of ``migration`` ({id, kind, source_host,
        live}), to claim ``instance`` (its new flavor) against the limits and take it over alone
        (1.2, which agents of this release still serve: a move recorded without steps)."""
        self._client.prepare(server=host, version="1.2").cast(
            ctxt, "move_instance", instance=instance, request_spec=request_spec,
            filter_properties=filter_properties, migration=migration)

    def end_resize(self, ctxt: Context, host: str, instance_uuid: str, migration_id: int,
                   confirmed: bool) -> None:
        """Tell the agent of ``host``, where the instance was resized in place by ``migration_id``,
        to hold its new flavor only (``confirmed``) or its old one only (reverted) (1.2)."""
        self._to(host, "1.2").cast(
            ctxt, "end_resize", instance_uuid=instance_uuid, migration_id=migration_id, confirmed=confirmed)

    # -- a move between two agents (2.0), one step each, the scheduler recording each --

    def prepare_move(self, ctxt: Context, host: str, instance: dict, request_spec: dict,
                     filter_properties: dict, migration: dict) -> None:
        """Tell the destination to claim ``instance`` (its new flavor) against the limits and open what
        the transfer needs; it answers prepared, with its transfer, or failed. On the instance's own
        host: resize it in place, which is done in this one step."""
        self._client.prepare(server=host, version=MOVE_STEPS_VERSION).cast(
            ctxt, "prepare_move", instance=instance, request_spec=request_spec,
            filter_properties=filter_properties, migration=migration)

    def migrate_out(self, ctxt: Context, host: str, instance_uuid: str, migration: dict,
                    transfer: dict) -> None:
        """Tell the source to hand the instance over to ``migration["dest_host"]`` through what it
        prepared (``transfer``); it answers migrated or failed."""
        self._client.prepare(server=host, version=MOVE_STEPS_VERSION).cast(
            ctxt, "migrate_out", instance_uuid=instance_uuid, migration=migration, transfer=transfer)

    def finish_move(self, ctxt: Context, host: str, instance_uuid: str, migration_id: int) -> None:
        """Tell the destination to take the instance its source handed over; it answers done or failed."""
        self._client.prepare(server=host, version=MOVE_STEPS_VERSION).cast(
            ctxt, "finish_move", instance_uuid=instance_uuid, migration_id=migration_id)

    def abort_move(self, ctxt: Context, host: str, instance_uuid: str, migration_id: int) -> None:
        """Tell the source of a move that failed, or of a resize reverted, to run the instance again
        as before the move."""
        self._client.prepare(server=host, version=MOVE_STEPS_VERSION).cast(
            ctxt, "abort_move", instance_uuid=instance_uuid, migration_id=migration_id)

    # -- an instance's power (2.1): casts from a scheduler; its console: a call from a client --

    def power(self, ctxt: Context, host: str, instance_uuid: str, action: str, hard: bool = False) -> None:
        """Tell the agent of ``host`` to power the instance off or on, or reboot it (``action``, one of
        POWER_ACTIONS; ``hard`` for a reboot only); it answers with instance_update."""
        if action not in POWER_ACTIONS:
            raise ValueError(f"power: action must be one of {', '.join(POWER_ACTIONS)}, got {action!r}")
        kwargs: dict[str, Any] = {"hard": hard} if action == "reboot" else {}
        self._client.prepare(server=host, version=POWER_VERSION).cast(
            ctxt, f"{action}_instance", instance_uuid=instance_uuid, **kwargs)

    def console_output(self, ctxt: Context, host: str, instance_uuid: str, lines: int | None = None,
                       timeout: float = CONSOLE_TIMEOUT) -> dict[str, Any]:
        """The last ``lines`` (all with None) of the instance's serial console, from the agent of
        ``host``: ``{"instance_uuid", "host", "lines": [...]}``."""
        return self._client.prepare(server=host, version=POWER_VERSION, timeout=timeout).call(
            ctxt, "console_output", instance_uuid=instance_uuid, lines=lines)

    # -- the fake driver's load (berth fake-load): calls, answered by the agent of ``host`` --

    def set_fake_load(self, ctxt: Context, host: str, cpu: float, memory: float | None = None,
                      instance_uuids: list[str] | None = None) -> dict[str, Any]:
        """Simulate ``cpu`` (and ``memory``), as fractions of each instance's flavor, on the
        instances ``instance_uuids`` of ``host``, or on every one (None); the overrides in force."""
        return self._client.prepare(server=host).call(
            ctxt, "set_fake_load", cpu=cpu, memory=memory, instance_uuids=instance_uuids)

    def clear_fake_load(self, ctxt: Context, host: str, instance_uuids: list[str] | None = None
                        ) -> dict[str, Any]:
        return self._client.prepare(server=host).call(ctxt, "clear_fake_load", instance_uuids=instance_uuids)
