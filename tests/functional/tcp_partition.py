"""A TCP proxy that a test can cut, as a network partition between one process and its broker."""

import contextlib
import socket
import struct
import threading
import time

TICK = 0.1


class Partition:
    """Forwards connections on 127.0.0.1:``port`` to ``upstream``.

    ``cut()``: nothing crosses any more, either way, and new connections are taken but never
    answered, as when the network drops every packet (no side is told). ``heal()``: the
    connections open before are reset, as TCP connections do not outlive such a partition, and
    new ones go through again.
    """

    def __init__(self, upstream=("127.0.0.1", 5672)):
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(TICK)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open = set()  # every socket of a connection made, and of one taken while cut
        self._cut = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="partition", daemon=True)
        self._thread.start()

    def url(self, transport_url):
        """``transport_url`` (rabbit://user:pass@host:port/vhost) through this proxy."""
        scheme, rest = transport_url.split("://", 1)
        credentials, _, location = rest.rpartition("@")
        path = location.partition("/")[2]
        return f"{scheme}://{credentials}@127.0.0.1:{self.port}/{path}"

    def cut(self):
        self._cut.set()

    def heal(self):
        with self._lock:
            stale, self._open = self._open, set()
        for sock in stale:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
                sock.close()
        self._cut.clear()

    def close(self):
        self._closing.set()
        self.heal()
        self._thread.join()
        self._listener.close()

    def _accept(self):
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self._open.add(client)
            if self._cut.is_set():
                continue  # taken, never answered
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.add(server)
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source, target):
        source.settimeout(TICK)
        try:
            while not self._closing.is_set():
                if self._cut.is_set():
                    time.sleep(TICK)  # what is sent stays unread meanwhile
                    continue
                try:
                    data = source.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if self._cut.is_set():
                    continue  # dropped
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.close()
