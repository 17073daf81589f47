"""A delivery's three frames (method, header, body) put together by py-amqp's frame handler and
handed to the consumer through py-amqp's generic dispatch, and through the amqp fast paths'
(scheduler.rpc.amqp_fast.deliveries), alternated in one process: CPU per delivery. The message
is a cast's: JSON of 700 bytes with the properties Berth's publisher sets; no broker needed.

``python -m benchmarks.deliveries [--deliveries N] [--rounds R]``
"""

import argparse
import struct
import sys
import time

from amqp import method_framing, spec
from amqp.basic_message import Message
from amqp.channel import Channel
from amqp.serialization import dumps

from benchmarks import summary
from scheduler.rpc.amqp_fast import deliveries

TAG = "amq.ctag-Xh3kP0bq9sJ1mYfRz6wN2A"


def _frames():
    body = b'{"oslo.version": "2.0", "oslo.message": "' + b"x" * 650 + b'"}'
    message = Message(body=body, content_type="application/json", content_encoding="utf-8",
                      delivery_mode=2, priority=0)
    arguments = dumps("sLbss", (TAG, 12345, False, "berth", "scheduler"))
    method = struct.pack(">HH", *spec.Basic.Deliver) + arguments
    header = struct.pack(">HHQ", 60, 0, len(body)) + message._serialize_properties()
    return (1, 1, method), (2, 1, header), (3, 1, body)


class _Connection:
    """What the frame handler and the dispatch read of a connection: one channel, no socket."""

    bytes_recv = 0

    def __init__(self):
        channel = Channel.__new__(Channel)
        channel.channel_id, channel.is_closing, channel.auto_decode = 1, False, False
        channel._callbacks = {spec.Basic.Deliver: channel._on_basic_deliver}
        channel._pending = {}
        channel.callbacks = {TAG: lambda message: None}
        self.channels = {1: channel}

    def on_inbound_method(self, channel_id, method_sig, payload, content):
        return self.channels[channel_id].dispatch_method(method_sig, payload, content)


def _per_delivery(fast, count):
    connection = _Connection()
    callback = deliveries.inbound_method(connection) if fast else connection.on_inbound_method
    handler = method_framing.frame_handler(connection, callback)
    method, header, body = _frames()
    started = time.process_time()
    for _ in range(count):
        handler(method)
        handler(header)
        handler(body)
    return (time.process_time() - started) / count * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    summary.alternated({"py-amqp's dispatch": lambda: _per_delivery(False, args.deliveries),
                        "fast path": lambda: _per_delivery(True, args.deliveries)},
                       args.rounds, "us CPU per delivery", counted=f" of {args.deliveries:,}")

if __name__ == "__main__":
    sys.exit(main())
