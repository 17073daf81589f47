"""A basic.publish framed as py-amqp frames it, without building an ``amqp.Message``:
its properties serialized once for each distinct set (a publisher sends the
same few over and over), so that a batch's frames can go out in one write."""

from struct import pack

from amqp import spec
from amqp.basic_message import Message

# Not public in py-amqp; checked at start-up (scheduler.rpc.amqp_fast.usable).
PRIVATE_NAMES = (
    (Message, "_serialize_properties"),  # a content header's properties, as bytes
)

FRAME_END = 0xCE
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


def serialized_properties(properties: dict) -> bytes:
    """``properties`` as py-amqp writes them in a content header: computed once
    for each distinct set."""
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


def publish_frames(channel_id: int, frame_max: int, exchange: str, routing_key: str, body: bytes,
                   properties: bytes, mandatory: bool = False, immediate: bool = False) -> list[bytes] | None:
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
