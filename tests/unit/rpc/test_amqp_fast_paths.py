"""The amqp fast paths and py-amqp's public API do the same publishing job: the same
bytes reach the broker, and a message is confirmed, refused or unconfirmed alike.
And the fast paths turn themselves off, with one warning, when amqp does not fit."""

import contextlib
import logging
import socket
import struct
import threading

import kombu
import pytest
from amqp import spec
from amqp import transport as amqp_transport
from amqp.exceptions import MessageNacked
from kombu.transport import pyamqp

from scheduler import rpc
from scheduler.rpc import amqp_fast, envelope
from scheduler.rpc.amqp_fast import batch_confirms, buffered_reads, publish_frames
from scheduler.rpc.transport import publisher_channel
from tests.unit.rpc.conftest import WAIT


class Broker(threading.Thread):
    """The broker's end of a socket pair: opens channels, answers confirm.select, and
    acks each published message, except those numbered in ``nack`` (nacked) or
    ``silent`` (never confirmed). Those numbered in ``unroutable`` it returns first, as
    RabbitMQ returns a mandatory message no queue takes (basic.return, then basic.ack).
    ``received`` is every byte the client sent."""

    def __init__(self, sock, nack=(), silent=(), unroutable=()):
        super().__init__(daemon=True)
        self.sock, self.nack, self.silent, self.unroutable = sock, set(nack), set(silent), set(unroutable)
        self.received = bytearray()
        self.published = 0
        self.routes = []  # (exchange, routing key) of each publish

    def run(self):
        buf = b""
        body_left = None
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            self.received += data
            buf += data
            while len(buf) >= 7 and len(buf) >= 8 + struct.unpack_from(">I", buf, 3)[0]:
                frame_type, channel, size = struct.unpack_from(">BHI", buf)
                payload, buf = buf[7:7 + size], buf[8 + size:]
                if frame_type == 1:
                    method = struct.unpack_from(">HH", payload)
                    if method == spec.Channel.Open:
                        self.send(channel, spec.Channel.OpenOk, struct.pack(">I", 0))
                    elif method == spec.Confirm.Select:
                        self.send(channel, spec.Confirm.SelectOk)
                    elif method == spec.Basic.Publish:
                        body_left = None
                        self.routes.append(_shortstrs(payload[6:], 2))
                elif frame_type == 2:
                    body_left = struct.unpack_from(">Q", payload, 4)[0]
                elif frame_type == 3:
                    body_left -= len(payload)
                if body_left == 0:
                    body_left = None
                    self.published += 1
                    tag = self.published
                    if tag in self.unroutable:
                        self.send_return(channel, *self.routes[tag - 1])
                    if tag not in self.silent:
                        method = spec.Basic.Nack if tag in self.nack else spec.Basic.Ack
                        self.send(channel, method, struct.pack(">QB", tag, 0))

    def send(self, channel, method, arguments=b"", frame_type=1):
        payload = (struct.pack(">HH", *method) if method else b"") + arguments
        self.sock.sendall(struct.pack(">BHI", frame_type, channel, len(payload)) + payload + b"\xce")

    def send_return(self, channel, exchange, routing_key, body=b"{}"):
        arguments = struct.pack(">H", 312) + b"".join(
            struct.pack("B", len(text)) + text for text in (b"NO_ROUTE", exchange, routing_key))
        self.send(channel, spec.Basic.Return, arguments)
        self.send(channel, None, struct.pack(">HHQH", 60, 0, len(body), 0), frame_type=2)
        self.send(channel, None, body, frame_type=3)


def _shortstrs(data, count):
    """The first ``count`` AMQP short strings of ``data``, as bytes."""
    found = []
    for _ in range(count):
        found.append(data[1:1 + data[0]])
        data = data[1 + data[0]:]
    return tuple(found)


@pytest.fixture(params=[True, False], ids=["fast", "public"])
def fast_paths(request):
    return request.param


