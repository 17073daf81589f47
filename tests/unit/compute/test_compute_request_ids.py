"""The agent logs what it does for a request under the request's id, and passes the id back."""

import threading

import pytest

from compute_agent.client import ComputeClient
from compute_agent.manager import ComputeManager
from tests.unit.compute.stub_scheduler import (
    HOST,
    StubScheduler,
    make_instance,
    request_for,
    serving,
    wait_for,
)
from tests.unit.logs import request_ids, service_log

rpc = pytest.importorskip("scheduler.rpc")


class ContextRecorder(StubScheduler):
    """The stub scheduler, also keeping the request id each instance_update came with."""

    def __init__(self):
        super().__init__()
        self.request_ids = []
        self._ids_lock = threading.Lock()

    def instance_update(self, context, instance_uuid, host, state, fault=None):
        with self._ids_lock:
            self.request_ids.append((instance_uuid, state, context.request_id))
        super().instance_update(context, instance_uuid, host, state, fault)


@pytest.fixture
def scheduler(transport):
    """This module's stub, recording contexts, in place of the conftest's."""
    with serving(transport, ContextRecorder()) as stub:
        yield stub


def agent_lines(lines, uuid):
    return [line for line in lines if " compute_agent.manager [" in line and uuid in line]


def test_a_build_is_logged_under_its_request_id_and_its_updates_carry_it_back(
        conf, tmp_path, transport, scheduler, agents):
    agents()
    instance = make_instance()
    uuid, request_id = instance["uuid"], rpc.new_request_id()
    with service_log(conf, tmp_path / "agent.log", prog="berth-compute-agent") as read:
        ComputeClient(transport).run_instance({"request_id": request_id}, HOST, instance,
                                              *request_for(instance))
        wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
        lines = agent_lines(read(), uuid)
    assert [line.split("] ", 1)[1] for line in lines] == [
        f"Claimed {uuid} on {HOST}; building", f"Instance {uuid} is ACTIVE on {HOST}"]
    assert all(request_ids(line) == [request_id] for line in lines), lines
    assert [(state, rid) for u, state, rid in scheduler.request_ids if u == uuid] == [
        ("BUILDING", request_id), ("ACTIVE", request_id)]


def test_a_build_resumed_after_a_restart_keeps_its_request_id(conf, tmp_path, transport, scheduler, agents):
    conf.set_override("build_time", 600, "fake")
    first = agents()
    instance = make_instance()
    uuid, request_id = instance["uuid"], rpc.new_request_id()
    ComputeClient(transport).run_instance({"request_id": request_id}, HOST, instance, *request_for(instance))
    wait_for(lambda: scheduler.states(uuid) == ["BUILDING"], "BUILDING")
    first.stop()

    conf.set_override("build_time", 0, "fake")
    second = ComputeManager(conf, transport, host=HOST)
    with service_log(conf, tmp_path / "agent.log", prog="berth-compute-agent") as read:
        second.start()
        try:
            wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "the resumed build")
        finally:
            second.stop()
        lines = agent_lines(read(), uuid)
    assert [line.split("] ", 1)[1] for line in lines] == [
        f"Resuming the build of {uuid}", f"Instance {uuid} is ACTIVE on {HOST}"]
    assert all(request_ids(line) == [request_id] for line in lines), lines
    assert [rid for u, state, rid in scheduler.request_ids if u == uuid and state == "ACTIVE"] == [request_id]
