"""A delivery handed to its consumer by the amqp fast paths is the message py-amqp's generic
dispatch gives: the same arguments, delivery info, properties and body, decoded alike; and what
py-amqp treats otherwise (a closing channel, a waiter for basic.deliver) still goes its way."""

import struct

import pytest
from amqp import method_framing, spec
from amqp.basic_message import Message
from amqp.channel import Channel
from amqp.serialization import dumps, loads

from scheduler.rpc.amqp_fast import deliveries

ARGUMENTS = [
    ("amq.ctag-Zx1", 1, False, "berth", "scheduler"),
    ("amq.ctag-Zx1", 2**64 - 1, True, "", "scheduler.bench-scheduler-1"),
    ("", 0, True, "berth_fanout", ""),
    ("tag-é€", 987654321, False, "ex-ü", "rk-日本" * 20),
]


def deliver_frames(arguments, body=b'{"oslo.message": "{}"}', **properties):
    method = struct.pack(">HH", *spec.Basic.Deliver) + dumps("sLbss", arguments)
    message = Message(body=body, **properties)
    header = struct.pack(">HHQ", 60, 0, len(body)) + message._serialize_properties()
    return [(1, 1, method), (2, 1, header), (3, 1, body)]


class _Connection:
    """What py-amqp's frame handler and dispatch read of a connection: one channel."""

    bytes_recv = 0

    def __init__(self, channel):
        self.channels = {1: channel}
        self.generic = []

    def on_inbound_method(self, channel_id, method_sig, payload, content):
        self.generic.append(method_sig)
        return self.channels[channel_id].dispatch_method(method_sig, payload, content)


def _channel(auto_decode=False):
    """A py-amqp channel with a consumer (its messages in ``received``), no socket."""
    channel = Channel.__new__(Channel)
    channel.channel_id, channel.is_closing, channel.auto_decode = 1, False, auto_decode
    channel._callbacks = {spec.Basic.Deliver: channel._on_basic_deliver}
    channel._pending = {}
    channel.received = []
    channel.callbacks = {tag: channel.received.append for tag in {a[0] for a in ARGUMENTS}}
    return channel


def _delivered(fast, frames, channel=None):
    channel = channel or _channel()
    connection = _Connection(channel)
    callback = deliveries.inbound_method(connection) if fast else connection.on_inbound_method
    handler = method_framing.frame_handler(connection, callback)
    for frame in frames:
        handler(frame)
    return channel.received, connection.generic


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_the_arguments_read_as_py_amqps_loads_reads_them(arguments):
    payload = struct.pack(">HH", *spec.Basic.Deliver) + dumps("sLbss", arguments)
    assert deliveries.deliver_arguments(payload) == tuple(loads("sLbss", payload, 4)[0]) == arguments


@pytest.mark.parametrize("arguments", ARGUMENTS)
@pytest.mark.parametrize("auto_decode", [False, True])
def test_a_delivery_reaches_its_consumer_as_py_amqp_dispatches_it(arguments, auto_decode):
    frames = deliver_frames(arguments, body="é ok".encode(), content_type="application/json",
                            content_encoding="utf-8", delivery_mode=2, priority=0,
                            application_headers={"x": 1})
    (ours,), generic = _delivered(True, frames, _channel(auto_decode))
    (theirs,), _ = _delivered(False, frames, _channel(auto_decode))
    assert generic == []  # not through the generic dispatch
    assert ours.delivery_info == theirs.delivery_info
    assert ours.delivery_info["delivery_tag"] == arguments[1]
    assert ours.properties == theirs.properties
    assert ours.body == theirs.body == ("é ok" if auto_decode else "é ok".encode())


def test_a_body_in_several_frames_and_a_bodyless_delivery():
    method, header, body = deliver_frames(ARGUMENTS[0], body=b"x" * 10)
    split = [method, header, (3, 1, b"x" * 4), (3, 1, b"x" * 6)]
    empty = deliver_frames(ARGUMENTS[1], body=b"")[:2]
    (ours, ours_empty), _ = _delivered(True, split + empty)
    (theirs, theirs_empty), _ = _delivered(False, split + empty)
    assert ours.body == theirs.body == b"x" * 10
    assert ours_empty.body == theirs_empty.body and not ours_empty.body
    assert ours_empty.delivery_info == theirs_empty.delivery_info


def test_a_closing_channel_and_a_waiter_for_deliveries_go_through_py_amqps_dispatch():
    closing = _channel()
    closing.is_closing = True  # py-amqp drops the delivery, with a warning
    received, generic = _delivered(True, deliver_frames(ARGUMENTS[0]), closing)
    assert generic == [spec.Basic.Deliver] and received == []

    waiting = _channel()
    seen = []
    waiting._pending = {spec.Basic.Deliver: lambda method_sig, *args: seen.append(args[1])}
    received, generic = _delivered(True, deliver_frames(ARGUMENTS[0]), waiting)
    assert generic == [spec.Basic.Deliver] and len(received) == 1 and seen == [1]


def test_other_methods_go_through_py_amqps_dispatch():
    channel = _channel()
    acked = []
    channel._callbacks[spec.Basic.Ack] = lambda tag, multiple: acked.append((tag, multiple))
    frame = (1, 1, struct.pack(">HH", *spec.Basic.Ack) + dumps("Lb", (7, True)))
    received, generic = _delivered(True, [frame], channel)
    assert generic == [spec.Basic.Ack] and acked == [(7, True)]
