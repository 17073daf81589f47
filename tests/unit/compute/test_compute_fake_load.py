"""Each instance's measured use in the agent's report (``instance_usage``), and the fake
driver's load set at run time: the overrides, the agent's set_fake_load / clear_fake_load
over memory://, and their refusals."""

import threading
import uuid as uuidlib

import pytest

from compute_agent import driver as drivers
from compute_agent import load_model
from compute_agent.client import ComputeClient
from compute_agent.fake_load import LoadOverrides
from compute_agent.load_model import Load
from compute_agent.resource_tracker import ResourceTracker
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for

rpc = pytest.importorskip("scheduler.rpc")

VM = {"memory_mb": 1000, "root_gb": 0, "ephemeral_gb": 0, "vcpus": 4}
A = "00000000-0000-4000-8000-0000000000a1"
B = "00000000-0000-4000-8000-0000000000b2"


# -- the load model ------------------------------------------------------------


def test_each_powered_on_instance_reports_its_use_by_the_busy_idle_model():
    busy = load_model.simulated_load({A: VM}, 16, 8000, busy_fraction=1.0, busy_cpu_load=0.75)
    assert busy["instance_usage"] == {A: {"cpu": 3.0, "memory": 1000.0}}
    idle = load_model.simulated_load({A: VM}, 16, 8000, idle_cpu_load=0.05, idle_memory_fraction=0.25)
    assert idle["instance_usage"] == {A: {"cpu": pytest.approx(0.2), "memory": 250.0}}


def test_a_powered_off_instance_is_left_out():
    figures = load_model.simulated_load({A: VM, B: VM}, 16, 8000, powered_off_fraction=1.0)
    assert figures["instance_usage"] == {}
    assert figures["load"].cpu_undeployed_reservation == 8


def test_an_override_replaces_the_model_and_the_host_figures_add_it_up():
    figures = load_model.simulated_load(
        {A: VM, B: VM}, 16, 8000, idle_cpu_load=0.0, idle_memory_fraction=0.5,
        overrides={A: Load(cpu=0.5, memory=0.25), B: Load(cpu=1.0)})
    assert figures["instance_usage"] == {A: {"cpu": 2.0, "memory": 250.0}, B: {"cpu": 4.0, "memory": 500.0}}
    assert figures["load"].cpu_utilization == 6 / 16
    assert figures["load"].memory_mb_in_use == 750


def test_an_override_powers_an_instance_on():
    figures = load_model.simulated_load({A: VM}, 16, 8000, powered_off_fraction=1.0,
                                        overrides={A: Load(cpu=0.5)})
    assert figures["instance_usage"][A]["cpu"] == 2.0
    assert figures["load"].cpu_undeployed_reservation == 0


# -- the overrides ----------------------------------------------------------------


def test_an_instances_own_override_wins_over_the_one_for_every_instance():
    overrides = LoadOverrides()
    overrides.set(Load(0.9), None)
    overrides.set(Load(0.1, 0.2), [A])
    assert overrides.for_instances([A, B]) == {A: Load(0.1, 0.2), B: Load(0.9)}
    assert overrides.clear([A]) == 1
    assert overrides.for_instances([A, B]) == {A: Load(0.9), B: Load(0.9)}


def test_setting_every_instance_drops_their_own_and_clearing_drops_all():
    overrides = LoadOverrides()
    overrides.set(Load(0.1), [A])
    overrides.set(Load(0.7), None)
    assert overrides.state() == {"every": {"cpu": 0.7, "memory": None}, "instances": {}}
    overrides.set(Load(0.3), [B])
    assert overrides.clear() == 2
    assert overrides.for_instances([A, B]) == {}


