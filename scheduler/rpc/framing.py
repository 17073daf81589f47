"""Fewer system calls per AMQP frame on a plain TCP connection to RabbitMQ.

py-amqp reads a frame with three ``recv`` calls sized to the frame's parts,
and sets and restores the socket timeout around each one: about fifteen
system calls for every message received. It writes each published message
with its own ``sendall``. Here a connection reads up to READ_SIZE bytes at a
time and takes frames from what it has; a publisher batch's frames go out
in one write, its messages' frames built with their properties serialized
once per distinct set (``publish_frames``).
"""

import contextlib
import errno
from struct import pack, unpack_from

from amqp import spec
from amqp import transport as amqp_transport
from amqp.basic_message import Message
from amqp.exceptions import UnexpectedFrame

READ_SIZE = 65536
FRAME_END = 0xCE


class BufferedTCPTransport(amqp_transport.TCPTransport):
    """py-amqp's TCP transport with reads that fill a buffer.

    A connection's transport becomes one after the handshake
    (``buffer_reads``); ``_read_buffer`` holds what was read but not taken.
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
        payload = buf[7:end]
        self._read_buffer = buf[end + 1:]
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
        self._read_buffer += data

    def having_timeout(self, timeout):
        # A frame already read needs no socket, so no timeout set and restored.
        if self._frame_waiting():
            return contextlib.nullcontext(self.sock)
        return super().having_timeout(timeout)

    def _frame_waiting(self):
        buf = self._read_buffer
        return len(buf) >= 7 and len(buf) > 7 + unpack_from(">I", buf, 3)[0]


def buffer_reads(connection):
    """Make ``connection`` (a connected py-amqp connection) read through a buffer,
    when it talks plain TCP (TLS keeps py-amqp's own reads)."""
    transport = getattr(connection, "transport", None)
    if type(transport) is amqp_transport.TCPTransport:
        transport.__class__ = BufferedTCPTransport


_PUBLISH = pack(">HH", *spec.Basic.Publish) + b"\0\0"  # and the reserved short
_END = bytes([FRAME_END])
_SERIALIZED = {}  # frozen properties -> their bytes in a content header
_SERIALIZED_KEPT = 256


def _frozen(value):
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_frozen(item) for item in value))
    hash(value)
    return (type(value).__name__, value)


def serialized_properties(properties):
    """``properties`` as py-amqp writes them in a content header: computed once
    for each distinct set (a publisher sends the same few over and over)."""
    try:
        key = _frozen(properties)
    except TypeError:  # a value that cannot be a key: serialized every time
        return Message(**properties)._serialize_properties()
    found = _SERIALIZED.get(key)
    if found is None:
        if len(_SERIALIZED) >= _SERIALIZED_KEPT:
            _SERIALIZED.clear()
        found = _SERIALIZED[key] = Message(**properties)._serialize_properties()
    return found


def publish_frames(channel_id, frame_max, exchange, routing_key, body, properties,
                   mandatory=False, immediate=False):
    """The frames of a basic.publish of ``body`` (bytes) with ``properties``
    (bytes, from serialized_properties), as py-amqp writes them; a list of
    bytes to join. None when a name is too long for a short string."""
    exchange, routing_key = exchange.encode(), routing_key.encode()
    if len(exchange) > 255 or len(routing_key) > 255:
        return None
    method = b"".join((_PUBLISH, pack("B", len(exchange)), exchange, pack("B", len(routing_key)), routing_key,
                       pack("B", bool(mandatory) | bool(immediate) << 1)))
    header = pack(">HHQ", spec.Basic.Publish[0], 0, len(body)) + properties
    frames = [pack(">BHI", 1, channel_id, len(method)), method, _END,
              pack(">BHI", 2, channel_id, len(header)), header, _END]
    chunk = frame_max - 8
    for offset in range(0, len(body), chunk):
        part = body[offset:offset + chunk]
        frames += (pack(">BHI", 3, channel_id, len(part)), part, _END)
    return frames
