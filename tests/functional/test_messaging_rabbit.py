"""Berth's client and server over the real RabbitMQ."""

import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest
from amqp import exceptions as amqp_exceptions

from scheduler import conf as berth_conf
from scheduler import rpc

pytestmark = pytest.mark.functional

WAIT = 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


class Recorder:
    def __init__(self, name="recorder"):
        self.name = name
        self.received = []
        self.changed = threading.Condition()

    def record(self, context, **kwargs):
        with self.changed:
            self.received.append((context, kwargs))
            self.changed.notify_all()

    def echo(self, context, **kwargs):
        return {"server": self.name, "args": kwargs, "user_id": context.user_id}

    def wait_for(self, count):
        with self.changed:
            return self.changed.wait_for(lambda: len(self.received) >= count, WAIT)


@pytest.fixture(params=[True, False], ids=["fast", "public"])
def conf(request, tmp_path, control_exchange, rabbit_url):
    """Every test runs with the amqp fast paths and with py-amqp's public API only."""
    conf = berth_conf.new_conf()
    conf([])
    conf.set_override("amqp_fast_paths", request.param, group="oslo_messaging_rabbit")
    conf.set_override("state_path", str(tmp_path))
    conf.set_override("control_exchange", control_exchange)
    conf.set_override("transport_url", rabbit_url)
    yield conf
    conf.reset()


@pytest.fixture
def topic(transport):
    """A topic of this test only; its durable queues are deleted afterwards."""
    name = f"berth-test-{uuid.uuid4().hex[:8]}"
    yield name
    with transport.connection("test-cleanup") as conn:
        for queue in (name, f"{name}.h1", f"{name}.h2", f"{name}.child"):
            conn.default_channel.queue_delete(queue)


def _server(transport, topic, endpoints, server=None):
    srv = rpc.get_rpc_server(transport, rpc.Target(topic=topic, server=server), endpoints)
    srv.start()
    return srv


def test_cast_call_and_fanout(transport, topic):
    one, two = Recorder("one"), Recorder("two")
    servers = [_server(transport, topic, [one], "h1"), _server(transport, topic, [two], "h2")]
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    try:
        request_id = f"req-{uuid.uuid4()}"
        client.prepare(server="h2").cast({"request_id": request_id}, "record", n=1)
        assert two.wait_for(1)
        assert two.received[0][0].values == {"request_id": request_id}
        assert two.received[0][1] == {"n": 1}

        result = client.prepare(server="h1").call({}, "echo", x=2)
        assert result == {"server": "one", "args": {"x": 2}, "user_id": "guest"}

        client.prepare(fanout=True).cast({}, "record", report=3)
        assert one.wait_for(1) and two.wait_for(2)
        assert one.received[-1][1] == two.received[-1][1] == {"report": 3}

        with pytest.raises(rpc.RemoteError) as info:
            client.call({}, "missing")
        assert info.value.exc_type == "NoSuchMethod"
    finally:
        for srv in servers:
            srv.stop()
        for srv in servers:
            srv.wait()


def test_deliveries_take_the_fast_path_only_with_the_fast_paths_on(conf, transport, topic, monkeypatch):
    from scheduler.rpc.amqp_fast import deliveries

    read, real = [], deliveries.deliver_arguments

    def spied(payload):
        read.append(real(payload))
        return read[-1]

    monkeypatch.setattr(deliveries, "deliver_arguments", spied)
    recorder = Recorder()
    server = _server(transport, topic, [recorder])
    try:
        rpc.RPCClient(transport, rpc.Target(topic=topic)).cast({}, "record", n=1)
        assert recorder.wait_for(1)
        assert recorder.received[0][1] == {"n": 1}
    finally:
        server.stop()
        server.wait()
    fast = conf.oslo_messaging_rabbit.amqp_fast_paths
    assert bool([args for args in read if args[4] == topic]) is fast


def test_publisher_confirms_are_on(transport, topic):
    rpc.RPCClient(transport, rpc.Target(topic=topic)).cast({}, "record")
    channel = transport.publisher._producer.channel
    # RabbitMQ refuses transactions on a channel in confirm mode.
    with pytest.raises(amqp_exceptions.PreconditionFailed, match="confirm"):
        channel.tx_select()


def test_call_without_server_times_out(transport, topic):
    with pytest.raises(rpc.MessagingTimeout):
        rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=1).call({}, "echo")


def test_stopped_server_hands_unprocessed_messages_to_the_next(transport, topic):
    entered, release = threading.Event(), threading.Event()

    class Blocking:
        def work(self, context, n):
            entered.set()
            release.wait(WAIT)

    first = _server(transport, topic, [Blocking()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    client.cast({}, "work", n=1)
    assert entered.wait(WAIT)
    client.cast({}, "work", n=2)  # prefetched by the first server, not processed

    first.stop()
    release.set()
    first.wait()

    class Next(Recorder):
        def work(self, context, n):
            self.record(context, n=n)

    successor = Next()
    second = _server(transport, topic, [successor])
    try:
        assert successor.wait_for(1)
        assert successor.received[0][1] == {"n": 2}
    finally:
        second.stop()
        second.wait()


def test_message_is_redelivered_when_the_server_dies_before_acking(conf, transport, topic):
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.unit.rpc.child_server",
            conf.transport_url,
            conf.state_path,
            conf.control_exchange,
            topic,
            "child",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BERTH_CONCURRENCY": os.environ.get("BERTH_CONCURRENCY", "")},
    )
    successor = Recorder()
    server = None
    try:
        assert child.stdout.readline().strip() == "ready"
        client = rpc.RPCClient(transport, rpc.Target(topic=topic))
        client.cast({}, "block", n=7)
        assert child.stdout.readline().strip() == "blocking {'n': 7}"

        child.send_signal(signal.SIGKILL)
        child.wait(WAIT)

        class Taker(Recorder):
            def block(self, context, n):
                self.record(context, n=n)

        successor = Taker()
        server = _server(transport, topic, [successor])
        assert successor.wait_for(1)
        context, kwargs = successor.received[0]
        assert kwargs == {"n": 7}
        assert context.redelivered is True
    finally:
        if child.poll() is None:
            child.kill()
        if server is not None:
            server.stop()
            server.wait()


def test_fanout_cast_after_the_last_fanout_consumer_left(transport, topic):
    # RabbitMQ auto-deletes the fanout exchange with its last queue; the
    # publisher, which declared it before, must declare it again.
    fanout = rpc.RPCClient(transport, rpc.Target(topic=topic, fanout=True))
    first = _server(transport, topic, [Recorder()])
    fanout.cast({}, "record")
    first.stop()
    first.wait()

    fanout.cast({}, "record")  # nobody listens: dropped, but no error

    later = Recorder()
    second = _server(transport, topic, [later])
    try:
        fanout.cast({}, "record", n=2)
        assert later.wait_for(1)
        assert later.received[0][1] == {"n": 2}
    finally:
        second.stop()
        second.wait()
