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
