"""A scheduler's builds to one agent in one message: several placed on a host by one batch go
in a bundle (compute 2.0 agents take bundles), each built as if it had come alone."""

from compute_agent.client import ComputeClient
from scheduler.rpc import envelope
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.rpc.test_bundles import _declare, _waiting


def _builds(*hosts):
    instances = [make_instance() for _ in hosts]
    return instances, [({"request_id": f"req-{i}"}, host, instance, *request_for(instance))
                       for i, (host, instance) in enumerate(zip(hosts, instances, strict=True))]


def test_the_builds_to_one_host_travel_in_one_message_and_the_others_alone(transport):
    for host in ("h1", "h2"):
        _declare(transport, f"compute.{host}")
    instances, builds = _builds("h1", "h2", "h1", "h1")

    ComputeClient(transport).run_instances(builds)

    [bundle] = _waiting(transport, "compute.h1")
    casts = envelope.bundled_casts(bundle)
    assert [cast["args"]["instance"]["uuid"] for cast in casts] == [instances[i]["uuid"] for i in (0, 2, 3)]
    assert [cast["_context_request_id"] for cast in casts] == ["req-0", "req-2", "req-3"]
    [alone] = _waiting(transport, "compute.h2")
    assert envelope.bundled_casts(alone) is None
    assert alone["args"]["instance"]["uuid"] == instances[1]["uuid"]


def test_capped_below_2_0_each_build_goes_alone(conf, transport):
    conf.set_override("compute", "1.2", "upgrade_levels")
    _declare(transport, "compute.h1")
    instances, builds = _builds("h1", "h1")

    ComputeClient(transport).run_instances(builds)

    waiting = _waiting(transport, "compute.h1")
    assert [message["args"]["instance"]["uuid"] for message in waiting] == [i["uuid"] for i in instances]


def test_an_agent_builds_each_instance_of_a_bundle(transport, scheduler, agents):
    agents()
    instances, builds = _builds(HOST, HOST, HOST)

    ComputeClient(transport).run_instances(builds)

    for instance in instances:
        wait_for(lambda uuid=instance["uuid"]: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
