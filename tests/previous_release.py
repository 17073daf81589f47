"""The compute agent of earlier releases, as far as the compute API goes, for the tests of rolling
upgrades (an agent of an earlier release beside schedulers and agents of this one): the release
before this one served the compute API 1.2 alone (a move's destination taking it alone), the one
before 1.0, whose terminate_instance takes no reason. ``serve_release(manager_class, version)``
makes a ComputeManager serve what that release served."""

from compute_agent import validate
from compute_agent.fake_load_endpoint import FakeLoadEndpoint
from compute_agent.manager import ComputeV1Endpoint, _Endpoint
from scheduler import api_versions, rpc


class ComputeEndpoint1_0(_Endpoint):
    RPC_API = api_versions.COMPUTE.at("1.0")

    @rpc.callers(rpc.SCHEDULER)
    def terminate_instance(self, context, instance_uuid):
        self._manager.terminate_instance(context, validate.instance_uuid(instance_uuid, "terminate_instance"))

    end_resize = None


#: The endpoint of each earlier release, by the version of the compute API it served.
ENDPOINTS = {"1.0": ComputeEndpoint1_0, "1.2": ComputeV1Endpoint}
#: The release before this one.
PREVIOUS = "1.2"


def serve_release(manager_class, version=PREVIOUS):
    """Make ``manager_class`` serve the compute API as the release of ``version`` did."""
    endpoint = ENDPOINTS[version]

    def endpoints(manager):
        return [endpoint(manager),
                FakeLoadEndpoint(manager.host, manager.driver, manager.tracker, manager._report_changed)]

    manager_class._endpoints = endpoints
