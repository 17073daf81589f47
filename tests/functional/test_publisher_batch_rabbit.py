"""Publisher.batch() over the real RabbitMQ: one wait for thousands of confirms, and a
batch sent again on a new connection when the old one died under the publisher."""

import socket
import time

import kombu
import pytest

from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.rpc import envelope, topology
from tests.fixtures import temporary_vhost
from tests.functional import wire

pytestmark = pytest.mark.functional

TOPIC = "batched"


@pytest.fixture
def transport_url(rabbit_url):
    with temporary_vhost() as url:
        yield url


@pytest.fixture(params=[True, False], ids=["fast", "public"])
def transport(request, tmp_path, control_exchange, transport_url):
    """With the amqp fast paths (a batch in one write, one wait for its confirms), or
    with py-amqp's public API only (each publish waits for its confirm)."""
    conf = berth_conf.new_conf()
    conf([])
    conf.set_override("amqp_fast_paths", request.param, group="oslo_messaging_rabbit")
    conf.set_override("state_path", str(tmp_path))
    conf.set_override("control_exchange", control_exchange)
    conf.set_override("amqp_durable_queues", True, group="oslo_messaging_rabbit")  # persistent messages
    conf.set_override("rabbit_retry_interval", 0.2, group="oslo_messaging_rabbit")
    conf.set_override("rpc_response_timeout", 20)
    transport = rpc.get_transport(conf, transport_url)
    with transport.connection("test-declare") as conn:
        topology.shared_queue(transport, TOPIC)(conn.default_channel).declare()
    yield transport
    transport.cleanup()
    conf.reset()


def take_all(transport_url, transport):
    """Every message waiting on the topic's queue, consumed."""
    found = []
    with kombu.Connection(transport_url.replace("rabbit://", "amqp://", 1)) as conn:
        queue = topology.shared_queue(transport, TOPIC)(conn.default_channel)
        while (message := queue.get(no_ack=True, accept=["json"])) is not None:
            found.append(message)
    return found


def n_of(message):
    return envelope.unwrap(message.decode())["args"]["n"]


def test_thousands_of_casts_in_one_batch_arrive_once_and_unchanged(transport, transport_url):
    client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))
    client.cast({"request_id": "single"}, "record", n=-1)
    count = 2000
    with transport.publisher.batch():
        for n in range(count):
            client.cast({"request_id": "batched"}, "record", n=n)
    if transport.fast_paths:
        channel = transport.publisher._producer.channel
        assert channel.tags.sent == channel.tags.settled == count + 1

    single, *batched = take_all(transport_url, transport)
    assert [n_of(m) for m in batched] == list(range(count))
    assert n_of(single) == -1
    for message in (single, batched[0], batched[-1]):
        assert message.properties["delivery_mode"] == 2
        assert message.properties["user_id"] == "guest"
        assert message.content_type == "application/json"
    # Serialized exactly as a single publish is.
    assert batched[0].properties == single.properties
    assert batched[0].headers == single.headers
    assert batched[0].content_encoding == single.content_encoding


def _broker_closes(transport, transport_url):
    closed = wire.rabbitmqctl("close_all_connections", "--vhost", wire.vhost_of(transport_url),
                              "closed by the batch test")
    assert closed.stdout.startswith("Closed"), closed.stdout


def _socket_dies(transport, transport_url):
    transport.publisher._conn.connection.sock.shutdown(socket.SHUT_RDWR)


@pytest.mark.parametrize("kill", [_broker_closes, _socket_dies], ids=["broker-closes", "socket-dies"])
def test_batch_is_sent_again_after_the_connection_died_under_it(transport, transport_url, kill):
    client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))
    client.cast({}, "record", n=-1)  # connects the publisher
    old = transport.publisher._conn
    kill(transport, transport_url)

    count = 500
    with transport.publisher.batch():
        for n in range(count):
            client.cast({}, "record", n=n)

    assert transport.publisher._conn is not old
    got = [n_of(m) for m in take_all(transport_url, transport)]
    assert got[0] == -1
    # At least once, the last copy of each in order: a retry sends the whole batch again.
    assert set(got[1:]) == set(range(count))
    assert got[-count:] == list(range(count))


def test_a_batch_confirmed_later_is_sent_at_its_end_and_confirmed_on_demand(transport, transport_url):
    client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))
    with transport.publisher.batch(confirm=False) as sent:
        for n in range(300):
            client.cast({}, "record", n=n)
    channel = transport.publisher._producer.channel
    if transport.fast_paths:
        assert channel.tags.sent == 300
    sent.confirm()
    if transport.fast_paths:
        assert channel.tags.settled == 300
    assert [n_of(m) for m in take_all(transport_url, transport)] == list(range(300))


@pytest.mark.parametrize("kill", [_broker_closes, _socket_dies], ids=["broker-closes", "socket-dies"])
def test_a_batch_sent_on_a_connection_that_died_since_is_sent_again(transport, transport_url, kill):
    client = rpc.RPCClient(transport, rpc.Target(topic=TOPIC))
    with transport.publisher.batch(confirm=False) as sent:
        for n in range(300):
            client.cast({}, "record", n=n)
    old = transport.publisher._conn
    kill(transport, transport_url)
    deadline = time.monotonic() + 10
    while transport.publisher._conn is old:  # the broker closes it a moment after rabbitmqctl returns
        assert time.monotonic() < deadline, "the publisher never noticed its connection died"
        client.cast({}, "record", n=-1)  # finds the connection dead and makes a new one
    sent.confirm()
    got = [n_of(m) for m in take_all(transport_url, transport)]
    if transport.fast_paths:
        # Whether or not the first copies got through, all come again after the single casts.
        assert got[-300:] == list(range(300))
        assert got[-301] == -1
    else:  # each was confirmed before the block ended: nothing to send again
        assert got[:300] == list(range(300))
        assert set(got[300:]) == {-1}
