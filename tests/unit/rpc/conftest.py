import itertools
import threading
import time

import kombu
import pytest

from scheduler import rpc
from scheduler.rpc import topology

_topics = itertools.count()

# Guards against hangs only; nothing here is expected to take more than a moment.
WAIT = 15


class Recorder:
    """An endpoint that records what it receives."""

    def __init__(self, name="recorder"):
        self.name = name
        self.received = []
        self.event = threading.Event()

    def record(self, context, **kwargs):
        self.received.append((context, kwargs))
        self.event.set()

    def echo(self, context, **kwargs):
        return {"server": self.name, "args": kwargs, "context": context.values}

    def fail(self, context, message):
        raise ValueError(message)

    def _private(self, context):
        return "secret"

    def wait_for(self, count, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.received) >= count


@pytest.fixture(params=["memory://", "filesystem://"])
def transport_url(request):
    return request.param


@pytest.fixture
def transport(conf, transport_url):
    conf.set_override("polling_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, transport_url)
    yield transport
    transport.cleanup()


@pytest.fixture
def topic():
    return f"topic{next(_topics)}"


@pytest.fixture
def start_server(transport, topic):
    """start_server(endpoints, server=None, topic=None) -> a started RPCServer."""
    servers = []

    def start(endpoints, server=None, topic_name=None):
        srv = rpc.get_rpc_server(transport, rpc.Target(topic=topic_name or topic, server=server), endpoints)
        srv.start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()
    for srv in servers:
        srv.wait()


def publish_raw(transport, key, body, content_type="application/json"):
    with transport.connection("test") as conn:
        producer = kombu.Producer(conn.channel())
        exchange = topology.topic_exchange(transport)
        exchange(producer.channel).declare()
        producer.publish(
            body,
            exchange=exchange,
            routing_key=key,
            content_type=content_type,
            content_encoding="utf-8" if isinstance(body, str) else "binary",
        )


def stop_and_count_waiting(transport, servers, queue_names):
    """Stop ``servers`` (what they hold unacked goes back to its queue), then take every
    message waiting on ``queue_names``: how many there were."""
    for srv in servers:
        srv.stop()
    for srv in servers:
        srv.wait()
    count = 0
    with transport.connection("test") as conn:
        for name in queue_names:
            queue = kombu.Queue(name, channel=conn.default_channel)
            while queue.get(no_ack=True) is not None:
                count += 1
    return count