@pytest.fixture
def connect():
    """connect(fast_paths, **broker) -> (a py-amqp connection as kombu makes it, past its
    handshake, to a Broker; the Broker)."""
    opened = []

    def connect(fast_paths, **broker_options):
        ours, theirs = socket.socketpair()
        broker = Broker(theirs, **broker_options)
        broker.start()
        opened.append((ours, theirs, broker))
        transport = amqp_transport.TCPTransport("127.0.0.1:5672")
        transport.sock = ours
        transport._setup_transport()
        transport.connected = True
        connection = pyamqp.Connection(host="127.0.0.1:5672", confirm_publish=True, frame_max=4096)
        connection.transport = transport
        connection.on_inbound_frame = connection.frame_handler_cls(connection, connection.on_inbound_method)
        connection.frame_writer = connection.frame_writer_cls(connection, transport)
        if fast_paths:
            buffered_reads.buffer_reads(connection)
        return connection, broker

    yield connect
    for ours, theirs, broker in opened:
        ours.close()
        broker.join(WAIT)
        theirs.close()


def publish(connection, fast_paths, messages, confirm_timeout=WAIT, mandatory=False, batch=True,
            channel=None):
    """Publish ``messages`` ([(routing key, body)]) as the transport's Publisher does: in a
    batch, or (the way a mandatory message goes) each alone."""
    producer = kombu.Producer(channel or publisher_channel(connection, fast_paths), auto_declare=False)
    with producer.batch() if batch else contextlib.nullcontext():
        for routing_key, body in messages:
            producer.publish(envelope.dumps(body), exchange="", routing_key=routing_key, retry=False,
                             declare=None, confirm_timeout=confirm_timeout, delivery_mode=2,
                             content_type="application/json", content_encoding="utf-8",
                             headers={"reason": "test", "n": 3}, user_id="guest",
                             **({"mandatory": True} if mandatory else {}))
    return producer.channel


MESSAGES = [("compute.host-1", {"n": n, "text": "x" * (3000 * n)}) for n in range(4)]  # 0 to 3 body frames


def test_both_ways_send_the_same_bytes_and_wait_for_every_confirm(connect):
    sent = []
    for fast_paths in (True, False):
        connection, broker = connect(fast_paths)
        channel = publish(connection, fast_paths, MESSAGES)
        assert broker.published == len(MESSAGES)
        if fast_paths:
            assert type(channel) is batch_confirms.Channel
            assert channel.tags.settled == channel.tags.sent == len(MESSAGES)
        else:
            assert type(channel) is pyamqp.Channel
        connection.transport.sock.shutdown(socket.SHUT_WR)
        broker.join(WAIT)
        sent.append(bytes(broker.received))
    assert sent[0] == sent[1]
    assert sent[0].count(b"compute.host-1") == len(MESSAGES)


def test_a_refused_message_fails_the_publish_both_ways(connect, fast_paths):
    connection, _ = connect(fast_paths, nack={3})
    with pytest.raises(MessageNacked):
        publish(connection, fast_paths, MESSAGES)


def test_an_unconfirmed_message_fails_the_publish_both_ways(connect, fast_paths):
    connection, _ = connect(fast_paths, silent={2})
    with pytest.raises(TimeoutError):
        publish(connection, fast_paths, MESSAGES[:2], confirm_timeout=0.2)


def test_a_returned_message_is_listed_once_confirmed_and_the_next_confirms_are_its_own_both_ways(
        connect, fast_paths):
    """RabbitMQ's basic.return comes before the ack of a mandatory message no queue takes: it
    is listed on the channel by the time the publish returns, and the acks after it still
    count for their own messages."""
    connection, broker = connect(fast_paths, unroutable={2}, silent={4})
    channel = publish(connection, fast_paths, MESSAGES[:2], mandatory=True, batch=False)
    assert channel.returned == [("", MESSAGES[1][0])]  # (exchange, routing key): the default exchange
    del channel.returned[:]
    publish(connection, fast_paths, MESSAGES[2:3], mandatory=True, batch=False, channel=channel)
    assert channel.returned == []
    with pytest.raises(TimeoutError):  # the 4th is never confirmed: no earlier ack stands in for it
        publish(connection, fast_paths, MESSAGES[3:4], mandatory=True, batch=False, channel=channel,
                confirm_timeout=0.3)
    assert broker.published == 4


