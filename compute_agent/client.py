"""The compute agent's RPC API, as the scheduler calls it."""

from scheduler import rpc

TOPIC = "compute"


class ComputeClient:
    def __init__(self, transport):
        self._client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))

    def run_instance(self, ctxt, host, instance, request_spec, filter_properties):
        self._client.prepare(server=host).cast(
            ctxt,
            "run_instance",
            instance=instance,
            request_spec=request_spec,
            filter_properties=filter_properties,
        )

    def terminate_instance(self, ctxt, host, instance_uuid):
        self._client.prepare(server=host).cast(
            ctxt, "terminate_instance", instance_uuid=instance_uuid
        )
