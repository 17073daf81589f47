"""The compute API's versions between a scheduler's client and an agent: 1.1 tells the agent
why it terminates an instance; a client capped at 1.0 sends the terminate without it, which
an agent of a release that served 1.0 takes, and which it refuses otherwise. 2.0, which this
release's agents serve beside 1.x, is refused by the agents of the release before."""

import logging

from compute_agent.client import ComputeClient
from compute_agent.manager import ComputeManager
from scheduler.rpc import deadletter
from tests.previous_release import serve_release
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.rpc.test_bad_input import dead_letters

WHY = "deleted by a client (delete_instance)"


def active(transport, scheduler):
    instance = make_instance()
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    return instance["uuid"]


def test_the_agent_logs_why_the_scheduler_terminates_an_instance(conf, transport, scheduler, agents, caplog):
    agents()
    uuid = active(transport, scheduler)
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        ComputeClient(transport).terminate_instance({}, HOST, uuid, WHY)
        wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")
    assert f"Terminated {uuid} ({WHY})" in caplog.messages


def test_capped_at_1_0_a_terminate_reaches_an_agent_of_release_1_0_without_its_reason(
        conf, transport, scheduler, agents, monkeypatch, caplog):
    monkeypatch.setattr(ComputeManager, "_endpoints", ComputeManager._endpoints)
    serve_release(ComputeManager, "1.0")
    conf.set_override("compute", "1.0", "upgrade_levels")
    agents()
    client = ComputeClient(transport)
    assert not client.can_send_version("1.1")
    uuid = active(transport, scheduler)
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        client.terminate_instance({}, HOST, uuid, WHY)
        wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")
    assert f"Terminated {uuid}" in caplog.messages


def test_capped_at_1_1_a_terminate_with_its_reason_is_refused_by_an_agent_of_release_1_0(
        conf, transport, scheduler, agents, monkeypatch):
    monkeypatch.setattr(ComputeManager, "_endpoints", ComputeManager._endpoints)
    serve_release(ComputeManager, "1.0")
    conf.set_override("compute", "1.1", "upgrade_levels")
    manager = agents()
    uuid = active(transport, scheduler)
    ComputeClient(transport).terminate_instance({}, HOST, uuid, WHY)
    [letter] = dead_letters(transport, 1)
    assert letter.headers[deadletter.REASON] == (
        "UnsupportedVersion: Endpoint does not support RPC version 1.1. Attempted method: "
        "terminate_instance; it serves the compute API up to 1.0: set [upgrade_levels] compute = 1.0 where "
        "it is sent from, until this is upgraded")
    assert uuid in manager.tracker and "DELETED" not in scheduler.states(uuid)
    ComputeClient(transport).terminate_instance({}, HOST, uuid)  # no reason to give: 1.0, taken
    wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")


def test_uncapped_builds_are_refused_by_an_agent_of_the_previous_release_until_capped_at_1_2(
        conf, transport, scheduler, agents, monkeypatch):
    monkeypatch.setattr(ComputeManager, "_endpoints", ComputeManager._endpoints)
    serve_release(ComputeManager, "1.2")
    agents()
    instance = make_instance()
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    [letter] = dead_letters(transport, 1)
    assert letter.headers[deadletter.REASON] == (
        "UnsupportedVersion: Endpoint does not support RPC version 2.0. Attempted method: "
        "run_instance; it serves the compute API up to 1.2: set [upgrade_levels] compute = 1.2 where "
        "it is sent from, until this is upgraded")
    conf.set_override("compute", "1.2", "upgrade_levels")
    assert active(transport, scheduler)


def test_this_release_serves_every_version_of_the_compute_api_each_from_its_endpoint(
        conf, transport, scheduler, agents):
    agents()
    for cap in ("1.0", "1.1", "1.2", None):
        conf.set_override("compute", cap, "upgrade_levels")
        uuid = active(transport, scheduler)
        ComputeClient(transport).terminate_instance({}, HOST, uuid, WHY)
        wait_for(lambda u=uuid: "DELETED" in scheduler.states(u), f"DELETED at cap {cap}")
