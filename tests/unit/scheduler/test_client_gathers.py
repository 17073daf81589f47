"""SchedulerClient.run_instance from many threads: the casts that come while one is published
travel together, a bundle (API 1.3), unless [upgrade_levels] scheduler is below it."""

import threading

import pytest

from scheduler import rpc
from scheduler.client import TOPIC, SchedulerClient
from scheduler.service import agents_server
from tests.unit.rpc.conftest import WAIT, Recorder
from tests.unit.rpc.test_bundles import _rid
from tests.unit.rpc.test_gathered import HeldPublisher, _until


class Scheduler(Recorder):
    def run_instance(self, context, request_spec, filter_properties):
        self.record(context, request_spec=request_spec, filter_properties=filter_properties)


@pytest.fixture
def transport(conf):
    transport = rpc.get_transport(conf)
    yield transport
    transport.cleanup()


@pytest.fixture
def scheduler(transport):
    endpoint = Scheduler()
    server = rpc.get_rpc_server(transport, rpc.Target(TOPIC, server="s1"), [endpoint])
    server.start()
    yield endpoint
    server.stop()
    server.wait()


def _casting(client, n):
    thread = threading.Thread(target=client.run_instance,
                              args=({"request_id": _rid(n)}, {"n": n}, {"retry": {"num_attempts": 1}}))
    thread.start()
    return thread


def _handled_once_each(scheduler, count):
    assert scheduler.wait_for(count)
    assert sorted(kw["request_spec"]["n"] for _, kw in scheduler.received) == list(range(count))
    assert sorted(c.values["request_id"] for c, _ in scheduler.received) == [_rid(n) for n in range(count)]


def test_run_instance_from_many_threads_costs_fewer_messages_than_requests(transport, scheduler, monkeypatch):
    held = HeldPublisher(transport, monkeypatch)
    client = SchedulerClient(transport)
    threads = [_casting(client, 0)]
    assert held.entered.wait(WAIT)
    threads += [_casting(client, n) for n in range(1, 8)]
    _until(lambda: client._run_instance.gathered() == 7)
    held.release.set()
    for thread in threads:
        thread.join(WAIT)
    assert [len(m) for m in held.messages] == [1, 7]
    _handled_once_each(scheduler, 8)


def test_under_a_cap_below_bundles_each_run_instance_goes_alone_at_once(conf, transport, scheduler,
                                                                        monkeypatch):
    conf.set_override("scheduler", "1.2", "upgrade_levels")
    held = HeldPublisher(transport, monkeypatch)
    client = SchedulerClient(transport)
    first = _casting(client, 0)
    assert held.entered.wait(WAIT)
    # Published while the first is still out, each a message: none waits to go with another.
    others = [_casting(client, n) for n in range(1, 5)]
    for thread in others:
        thread.join(WAIT)
    assert [len(m) for m in held.messages] == [1, 1, 1, 1]
    held.release.set()
    first.join(WAIT)
    assert len(held.messages) == 5
    _handled_once_each(scheduler, 5)


class Updates(Recorder):
    def instance_update(self, context, instance_uuid, host, state, fault=None):
        self.record(context, instance_uuid=instance_uuid, state=state)


def test_an_agents_updates_from_many_builds_go_together_to_the_agents_queue(transport, monkeypatch):
    endpoint = Updates()
    server = agents_server(transport, [endpoint])
    server.start()
    try:
        held = HeldPublisher(transport, monkeypatch)
        client = SchedulerClient(transport)
        uuids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(6)]

        def update(uuid):
            thread = threading.Thread(target=client.instance_update, args=({}, uuid, "h1", "ACTIVE"))
            thread.start()
            return thread

        threads = [update(uuids[0])]
        assert held.entered.wait(WAIT)
        threads += [update(uuid) for uuid in uuids[1:]]
        _until(lambda: client._updates.gathered() == 5)
        held.release.set()
        for thread in threads:
            thread.join(WAIT)
        assert [len(m) for m in held.messages] == [1, 5]
        assert endpoint.wait_for(6)
        assert sorted(kw["instance_uuid"] for _, kw in endpoint.received) == uuids
    finally:
        server.stop()
        server.wait()
