"""Buffered frame reads and collected writes, on a socket pair instead of a broker."""

import socket
import struct

import pytest
from amqp import transport as amqp_transport
from amqp.exceptions import UnexpectedFrame

from scheduler.rpc import framing


def frame(frame_type, channel, payload, end=0xCE):
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes([end])


@pytest.fixture
def pair():
    """A BufferedTCPTransport reading from ``peer``, the broker's end."""
    ours, peer = socket.socketpair()
    transport = amqp_transport.TCPTransport("127.0.0.1:5672")
    transport.sock = ours
    transport._setup_transport()
    transport.connected = True
    connection = type("Conn", (), {"transport": transport})()
    framing.buffer_reads(connection)
    assert type(transport) is framing.BufferedTCPTransport
    yield transport, peer
    ours.close()
    peer.close()


def read(transport, timeout=1):
    with transport.having_timeout(timeout):
        return transport.read_frame()


def test_frames_that_came_together_are_read_one_by_one(pair):
    transport, peer = pair
    peer.sendall(frame(1, 1, b"method") + frame(2, 1, b"header") + frame(3, 1, b"body"))
    assert read(transport) == (1, 1, b"method")
    assert read(transport) == (2, 1, b"header")
    assert read(transport) == (3, 1, b"body")


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
    framing.buffer_reads(type("Conn", (), {"transport": transport})())
    assert type(transport) is amqp_transport.SSLTransport


class Connection:
    frame_max = 131072
    bytes_sent = 0

    def __init__(self):
        self.writes = []
        self.transport = self
        self.frame_writer = "the real writer"

    def write(self, data):
        self.writes.append(bytes(data))


def test_collected_frames_go_out_in_one_write():
    conn = Connection()
    with framing.collected_writes(conn):
        conn.frame_writer(1, 1, (60, 40), b"one", None)
        conn.frame_writer(1, 1, (60, 40), b"two", None)
        assert conn.writes == []
    assert conn.frame_writer == "the real writer"
    assert len(conn.writes) == 1
    assert conn.writes[0] == frame(1, 1, struct.pack(">HH", 60, 40) + b"one") + frame(
        1, 1, struct.pack(">HH", 60, 40) + b"two")


def test_a_block_that_raises_writes_nothing():
    conn = Connection()
    with pytest.raises(RuntimeError), framing.collected_writes(conn):
        conn.frame_writer(1, 1, (60, 40), b"one", None)
        raise RuntimeError("serializing failed")
    assert conn.writes == [] and conn.frame_writer == "the real writer"


def test_a_look_without_waiting_finds_nothing(pair):
    # What py-amqp does before a publish: drain with timeout 0.
    transport, peer = pair
    with pytest.raises(socket.timeout):
        read(transport, timeout=0)
    peer.sendall(frame(1, 1, b"blocked"))
    assert read(transport) == (1, 1, b"blocked")
