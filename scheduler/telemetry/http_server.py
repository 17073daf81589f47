"""The HTTP server under a daemon's metrics endpoint: one thread waits on every connection at
once, a few run the WSGI application, and nothing a client does holds more than that.

- A connection has ``timeout`` seconds to send its request head, and as long again to read the
  answer; then it is closed (with ``408`` if it had sent part of a request).
- At most ``max_connections`` are open at once (a quarter of the process' descriptors, 256 at
  most). A new one beyond that closes the oldest still to send its request: a scraper sends its
  request as soon as it is connected, so it is the idle ones that make way, and each newcomer is
  heard; when every connection is being answered, the newcomer gets 503 at once.
- One request per connection (HTTP/1.0 answers, as wsgiref's), request bodies unread, answers
  written without blocking.
"""

from __future__ import annotations

import collections
import concurrent.futures
import errno
import io
import logging
import re
import resource
import selectors
import socket
import threading
import time
from typing import Any, cast
from wsgiref.simple_server import WSGIRequestHandler

from scheduler.rpc.deadletter import LogOnce

LOG = logging.getLogger(__name__)

MAX_CONNECTIONS = 256
WORKERS = 4
MAX_HEAD = 16384  # bytes of request line and headers: a scrape's are a few hundred
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_PAUSE = 1.0  # seconds without accepting once the process is out of descriptors


