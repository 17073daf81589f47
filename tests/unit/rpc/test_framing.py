"""Frame reads on a socket pair instead of a broker, buffered (the fast paths) and py-amqp's own,
and publish frames as py-amqp writes them."""

import socket
import struct

import pytest
from amqp import method_framing, spec
from amqp import transport as amqp_transport
from amqp.basic_message import Message
from amqp.exceptions import UnexpectedFrame
from amqp.serialization import dumps

from scheduler.rpc.amqp_fast import buffered_reads, publish_frames


def frame(frame_type, channel, payload, end=0xCE):
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes([end])


@pytest.fixture(params=[True, False], ids=["fast", "py-amqp"])
def pair(request):
    """A transport reading from ``peer``, the broker's end: a BufferedTCPTransport on
    the fast paths, else py-amqp's own TCPTransport."""
    ours, peer = socket.socketpair()
    transport = amqp_transport.TCPTransport("127.0.0.1:5672")
    transport.sock = ours
    transport._setup_transport()
    transport.connected = True
    if request.param:
        connection = type("Conn", (), {"transport": transport})()
        buffered_reads.buffer_reads(connection)
        assert type(transport) is buffered_reads.BufferedTCPTransport
    yield transport, peer
    ours.close()
    peer.close()


def read(transport, timeout=1):
    with transport.having_timeout(timeout):
        frame_type, channel, payload = transport.read_frame()
        return frame_type, channel, bytes(payload)


def test_frames_that_came_together_are_read_one_by_one(pair):
    transport, peer = pair
    peer.sendall(frame(1, 1, b"method") + frame(2, 1, b"header") + frame(3, 1, b"body"))
    assert read(transport) == (1, 1, b"method")
    assert read(transport) == (2, 1, b"header")
    assert read(transport) == (3, 1, b"body")


def test_many_frames_in_one_read_come_out_whole_in_order_as_bytes(pair):
    transport, peer = pair
    sent = [(1 + i % 3, 1 + i % 2, bytes([i % 251]) * (i % 700)) for i in range(400)]  # ~140 KB
    peer.sendall(b"".join(frame(*one) for one in sent))
    got = []
    for _ in sent:
        with transport.having_timeout(1):
            got.append(transport.read_frame())
    assert got == sent
    assert {type(payload) for _, _, payload in got} == {bytes}


def test_a_frame_split_across_reads_waits_for_its_end(pair):
    transport, peer = pair
    whole = frame(3, 7, b"x" * 1000)
    peer.sendall(whole[:5])
    with pytest.raises(socket.timeout):
        read(transport, timeout=0.05)
    peer.sendall(whole[5:600])
    with pytest.raises(socket.timeout):
        read(transport, timeout=0.05)
    peer.sendall(whole[600:])
    assert read(transport) == (3, 7, b"x" * 1000)


def test_a_frame_larger_than_one_read(pair):
    transport, peer = pair
    payload = bytes(range(256)) * 1000  # 256,000 bytes: several reads
    peer.setblocking(False)
    data = frame(3, 1, payload)
    sent = 0
    got = None
    while got is None:
        try:
            sent += peer.send(data[sent:])
        except BlockingIOError:
            pass
        try:
            got = read(transport, timeout=0.01)
        except TimeoutError:
            pass
    assert got == (3, 1, payload)


def test_a_bad_frame_end_is_an_unexpected_frame(pair):
    transport, peer = pair
    peer.sendall(frame(1, 1, b"abc", end=0x00))
    with pytest.raises(UnexpectedFrame, match="0x00"):
        read(transport)


def test_a_closed_connection_is_an_error(pair):
    transport, peer = pair
    peer.sendall(frame(1, 1, b"last"))
    peer.close()
    assert read(transport) == (1, 1, b"last")
    with pytest.raises(OSError, match="closed connection"):
        read(transport)
    assert not transport.connected


@pytest.mark.parametrize("pair", [True], ids=["fast"], indirect=True)  # py-amqp sets it for every frame
def test_a_buffered_frame_is_read_without_touching_the_socket_timeout(pair):
    transport, peer = pair
    peer.sendall(frame(1, 1, b"a") + frame(1, 1, b"b"))
    read(transport)
    transport.sock.settimeout(None)
    with transport.having_timeout(5) as sock:
        assert transport.read_frame() == (1, 1, b"b")
        assert sock.gettimeout() is None


def test_tls_connections_keep_py_amqp_reads():
    transport = amqp_transport.SSLTransport("127.0.0.1:5671")
    buffered_reads.buffer_reads(type("Conn", (), {"transport": transport})())
    assert type(transport) is amqp_transport.SSLTransport


class Collector:
    frame_max = 4096
    bytes_sent = 0

    def __init__(self):
        self.writes = []

    def write(self, data):
        self.writes.append(bytes(data))


def amqp_frames(channel_id, exchange, routing_key, message, mandatory=False, immediate=False):
    """What py-amqp writes for the publish."""
    collector = Collector()
    writer = method_framing.frame_writer(collector, collector)
    arguments = dumps("Bssbb", (0, exchange, routing_key, mandatory, immediate))
    writer(1, channel_id, spec.Basic.Publish, arguments, message)
    return b"".join(collector.writes)


@pytest.mark.parametrize(
    ("exchange", "routing_key", "body", "properties", "flags"),
    [
        ("berth", "compute.host-1", b'{"a": 1}',
         {"content_type": "application/json", "content_encoding": "utf-8", "delivery_mode": 2,
          "priority": 0, "user_id": "guest"}, (False, False)),
        ("", "reply_\u00e9t\u00e9", b"x" * 10_000,
         {"content_type": "application/json", "headers": {"reason": "bad", "n": 3, "list": [1, "a"]},
          "expiration": "60000"}, (True, False)),
        ("x", "k", b"", {}, (False, True)),
        ("x", "k", b"y" * 4088, {"delivery_mode": 1}, (True, True)),
    ],
    ids=["small", "split-with-headers", "empty", "one-frame-exactly"],
)
def test_a_publish_is_framed_byte_for_byte_as_py_amqp_frames_it(exchange, routing_key, body, properties,
                                                               flags):
    message = Message(body, **properties)
    for _ in range(2):  # the second time from the properties serialized the first
        ours = publish_frames.publish_frames(7, Collector.frame_max, exchange, routing_key, body,
                                             publish_frames.serialized_properties(dict(properties)), *flags)
        assert b"".join(ours) == amqp_frames(7, exchange, routing_key, message, *flags)


def test_names_too_long_for_a_short_string_are_not_framed():
    assert publish_frames.publish_frames(1, 4096, "x", "k" * 256, b"", b"") is None
    assert publish_frames.publish_frames(1, 4096, "\u00e9" * 128, "k", b"", b"") is None


def test_a_look_without_waiting_finds_nothing(pair):
    # What py-amqp does before a publish: drain with timeout 0.
    transport, peer = pair
    with pytest.raises(socket.timeout):
        read(transport, timeout=0)
    peer.sendall(frame(1, 1, b"blocked"))
    assert read(transport) == (1, 1, b"blocked")
