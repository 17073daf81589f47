"""A delivery handed to its consumer without py-amqp's generic method dispatch.

py-amqp reads a basic.deliver's five arguments with its generic ``loads`` (a
loop over a format string) and then looks up the method, its listeners and any
one-shot waiter for every message (``AbstractChannel.dispatch_method``). Here,
once py-amqp's frame handler has put a delivery's method, header and body
together, its arguments are read straight from the method frame and the
channel's basic.deliver listener is called with them; everything else, and a
delivery py-amqp would treat otherwise (a closing channel, a waiter for
basic.deliver), still goes through ``Connection.on_inbound_method``.
"""

from struct import unpack_from

from amqp import method_framing, spec
from amqp.channel import Channel

# Not public in py-amqp; checked at start-up (scheduler.rpc.amqp_fast.usable).
PRIVATE_NAMES = (
    (Channel, "_callbacks"),  # method -> the channel's listener (basic.deliver's: _on_basic_deliver)
    (Channel, "_pending"),  # method -> a one-shot waiter
)

DELIVER = spec.Basic.Deliver


def deliver_arguments(payload):
    """(consumer_tag, delivery_tag, redelivered, exchange, routing_key) of a basic.deliver
    method frame's payload, as py-amqp's ``loads("sLbss", payload, 4)`` reads them."""
    size = payload[4]
    at = 5 + size
    consumer_tag = payload[5:at].decode("utf-8", "surrogatepass")
    delivery_tag, redelivered = unpack_from(">QB", payload, at)
    at += 9
    size = payload[at]
    exchange = payload[at + 1:at + 1 + size].decode("utf-8", "surrogatepass")
    at += 1 + size
    size = payload[at]
    routing_key = payload[at + 1:at + 1 + size].decode("utf-8", "surrogatepass")
    return consumer_tag, delivery_tag, (redelivered & 1) == 1, exchange, routing_key


def inbound_method(connection):
    """``connection.on_inbound_method``, with deliveries handed straight to their listener."""
    generic = connection.on_inbound_method

    def on_inbound_method(channel_id, method_sig, payload, content):
        if method_sig == DELIVER and content is not None and connection.channels is not None:
            channel = connection.channels[channel_id]
            listener = channel._callbacks.get(DELIVER)
            if listener is not None and not channel.is_closing and DELIVER not in channel._pending:
                if channel.auto_decode and hasattr(content, "content_encoding"):
                    try:  # as dispatch_method does
                        content.body = content.body.decode(content.content_encoding)
                    except Exception:  # noqa: BLE001,S110 - py-amqp keeps the bytes then
                        pass
                listener(*deliver_arguments(payload), content)
                return None
        return generic(channel_id, method_sig, payload, content)

    return on_inbound_method


def fast_deliveries(connection) -> None:
    """Make ``connection`` (a connected py-amqp connection) hand deliveries to their consumer
    directly: its frames go to a new py-amqp frame handler whose complete methods go to
    :func:`inbound_method` (py-amqp makes a new handler at each connect)."""
    connection.on_inbound_frame = method_framing.frame_handler(connection, inbound_method(connection))