def _answer(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.0 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def default_max_connections() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(8, min(MAX_CONNECTIONS, soft // 4))


class _Gateway:
    """What wsgiref's request handler asks of its server."""

    def __init__(self, app: Any, name: str, port: int) -> None:
        self.app = app
        self.base_environ = {"SERVER_NAME": name, "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PORT": str(port),
                             "REMOTE_HOST": "", "CONTENT_LENGTH": "", "SCRIPT_NAME": ""}

    def get_app(self) -> Any:
        return self.app


class _Handler(WSGIRequestHandler):
    """One request whose head is read already, answered into memory."""

    default_request_version = "HTTP/1.0"  # a status line even in the answer to a malformed request

    def __init__(self, head: bytes, client_address: Any, gateway: _Gateway) -> None:
        self._head = head
        super().__init__(cast(Any, None), client_address, cast(Any, gateway))  # no socket: all in memory

    def setup(self) -> None:
        self.rfile = io.BytesIO(self._head)
        self.wfile = io.BytesIO()

    def finish(self) -> None:
        pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        LOG.debug("HTTP endpoint: " + format, *args)


class _Connection:
    __slots__ = ("sock", "address", "received", "deadline", "answer")

    def __init__(self, sock: socket.socket, address: Any, deadline: float) -> None:
        self.sock = sock
        self.address = address
        self.received = b""
        self.deadline = deadline
        self.answer = memoryview(b"")


class Server:
    """Serves ``app`` on ``address``:``port`` (0: any free port, then in ``.port``) from
    ``serve_forever()`` until ``shutdown()``; binding raises OSError."""

    def __init__(self, address: str, port: int, app: Any, timeout: float,
                 max_connections: int | None = None) -> None:
        self.timeout = timeout
        self.max_connections = max_connections or default_max_connections()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((address, port))
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._gateway = _Gateway(app, address, self.port)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._workers = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="http-endpoint")
        self._reading: dict[socket.socket, _Connection] = {}  # oldest first
        self._writing: dict[socket.socket, _Connection] = {}  # oldest first
        self._working: set[_Connection] = set()  # their answers are being made
        self._answers: collections.deque[tuple[_Connection, bytes]] = collections.deque()
        self._paused_until: float | None = None
        self._stopping = False
        self._stopped = threading.Event()
        self._notes = LogOnce(LOG)

    def open_connections(self) -> int:
        return len(self._reading) + len(self._working) + len(self._writing)

    def serve_forever(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stopping:
                for key, _ in self._selector.select(self._wait()):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        self._take_answers()
                    elif key.fileobj in self._reading:
                        self._read(key.data)
                    else:
                        self._write(key.data)
                self._expire()
        finally:
            self._close_all()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving (once serve_forever has returned) and close every connection."""
        self._stopping = True
        self._wake()
        self._stopped.wait()
        self._workers.shutdown(wait=True, cancel_futures=True)
        for connection in self._working:
            connection.sock.close()
        self._working.clear()
        self._wake_r.close()
        self._wake_w.close()

    def _wait(self) -> float:
        now = time.monotonic()
        deadlines = [now + 1.0]
        for waiting in (self._reading, self._writing):
            if waiting:
                deadlines.append(next(iter(waiting.values())).deadline)
        if self._paused_until is not None:
            deadlines.append(self._paused_until)
        return max(0.0, min(deadlines) - now)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # a wake-up is pending already (or the server is closed)

    def _accept(self) -> None:
        for _ in range(64):  # then let the connections accepted be heard
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_DESCRIPTORS:
                    continue  # that client is gone already (ECONNABORTED...)
                if self._reading:
                    self._make_way(f"the process is out of descriptors ({exc.strerror})")
                    continue
                self._pause(exc)
                return
            if self.open_connections() >= self.max_connections:
                if not self._reading:
                    self._note_full(f"{self.max_connections} connections are being answered, the most it "
                                    "serves at once; refused a new one with 503")
                    self._refuse(sock)
                    continue
                self._make_way(f"{self.max_connections} connections are open, the most it keeps")
            sock.setblocking(False)
            connection = _Connection(sock, address, time.monotonic() + self.timeout)
            self._reading[sock] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _refuse(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            sock.send(_answer("503 Service Unavailable", f"this endpoint is answering {self.max_connections} "
                              "requests, the most it serves at once: try again\n"))
        except OSError:
            pass
        sock.close()

    def _make_way(self, why: str) -> None:
        oldest = next(iter(self._reading.values()))
        self._note_full(f"{why}; closed the oldest that had not sent its request (from {oldest.address[0]})")
        self._close(oldest)

    def _note_full(self, what: str) -> None:
        self._notes.log("full", logging.WARNING, "HTTP endpoint: %s", what)

    def _pause(self, exc: OSError) -> None:
        self._notes.log("paused", logging.WARNING,
                        "HTTP endpoint: cannot accept a connection: %s; not accepting for %.0f s (raise the "
                        "daemon's descriptor limit, e.g. LimitNOFILE in its systemd unit)",
                        exc.strerror, _PAUSE)
        self._selector.unregister(self._listener)
        self._paused_until = time.monotonic() + _PAUSE

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(MAX_HEAD)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(connection)
            return
        connection.received += data
        end = _HEAD_END.search(connection.received)
        if end is not None:
            del self._reading[connection.sock]
            self._selector.unregister(connection.sock)
            self._working.add(connection)
            self._workers.submit(self._respond, connection, connection.received[:end.end()])
        elif len(connection.received) > MAX_HEAD:
            self._reply(connection, _answer("431 Request Header Fields Too Large",
                                            f"the request's head is over {MAX_HEAD} bytes\n"))

    def _respond(self, connection: _Connection, head: bytes) -> None:
        try:
            handler = _Handler(head, connection.address, self._gateway)
            answer = cast(io.BytesIO, handler.wfile).getvalue()
        except Exception:
            LOG.exception("HTTP endpoint: cannot answer %r", head[:200])
            answer = _answer("500 Internal Server Error", "see the daemon's log\n")
        self._answers.append((connection, answer))
        self._wake()

    def _take_answers(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        while self._answers:
            connection, answer = self._answers.popleft()
            self._working.discard(connection)
            self._send_later(connection, answer)

    def _reply(self, connection: _Connection, answer: bytes) -> None:
        """Answer a connection still reading, without running the application."""
        del self._reading[connection.sock]
        self._selector.unregister(connection.sock)
        self._send_later(connection, answer)

    def _send_later(self, connection: _Connection, answer: bytes) -> None:
        connection.answer = memoryview(answer)
        connection.deadline = time.monotonic() + self.timeout
        self._writing[connection.sock] = connection
        self._selector.register(connection.sock, selectors.EVENT_WRITE, connection)

    def _write(self, connection: _Connection) -> None:
        try:
            sent = connection.sock.send(connection.answer)
        except BlockingIOError:
            return
        except OSError:
            self._close(connection)
            return
        connection.answer = connection.answer[sent:]
        if not connection.answer:
            self._close(connection)

    def _expire(self) -> None:
        now = time.monotonic()
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        for waiting in (self._reading, self._writing):
            while waiting and next(iter(waiting.values())).deadline <= now:
                connection = next(iter(waiting.values()))
                if connection.received and waiting is self._reading:
                    self._reply(connection, _answer(
                        "408 Request Timeout", f"no complete request within {self.timeout:g} s\n"))
                    self._write(connection)  # once: the answer gets no time of its own
                    if connection.sock in self._writing:
                        self._close(connection)
                else:
                    LOG.debug("HTTP endpoint: closed a connection from %s idle for %g s",
                              connection.address[0], self.timeout)
                    self._close(connection)

    def _close(self, connection: _Connection) -> None:
        sock = connection.sock
        if self._reading.pop(sock, None) is not None or self._writing.pop(sock, None) is not None:
            self._selector.unregister(sock)
        try:
            sock.recv(65536)  # what the client sent that was not read: closing on it would reset
        except OSError:
            pass
        sock.close()

    def _close_all(self) -> None:
        for waiting in (self._reading, self._writing):
            for connection in list(waiting.values()):
                self._close(connection)
        self._selector.close()
        self._listener.close()
