"""Frames taken from the read buffer of the amqp fast paths (scheduler.rpc.amqp_fast.buffered_reads),
and as they were taken before (the rest of the buffer sliced off after each frame), alternated in
one process: CPU per frame. The frames are a delivery's three (method, header, body: 41, 90 and
700 bytes) over and over, received 64 KiB at a time as under load; no broker needed.

``python -m benchmarks.frame_reads [--deliveries N] [--rounds R]``
"""

import argparse
import struct
import sys
import time

from amqp import transport as amqp_transport

from benchmarks import summary
from scheduler.rpc.amqp_fast import buffered_reads


class _Socket:
    """What a socket's recv gives: the stream, READ_SIZE bytes at a time."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def recv(self, size):
        chunk = self.data[self.at:self.at + size]
        self.at += len(chunk)
        return chunk


class _Sliced(buffered_reads.BufferedTCPTransport):
    """The buffered reads as they were: the rest of the buffer copied after every frame."""

    __slots__ = ()

    def _take_frame(self):
        buf = self._read_buffer
        if len(buf) < 7:
            return None
        frame_type, channel, size = struct.unpack_from(">BHI", buf)
        end = 7 + size
        if len(buf) <= end:
            return None
        payload = buf[7:end]
        self._read_buffer = buf[end + 1:]
        return frame_type, channel, payload

    def _fill(self):
        self._read_buffer += self.sock.recv(buffered_reads.READ_SIZE)


def _frame(frame_type, payload):
    return struct.pack(">BHI", frame_type, 1, len(payload)) + payload + b"\xce"


def _per_frame(cls, data, frames):
    transport = amqp_transport.TCPTransport("127.0.0.1:5672")
    transport.__class__ = cls
    transport.sock = _Socket(data)
    started = time.process_time()
    for _ in range(frames):
        transport.read_frame()
    return (time.process_time() - started) / frames * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    data = (_frame(1, b"m" * 41) + _frame(2, b"h" * 90) + _frame(3, b"b" * 700)) * args.deliveries
    frames = 3 * args.deliveries
    in_place = buffered_reads.BufferedTCPTransport
    summary.alternated({"sliced (before)": lambda: _per_frame(_Sliced, data, frames),
                        "taken in place": lambda: _per_frame(in_place, data, frames)},
                       args.rounds, "us CPU per frame", digits=3, counted=f" of {frames:,}")

if __name__ == "__main__":
    sys.exit(main())
