"""The compute API's versions between a scheduler's client and an agent: 1.1 tells the agent
why it terminates an instance; a client capped at 1.0 sends the terminate without it, which
an agent of the previous release (1.0) takes, and which it refuses otherwise."""

import logging

from compute_agent import manager as agent_manager
from compute_agent.client import ComputeClient
from scheduler.rpc import deadletter
from tests.previous_release import PreviousComputeEndpoint
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


def test_capped_at_1_0_a_terminate_reaches_an_agent_of_the_previous_release_without_its_reason(
        conf, transport, scheduler, agents, monkeypatch, caplog):
    monkeypatch.setattr(agent_manager, "ComputeEndpoint", PreviousComputeEndpoint)
    conf.set_override("compute", "1.0", "upgrade_levels")
    agents()
    client = ComputeClient(transport)
    assert not client.can_send_version("1.1")
    uuid = active(transport, scheduler)
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        client.terminate_instance({}, HOST, uuid, WHY)
        wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")
    assert f"Terminated {uuid}" in caplog.messages


def test_uncapped_a_terminate_with_its_reason_is_refused_by_an_agent_of_the_previous_release(
        conf, transport, scheduler, agents, monkeypatch):
    monkeypatch.setattr(agent_manager, "ComputeEndpoint", PreviousComputeEndpoint)
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
