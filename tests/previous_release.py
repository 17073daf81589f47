"""The previous release's compute agent endpoint, as far as this release changed it: version
1.0 of the compute API, whose terminate_instance takes no reason. For the tests of rolling
upgrades (an agent of the previous release beside schedulers of this one)."""

from compute_agent import validate
from compute_agent.manager import ComputeEndpoint
from scheduler import api_versions, rpc


class PreviousComputeEndpoint(ComputeEndpoint):
    RPC_API = api_versions.COMPUTE.at("1.0")

    @rpc.callers(rpc.SCHEDULER)
    def terminate_instance(self, context, instance_uuid):
        self._manager.terminate_instance(context, validate.instance_uuid(instance_uuid, "terminate_instance"))
