"""Casts, calls and fanout through a real transport (memory:// and filesystem://)."""

import time

import pytest

from scheduler import rpc
from tests.unit.rpc.conftest import WAIT, Recorder, stop_and_count_waiting


def test_cast_reaches_the_endpoint_with_args_and_context(transport, topic, start_server):
    endpoint = Recorder()
    start_server([endpoint], server="host1")

    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    request_id = rpc.new_request_id()
    client.cast({"user": "alice", "request_id": request_id}, "record", a=1, b=[1, 2])

    assert endpoint.wait_for(1)
    context, kwargs = endpoint.received[0]
    assert kwargs == {"a": 1, "b": [1, 2]}
    assert context.values == {"user": "alice", "request_id": request_id}
    assert context.msg_id is None
    assert context.redelivered is False


def test_call_returns_the_result(transport, topic, start_server):
    start_server([Recorder("s1")], server="host1")

    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    result = client.call({"user": "bob"}, "echo", x=1)

    assert rpc.context.is_request_id(result["context"].pop("request_id"))  # the caller sent none
    assert result == {"server": "s1", "args": {"x": 1}, "context": {"user": "bob"}}


def test_several_calls_from_threads_each_get_their_own_reply(transport, topic, start_server):
    import threading

    start_server([Recorder()], server="host1")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    results = {}

    def call(n):
        results[n] = client.call({}, "echo", n=n)["args"]["n"]

    threads = [threading.Thread(target=call, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert results == {n: n for n in range(5)}


def test_endpoint_exception_becomes_remote_error(transport, topic, start_server):
    start_server([Recorder()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    with pytest.raises(rpc.RemoteError) as info:
        client.call({}, "fail", message="disk on fire")

    assert info.value.exc_type == "ValueError"
    assert info.value.value == "disk on fire"
    assert str(info.value) == "ValueError: disk on fire"
    assert "disk on fire" in info.value.traceback


@pytest.mark.parametrize("method", ["no_such_method", "_private"])
def test_unknown_method_is_a_remote_error_naming_it(transport, topic, start_server, method):
    start_server([Recorder()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    with pytest.raises(rpc.RemoteError) as info:
        client.call({}, method)

    assert info.value.exc_type == "NoSuchMethod"
    assert method in info.value.value


def test_server_keeps_serving_after_failing_casts(transport, topic, start_server):
    endpoint = Recorder()
    start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    client.cast({}, "fail", message="boom")
    client.cast({}, "no_such_method")
    client.cast({}, "record", n=1)

    assert endpoint.wait_for(1)
    assert client.call({}, "echo", n=2)["args"] == {"n": 2}


def test_call_without_server_times_out(transport, topic):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=1)

    started = time.monotonic()
    with pytest.raises(rpc.MessagingTimeout):
        client.call({}, "echo")
    assert time.monotonic() - started < WAIT


def test_late_reply_to_timed_out_call_does_not_confuse_the_next_call(transport, topic, start_server):
    class Slow:
        def slow(self, context, delay):
            time.sleep(delay)
            return "slow"

        def fast(self, context):
            return "fast"

    start_server([Slow()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=0.5)
    with pytest.raises(rpc.MessagingTimeout):
        client.call({}, "slow", delay=1.5)
    assert client.prepare(timeout=WAIT).call({}, "fast") == "fast"


def test_fanout_cast_reaches_every_server(transport, topic, start_server):
    one, two = Recorder("one"), Recorder("two")
    start_server([one], server="host1")
    start_server([two], server="host2")

    rpc.RPCClient(transport, rpc.Target(topic=topic)).prepare(fanout=True).cast({}, "record", report=1)

    assert one.wait_for(1) and two.wait_for(1)
    assert one.received[0][1] == two.received[0][1] == {"report": 1}


def test_topic_cast_reaches_exactly_one_server(transport, topic, start_server):
    one, two = Recorder("one"), Recorder("two")
    servers = [start_server([one], server="host1"), start_server([two], server="host2")]

    rpc.RPCClient(transport, rpc.Target(topic=topic)).cast({}, "record", n=1)

    assert one.event.wait(WAIT) or two.event.wait(WAIT)
    waiting = stop_and_count_waiting(transport, servers, [topic, f"{topic}.host1", f"{topic}.host2"])
    assert len(one.received) + len(two.received) + waiting == 1


def test_prepare_server_reaches_only_that_server(transport, topic, start_server):
    one, two = Recorder("one"), Recorder("two")
    start_server([one], server="host1")
    start_server([two], server="host2")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    for n in range(4):
        client.prepare(server="host2").cast({}, "record", n=n)
    results = {client.prepare(server="host2").call({}, "echo")["server"] for _ in range(4)}

    assert two.wait_for(4)
    assert one.received == []
    assert results == {"two"}
    assert [kwargs["n"] for _, kwargs in two.received] == [0, 1, 2, 3]


def test_prepare_returns_a_copy(transport, topic):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=3)
    prepared = client.prepare(server="h", timeout=7)

    assert prepared.target == rpc.Target(topic=topic, server="h")
    assert prepared.timeout == 7
    assert client.target == rpc.Target(topic=topic) and client.timeout == 3


def test_messages_of_a_queue_are_dispatched_in_order(transport, topic, start_server):
    endpoint = Recorder()
    start_server([endpoint], server="host1")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))

    for n in range(20):
        client.cast({}, "record", n=n)

    assert endpoint.wait_for(20)
    assert [kwargs["n"] for _, kwargs in endpoint.received] == list(range(20))


def test_a_call_cannot_fan_out(transport, topic):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic, fanout=True))
    with pytest.raises(ValueError):
        client.call({}, "echo")


def test_unserializable_argument_fails_the_cast(transport, topic):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    with pytest.raises(TypeError):
        client.cast({}, "record", thing=object())


def test_endpoint_can_pass_its_context_on(transport, topic, start_server):
    class Forwarder:
        def forward(self, context):
            return (
                rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
                .prepare(server="host2")
                .call(context, "echo")
            )

    start_server([Forwarder()], server="host1", topic_name=f"{topic}-front")
    start_server([Recorder("back")], server="host2")
    front = rpc.RPCClient(transport, rpc.Target(topic=f"{topic}-front"), timeout=WAIT)

    request_id = rpc.new_request_id()
    result = front.call({"request_id": request_id}, "forward")

    assert result["context"] == {"request_id": request_id}