def test_a_single_publish_waits_for_its_own_confirm_not_a_deferred_batchs(connect):
    connection, broker = connect(True, silent={3})  # the batch's two are acked, the single one never
    channel = publisher_channel(connection, True)
    producer = kombu.Producer(channel, auto_declare=False)
    channel.deferred = []
    with producer.batch():
        for routing_key, body in MESSAGES[:2]:
            producer.publish(envelope.dumps(body), exchange="", routing_key=routing_key, retry=False,
                             declare=None, confirm_timeout=WAIT)
    [pending], channel.deferred = channel.deferred, None
    with pytest.raises(TimeoutError):
        producer.publish(envelope.dumps({"single": 1}), exchange="", routing_key="k", retry=False,
                         declare=None, confirm_timeout=0.3)
    assert broker.published == 3
    pending.wait()  # the batch's confirms, read meanwhile, were counted


def test_a_wait_in_slices_says_not_yet_until_the_confirms_come_or_their_time_is_over(connect):
    connection, broker = connect(True, silent={2})  # the first batch is acked, the second never
    channel = publisher_channel(connection, True)
    producer = kombu.Producer(channel, auto_declare=False)
    pendings = []
    for n, timeout in ((1, WAIT), (2, 0.6)):
        channel.deferred = []
        with producer.batch():
            producer.publish(envelope.dumps({"n": n}), exchange="", routing_key="k", retry=False,
                             declare=None, confirm_timeout=timeout)
        pendings += channel.deferred
    channel.deferred = None
    acked, silent = pendings
    assert acked.wait(within=WAIT) is True
    assert silent.wait(within=0.1) is False
    assert silent.wait(within=0.1) is False
    with pytest.raises(TimeoutError, match="not confirmed within 0.6 s"):
        silent.wait(within=WAIT)  # the time is counted from when they were sent
    assert broker.published == 2


# -- when the fast paths are taken ---------------------------------------------------


@pytest.fixture
def verdict(conf, monkeypatch):
    """A fresh start: the fast paths on, the installed amqp not yet checked."""
    conf.set_override("amqp_fast_paths", True, group="oslo_messaging_rabbit")
    monkeypatch.setattr(amqp_fast, "_verdict", None)


def test_the_installed_amqp_has_what_the_fast_paths_need():
    assert amqp_fast.problem() == ""


@pytest.mark.parametrize("fast_paths", [True, False])
def test_the_option_chooses_the_rabbit_connections_and_channel(conf, verdict, fast_paths):
    conf.set_override("amqp_fast_paths", fast_paths, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@h1/")
    assert transport.fast_paths is fast_paths
    connection = transport.connection("test")
    assert (type(connection) is buffered_reads.Connection) is fast_paths
    assert isinstance(connection, kombu.Connection)


def test_other_transports_never_take_them(conf, verdict):
    assert not rpc.get_transport(conf, "memory://").fast_paths


@pytest.mark.parametrize("version", ["5.5.0", "6.0.1", "5.1.1"])
def test_an_amqp_outside_the_pin_falls_back_with_one_warning(conf, verdict, monkeypatch, caplog, version):
    monkeypatch.setattr(amqp_fast, "problem", lambda real=amqp_fast.problem: real(version))
    with caplog.at_level(logging.WARNING, logger="scheduler.rpc.amqp_fast"):
        first = rpc.get_transport(conf, "rabbit://u:p@h1/")
        second = rpc.get_transport(conf, "rabbit://u:p@h2/")
    assert not first.fast_paths and not second.fast_paths
    assert type(first.connection("test")) is kombu.Connection
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"amqp {version} is installed" in warnings[0] and ">=5.2,<5.5" in warnings[0]


def test_a_missing_private_name_falls_back_with_a_warning(conf, verdict, monkeypatch, caplog):
    for cls in publish_frames.Message.__mro__:
        if "_serialize_properties" in vars(cls):
            monkeypatch.delattr(cls, "_serialize_properties")
    with caplog.at_level(logging.WARNING, logger="scheduler.rpc.amqp_fast"):
        transport = rpc.get_transport(conf, "rabbit://u:p@h1/")
    assert not transport.fast_paths
    assert "has no amqp.basic_message.Message._serialize_properties;" in caplog.text


def test_turned_off_they_are_not_checked_nor_warned_about(conf, verdict, monkeypatch, caplog):
    conf.set_override("amqp_fast_paths", False, group="oslo_messaging_rabbit")
    monkeypatch.setattr(amqp_fast, "problem", lambda: pytest.fail("checked"))
    with caplog.at_level(logging.WARNING):
        assert not rpc.get_transport(conf, "rabbit://u:p@h1/").fast_paths
    assert caplog.records == []