def test_overrides_set_from_many_threads_are_all_kept():
    overrides = LoadOverrides()
    uuids = [str(uuidlib.UUID(int=i)) for i in range(400)]

    def put(chunk):
        for uuid in chunk:
            overrides.set(Load(0.5), [uuid])

    threads = [threading.Thread(target=put, args=(uuids[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(overrides.for_instances(uuids)) == 400


# -- the report ------------------------------------------------------------------


def test_the_fake_agents_report_carries_each_instances_use_and_an_override_changes_it(conf):
    conf.set_override("idle_cpu_load", 0.25, "fake")
    conf.set_override("idle_memory_fraction", 0.5, "fake")
    driver = drivers.load_driver(conf)
    tracker = ResourceTracker.from_conf(conf, "h1", "h1", driver)
    tracker.claim(A, VM)
    tracker.claim(B, VM)
    assert tracker.report()["instance_usage"] == {A: {"cpu": 1.0, "memory": 500.0},
                                                  B: {"cpu": 1.0, "memory": 500.0}}
    driver.fake_load.set(Load(cpu=0.9, memory=1.0), [A])
    assert tracker.report()["instance_usage"] == {A: {"cpu": 3.6, "memory": 1000.0},
                                                  B: {"cpu": 1.0, "memory": 500.0}}
    driver.destroy({"uuid": A})  # gone from the host: its override with it
    assert driver.fake_load.state()["instances"] == {}


def test_the_host_driver_reports_no_instance_usage(conf):
    tracker = ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf, "host"))
    tracker.claim(A, VM)
    assert "instance_usage" not in tracker.report()


# -- set_fake_load over memory:// --------------------------------------------------


def _built(transport, scheduler, vcpus=2, host=HOST):
    instance = make_instance(memory_mb=1000, vcpus=vcpus)
    spec, props = request_for(instance)
    ComputeClient(transport).run_instance({}, host, instance, spec, props)
    uuid = instance["uuid"]
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    return uuid


def _reported(scheduler, uuid, cpu, host=HOST):
    return wait_for(lambda: (r := scheduler.last_report(host)) and
                    r.get("instance_usage", {}).get(uuid, {}).get("cpu") == cpu and r,
                    f"a report of {uuid} using {cpu} vCPUs")


def test_set_fake_load_changes_the_next_report_and_clear_goes_back(conf, transport, scheduler, agents):
    conf.set_override("build_time", 0.0, "fake")
    conf.set_override("idle_cpu_load", 0.1, "fake")
    agents()
    uuid, other = _built(transport, scheduler), _built(transport, scheduler)
    client = ComputeClient(transport)

    state = client.set_fake_load({}, HOST, 0.9, 0.5, [uuid])
    assert state == {"host": HOST, "held": 2, "every": None, "instances": {uuid: {"cpu": 0.9, "memory": 0.5}}}
    report = _reported(scheduler, uuid, 1.8)
    assert report["instance_usage"][uuid]["memory"] == 500.0
    assert report["instance_usage"][other]["cpu"] == pytest.approx(0.2)

    state = client.set_fake_load({}, HOST, 1.0)
    assert state["every"] == {"cpu": 1.0, "memory": None} and state["instances"] == {}
    _reported(scheduler, other, 2.0)

    assert client.clear_fake_load({}, HOST) == {"host": HOST, "held": 2, "every": None, "instances": {}}
    _reported(scheduler, other, pytest.approx(0.2))


@pytest.mark.parametrize("kwargs, message", [
    ({"cpu": 1.5}, r"set_fake_load: cpu \(of the instance's vCPUs\) must be a fraction from 0 to 1, got 1.5"),
    ({"cpu": "lots"}, "cpu .* must be a fraction from 0 to 1, got 'lots'"),
    ({"cpu": True}, "cpu .* must be a fraction"),
    ({"cpu": 0.5, "memory": -0.1}, r"memory \(of the instance's memory\) must be a fraction from 0 to 1"),
    ({"cpu": 0.5, "instance_uuids": []}, "instance_uuids must be a list of 1 to 1000 instance UUIDs"),
    ({"cpu": 0.5, "instance_uuids": ["nope"]}, "set_fake_load: instance_uuids: must be a UUID, got 'nope'"),
    ({"cpu": 0.5, "instance_uuids": [A]}, f"host {HOST} holds no instance {A}; nothing set"),
])
def test_set_fake_load_refuses_bad_arguments_saying_which(transport, scheduler, agents, kwargs, message):
    manager = agents()
    with pytest.raises(rpc.RemoteError, match=message) as raised:
        ComputeClient(transport).set_fake_load({}, HOST, **kwargs)
    assert raised.value.exc_type == "InvalidRequest"
    assert manager.driver.fake_load.state() == {"every": None, "instances": {}}


def test_an_agent_whose_driver_is_not_fake_refuses(conf, transport, scheduler, agents):
    agents(driver=drivers.load_driver(conf, "host"))
    client = ComputeClient(transport)
    for call in (lambda: client.set_fake_load({}, HOST, 0.5), lambda: client.clear_fake_load({}, HOST)):
        with pytest.raises(rpc.RemoteError, match=f"host {HOST} runs the host driver, which simulates no "
                           r"load; only \[compute_agent\] driver = fake does"):
            call()


def test_the_fake_load_is_served_beside_the_production_endpoint_on_the_same_queue(agents):
    from compute_agent.fake_load_endpoint import FakeLoadEndpoint
    from compute_agent.manager import ComputeEndpoint, ComputeV1Endpoint
    from scheduler import api_versions

    for endpoint in (ComputeEndpoint, ComputeV1Endpoint):
        assert not hasattr(endpoint, "set_fake_load") and not hasattr(endpoint, "clear_fake_load")
    manager = agents()
    endpoints = manager._server.dispatcher.endpoints
    assert [type(e) for e in endpoints] == [ComputeEndpoint, ComputeV1Endpoint, FakeLoadEndpoint]
    assert endpoints[0].RPC_API is api_versions.COMPUTE  # 2.0; the fake load stays at 1.x, as released
    assert [e.RPC_API.version for e in endpoints] == [api_versions.COMPUTE.version, "1.2", "1.2"]
