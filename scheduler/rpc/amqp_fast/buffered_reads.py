"""Fewer system calls per AMQP frame on a plain TCP connection to RabbitMQ.

py-amqp reads a frame with three ``recv`` calls sized to the frame's parts,
and sets and restores the socket timeout around each one: about fifteen
system calls for every message received. Here a connection reads up to
READ_SIZE bytes at a time and takes frames from what it has.
"""

import contextlib
import errno
from struct import unpack_from

import kombu
from amqp import transport as amqp_transport
from amqp.exceptions import UnexpectedFrame

# Not public in py-amqp or kombu; checked at start-up (scheduler.rpc.amqp_fast.usable).
PRIVATE_NAMES = (
    (amqp_transport.TCPTransport, "_read_buffer"),  # what was read but not taken
    (amqp_transport, "_UNAVAIL"),  # errnos that leave the connection up
    (kombu.Connection, "_establish_connection"),  # where a connection gets its transport
)

READ_SIZE = 65536
FRAME_END = 0xCE


class BufferedTCPTransport(amqp_transport.TCPTransport):
    """py-amqp's TCP transport with reads that fill a buffer.

    A connection's transport becomes one after the handshake
    (``buffer_reads``); ``_read_buffer`` holds what was read but not taken, as a
    bytearray from the first fill on, so that a frame is taken off its front without
    copying the rest.
    """

    __slots__ = ()

    def read_frame(self, unpack=None):
        while True:
            frame = self._take_frame()
            if frame is not None:
                return frame
            self._fill()

    def _take_frame(self):
        buf = self._read_buffer
        if len(buf) < 7:
            return None
        frame_type, channel, size = unpack_from(">BHI", buf)
        end = 7 + size
        if len(buf) <= end:
            return None
        if buf[end] != FRAME_END:
            raise UnexpectedFrame(f"Received frame_end {buf[end]:#04x} while expecting 0xce")
        if type(buf) is not bytearray:  # what py-amqp left, before the first fill
            buf = self._read_buffer = bytearray(buf)
        payload = bytes(memoryview(buf)[7:end])  # bytes, as py-amqp gives: one copy, the payload's
        # Taken off the front in place: slicing off the rest copied up to READ_SIZE bytes a frame.
        del buf[:end + 1]
        return frame_type, channel, payload

    def _fill(self):
        while True:
            try:
                data = self.sock.recv(READ_SIZE)
                break
            except TimeoutError:
                raise
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                if exc.errno == errno.EAGAIN:  # a non-blocking look found nothing
                    raise TimeoutError() from None
                if exc.errno not in amqp_transport._UNAVAIL:
                    self.connected = False
                raise
        if not data:
            self.connected = False
            raise OSError("Server unexpectedly closed connection")
        buf = self._read_buffer
        if type(buf) is bytearray:
            buf += data
        else:
            self._read_buffer = bytearray(buf + data)

    def having_timeout(self, timeout):
        # A frame already read needs no socket, so no timeout set and restored.
        if self._frame_waiting():
            return contextlib.nullcontext(self.sock)
        return super().having_timeout(timeout)

    def _frame_waiting(self):
        buf = self._read_buffer
        return len(buf) >= 7 and len(buf) > 7 + unpack_from(">I", buf, 3)[0]


def buffer_reads(connection) -> None:
    """Make ``connection`` (a connected py-amqp connection) read through a buffer,
    when it talks plain TCP (TLS keeps py-amqp's own reads)."""
    transport = getattr(connection, "transport", None)
    if type(transport) is amqp_transport.TCPTransport:
        transport.__class__ = BufferedTCPTransport


class Connection(kombu.Connection):
    """A kombu connection whose py-amqp connection reads through a buffer and hands deliveries
    to their consumer without the generic method dispatch (``deliveries``)."""

    def _establish_connection(self):
        from scheduler.rpc.amqp_fast import deliveries

        conn = super()._establish_connection()
        buffer_reads(conn)
        deliveries.fast_deliveries(conn)
        return conn
