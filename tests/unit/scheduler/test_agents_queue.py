"""The agents' words on their instances go to a queue of their own (API 1.9): an instance is
ACTIVE as soon as its agent says so, however many clients' requests wait for the scheduler."""

import time
import uuid as uuidlib

import pytest

from scheduler import rpc, states
from scheduler.client import AGENTS_TOPIC, SchedulerClient
from scheduler.rpc import deadletter
from tests.unit.rpc.test_bad_input import dead_letters
from tests.unit.scheduler.manager_world import report, request
from tests.unit.scheduler.test_service_running import service  # noqa: F401 (the fixture)

WAIT = 10.0  # guards against hangs only


def _until(condition, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def busy(service):  # noqa: F811 (the fixture imported above)
    """A started scheduler whose clients' queue is not taken (as when it works through a backlog),
    an instance SCHEDULED on h1, and 20 requests waiting: (service, the instance's uuid, theirs)."""
    service.start()
    service._server.stop()
    service._server.wait()
    placed = str(uuidlib.uuid4())
    service.database.create_instances([{"uuid": placed, "host": "h1", "state": states.SCHEDULED}])
    client = SchedulerClient(service.transport, timeout=WAIT)
    waiting = []
    for _ in range(20):
        uuids, spec, properties = request()
        client.run_instance({}, spec, properties)
        waiting.extend(uuids)
    yield service, placed, waiting
    service.stop()


def test_an_agents_update_is_taken_while_the_clients_requests_wait(busy):
    scheduler, placed, waiting = busy
    agent = SchedulerClient(scheduler.transport, timeout=WAIT)

    assert agent.start_build({}, placed, "h1") == {"build": True}
    agent.instance_update({}, placed, "h1", states.ACTIVE)

    _until(lambda: scheduler.database.get_instance(placed)["state"] == states.ACTIVE, "the instance ACTIVE")
    assert scheduler.database.get_instances(waiting) == {}  # the requests still wait, untouched


def test_an_agents_report_is_heard_while_the_clients_requests_wait(busy):
    scheduler, _, waiting = busy
    agent = SchedulerClient(scheduler.transport, timeout=WAIT)

    agent.report_resources({}, "h7", report("h7", 4096))

    _until(lambda: scheduler.parts.host_manager.get("h7") is not None, "h7 in the host table")
    assert scheduler.parts.host_manager.get("h7").free_ram_mb == 4096
    assert scheduler.database.get_instances(waiting) == {}


def test_under_a_cap_below_1_9_the_agents_words_go_behind_the_requests(busy):
    scheduler, placed, _ = busy
    scheduler.conf.set_override("scheduler", "1.8", group="upgrade_levels")
    agent = SchedulerClient(scheduler.transport, timeout=WAIT)

    agent.instance_update({}, placed, "h1", states.ACTIVE)
    time.sleep(0.5)
    assert scheduler.database.get_instance(placed)["state"] == states.SCHEDULED  # queued behind them

    scheduler._server = rpc.get_rpc_server(scheduler.transport, scheduler._server.target,
                                         scheduler._server.dispatcher.endpoints, batch_size=512,
                                         unit_of_work=scheduler._unit_of_work)
    scheduler._server.start()
    _until(lambda: scheduler.database.get_instance(placed)["state"] == states.ACTIVE, "the instance ACTIVE")


def test_a_request_sent_to_the_agents_queue_is_refused_not_run(busy):
    scheduler, _, _ = busy
    misdirected = rpc.RPCClient(scheduler.transport, rpc.Target(topic=AGENTS_TOPIC))
    uuids, spec, properties = request()

    misdirected.cast({}, "run_instance", request_spec=spec, filter_properties=properties)

    [letter] = dead_letters(scheduler.transport, 1)
    assert letter.headers[deadletter.REASON].startswith("NoSuchMethod")
    assert "run_instance" in letter.headers[deadletter.REASON]
    assert scheduler.database.get_instances(uuids) == {}
