"""Wire compatibility with oslo.messaging's rabbit driver, on the real RabbitMQ.

A real oslo.messaging client casts to and calls Berth's server, and Berth's
client calls a real oslo.messaging server.
"""

import contextlib
import importlib
import re
import threading
import uuid

import oslo_messaging
import pytest
from oslo_config import cfg

from scheduler import conf as berth_conf
from scheduler import rpc

pytestmark = pytest.mark.functional

WAIT = 20

# What oslo_messaging.conffixture registers (that module needs `fixtures`).
OSLO_OPTS = [
    ("oslo_messaging._drivers.impl_rabbit", "rabbit_opts", "oslo_messaging_rabbit"),
    ("oslo_messaging._drivers.amqp", "amqp_opts", "oslo_messaging_rabbit"),
    ("oslo_messaging.rpc.client", "_client_opts", None),
    ("oslo_messaging.transport", "_transport_opts", None),
    ("oslo_messaging.rpc.dispatcher", "_dispatcher_opts", None),
    ("oslo_messaging._metrics.client", "oslo_messaging_metrics", "oslo_messaging_metrics"),
    ("oslo_messaging._tracing.client", "oslo_messaging_tracing", "oslo_messaging_tracing"),
]


@pytest.fixture
def berth_transport(tmp_path, control_exchange, rabbit_url):
    conf = berth_conf.new_conf()
    conf([])
    conf.set_override("state_path", str(tmp_path))
    conf.set_override("control_exchange", control_exchange)
    transport = rpc.get_transport(conf, rabbit_url)
    yield transport
    transport.cleanup()


@pytest.fixture
def oslo_transport_(control_exchange, rabbit_url, berth_transport):
    oconf = cfg.ConfigOpts()
    oconf([])
    for module, attr, group in OSLO_OPTS:
        oconf.register_opts(getattr(importlib.import_module(module), attr), group=group)
    oconf.set_override("control_exchange", control_exchange)
    durable = berth_transport.conf.oslo_messaging_rabbit.amqp_durable_queues
    oconf.set_override("amqp_durable_queues", durable, group="oslo_messaging_rabbit")
    transport = oslo_messaging.get_rpc_transport(oconf, url=rabbit_url)
    yield transport
    transport.cleanup()


class SchedulerEndpoint:
    """Records the casts and answers the calls of this test (marked by its context)."""

    def __init__(self, marker):
        self.marker = marker
        self.casts = []
        self.changed = threading.Condition()

    def run_instance(self, context, request_spec, filter_properties):
        if context.get("marker") == self.marker:
            with self.changed:
                self.casts.append((context.values, request_spec, filter_properties))
                self.changed.notify_all()

    def wait_for_casts(self, count):
        with self.changed:
            return self.changed.wait_for(lambda: len(self.casts) >= count, WAIT)

    def select_destinations(self, context, request_spec, filter_properties):
        return [
            {"host": f"host{i}", "nodename": f"node{i}", "limits": {}}
            for i in range(request_spec["num_instances"])
        ]


def given(ctxt):
    """The context as the caller gave it: Berth adds a request id to one that has none."""
    ctxt = dict(ctxt)
    assert re.fullmatch(r"req-[0-9a-f-]{36}", ctxt.pop("request_id"))
    return ctxt


def test_oslo_client_casts_and_calls_berth_server(berth_transport, oslo_transport_):
    # Addressed to our server's own queue (scheduler.<server>) and fanout: the
    # shared queue "scheduler" may have other consumers on this broker.
    marker = uuid.uuid4().hex
    host = f"sched-{marker[:8]}"
    endpoint = SchedulerEndpoint(marker)
    server = rpc.get_rpc_server(berth_transport, rpc.Target(topic="scheduler", server=host), [endpoint])
    server.start()
    try:
        target = oslo_messaging.Target(topic="scheduler", server=host)
        client = oslo_messaging.get_rpc_client(oslo_transport_, target, timeout=WAIT)
        ctxt = {"marker": marker, "user_id": "u1"}
        spec = {"num_instances": 2, "instance_uuids": ["a", "b"]}

        client.cast(ctxt, "run_instance", request_spec=spec, filter_properties={"retry": {}})
        assert endpoint.wait_for_casts(1)
        assert [(given(c), s, f) for c, s, f in endpoint.casts] == [(ctxt, spec, {"retry": {}})]

        client.prepare(fanout=True).cast(ctxt, "run_instance", request_spec=spec, filter_properties={})
        assert endpoint.wait_for_casts(2)
        assert (given(endpoint.casts[1][0]), *endpoint.casts[1][1:]) == (ctxt, spec, {})

        hosts = client.call(ctxt, "select_destinations", request_spec=spec, filter_properties={})
        assert hosts == [
            {"host": "host0", "nodename": "node0", "limits": {}},
            {"host": "host1", "nodename": "node1", "limits": {}},
        ]

        with pytest.raises(oslo_messaging.RemoteError) as info:
            client.call(ctxt, "no_such_method")
        assert info.value.exc_type == "NoSuchMethod"
    finally:
        server.stop()
        server.wait()
        with berth_transport.connection("test-cleanup") as conn:
            conn.default_channel.queue_delete(f"scheduler.{host}")


class AgentEndpoint:
    def ping(self, ctxt, n):
        return {"pong": n, "user": ctxt.get("user_id")}

    def fail(self, ctxt):
        raise ValueError("oslo says no")


@contextlib.contextmanager
def oslo_server(oslo_transport_, berth_transport, endpoint):
    """An oslo.messaging server of ``endpoint`` (server agent1 of a topic of its own); yields the topic."""
    topic = f"berth-oslo-{uuid.uuid4().hex[:8]}"
    server = oslo_messaging.get_rpc_server(
        oslo_transport_,
        oslo_messaging.Target(topic=topic, server="agent1"),
        [endpoint],
        executor="threading",
    )
    server.start()
    try:
        yield topic
    finally:
        server.stop()
        server.wait()
        with berth_transport.connection("test-cleanup") as conn:
            for queue in (topic, f"{topic}.agent1"):
                conn.default_channel.queue_delete(queue)


def test_berth_client_calls_oslo_server(berth_transport, oslo_transport_):
    with oslo_server(oslo_transport_, berth_transport, AgentEndpoint()) as topic:
        client = rpc.RPCClient(berth_transport, rpc.Target(topic=topic), timeout=WAIT)

        assert client.prepare(server="agent1").call({"user_id": "u2"}, "ping", n=5) == {
            "pong": 5,
            "user": "u2",
        }
        with pytest.raises(rpc.RemoteError) as info:
            client.call({}, "fail")
        assert (info.value.exc_type, info.value.value) == ("ValueError", "oslo says no")


class VersionedEndpoint:
    target = oslo_messaging.Target(version="1.1")

    def ping(self, ctxt, n):
        return n


def test_an_oslo_server_reads_the_version_a_berth_client_sends(berth_transport, oslo_transport_):
    with oslo_server(oslo_transport_, berth_transport, VersionedEndpoint()) as topic:
        client = rpc.RPCClient(berth_transport, rpc.Target(topic=topic), timeout=WAIT)
        assert client.call({}, "ping", n=1) == 1
        assert client.prepare(version="1.1").call({}, "ping", n=2) == 2
        with pytest.raises(rpc.RemoteError) as info:
            client.prepare(version="1.2").call({}, "ping", n=3)
        assert (info.value.exc_type, info.value.value) == (
            "UnsupportedVersion", "Endpoint does not support RPC version 1.2. Attempted method: ping")
