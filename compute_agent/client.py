"""The compute agent's RPC API, as the scheduler calls it."""

from __future__ import annotations

from typing import Any

from scheduler import rpc
from scheduler.rpc.client import Context

TOPIC = "compute"


class ComputeClient:
    def __init__(self, transport: Any):
        self._client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))

    def run_instance(self, ctxt: Context, host: str, instance: dict, request_spec: dict,
                     filter_properties: dict) -> None:
        self._client.prepare(server=host).cast(
            ctxt,
            "run_instance",
            instance=instance,
            request_spec=request_spec,
            filter_properties=filter_properties,
        )

    def terminate_instance(self, ctxt: Context, host: str, instance_uuid: str) -> None:
        self._client.prepare(server=host).cast(
            ctxt, "terminate_instance", instance_uuid=instance_uuid
        )

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
