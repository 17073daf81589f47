"""A QMP client: JSON lines over a guest's unix socket, one connection per conversation.

Plain sockets rather than qemu.qmp's asyncio: they run alike under native threads and under
eventlet (scheduler/concurrency.py), and the driver needs only a few synchronous commands.
"""

import json
import os
import socket
import time

#: The longest path a unix socket's address holds (sun_path, less its terminating NUL).
SOCKET_PATH_MAX = 107


class QMPError(Exception):
    """The socket is not there, qemu did not answer, or it answered with an error."""


class QMP:
    def __init__(self, path, timeout=5.0):
        self.path = path
        self.timeout = timeout
        self._sock = None
        self._buffer = b""

    def __enter__(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            connect(sock, self.path)
        except OSError as exc:
            sock.close()
            raise QMPError(f"cannot connect to {self.path}: {exc}") from None
        self._sock = sock
        try:
            greeting = self._read()
            while "event" in greeting:  # one qemu still had for the socket's previous client
                greeting = self._read()
            if "QMP" not in greeting:
                raise QMPError(f"{self.path} is not a QMP socket: it said {greeting!r}"[:300])
            self.execute("qmp_capabilities")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def execute(self, command, **arguments):
        """The return value of ``command``; QMPError with qemu's description on an error."""
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise QMPError(f"{command}: cannot send to {self.path}: {exc}") from None
        while True:
            answer = self._read()
            if "event" in answer:
                continue
            if "error" in answer:
                error = answer["error"]
                raise QMPError(f"{command}: {error.get('class')}: {error.get('desc')}")
            if "return" in answer:
                return answer["return"]

    def _read(self):
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            if time.monotonic() > deadline:
                raise QMPError(f"{self.path}: no answer within {self.timeout:g} s")
            try:
                chunk = self._sock.recv(65536)
            except OSError as exc:
                raise QMPError(f"{self.path}: {exc}") from None
            if not chunk:
                raise QMPError(f"{self.path}: qemu closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            raise QMPError(f"{self.path}: not JSON: {line[:200]!r}") from None


def connect(sock, path):
    """Connect ``sock`` to the unix socket ``path``, however long: a path too long for a socket's
    address is reached through the descriptor of its directory (/proc/self/fd/N/name)."""
    if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
        sock.connect(path)
        return
    directory = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
    finally:
        os.close(directory)


def status(path, timeout=5.0):
    """The guest's run state (query-status): running, paused, shutdown..."""
    with QMP(path, timeout) as qmp:
        return qmp.execute("query-status")["status"]
