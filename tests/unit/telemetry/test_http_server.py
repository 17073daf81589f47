"""The HTTP server under the endpoint: a client that sends nothing, or its request slowly, is
closed after the timeout; connections beyond the bound close the oldest idle one; none of it
costs a thread."""

import logging
import socket
import threading

import pytest

from scheduler.telemetry import http_server

GUARD = 10  # seconds: against hangs only


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}\n".encode()]


@pytest.fixture
def serve():
    servers = []

    def start(app=hello, timeout=GUARD, max_connections=None):
        server = http_server.Server("127.0.0.1", 0, app, timeout, max_connections)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server

    yield start
    for server, thread in servers:
        server.shutdown()
        thread.join(GUARD)


def connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=GUARD)


def answer(conn, request=b""):
    """All the server sent before closing (b"" when it closed without a word)."""
    if request:
        conn.sendall(request)
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def get(server, path="/metrics"):
    with connect(server) as conn:
        return answer(conn, f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())


def test_a_request_is_answered_and_the_connection_closed(serve):
    head, _, body = get(serve(), "/a%20b").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK\r\n") and body == b"GET /a b\n"


def test_a_request_with_bare_newlines_is_answered(serve):
    with connect(serve()) as conn:
        assert answer(conn, b"GET /x HTTP/1.0\n\n").endswith(b"\r\n\r\nGET /x\n")


def test_a_connection_that_sends_nothing_is_closed_after_the_timeout_without_a_word(serve):
    server = serve(timeout=0.3)
    with connect(server) as conn:
        assert answer(conn) == b""
    assert b"200 OK" in get(server)


def test_a_request_sent_slowly_is_closed_after_the_timeout_with_408(serve):
    server = serve(timeout=0.5)
    request = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"x" * 200 + b"\r\n\r\n"
    reply, sent = b"", 0
    with connect(server) as conn:
        conn.settimeout(0.1)
        while not reply and sent < len(request):  # 0.1 s a byte: 23 s for the whole request
            conn.sendall(request[sent:sent + 1])
            sent += 1
            try:
                reply = conn.recv(65536)
            except TimeoutError:
                pass
        conn.settimeout(GUARD)
        reply += answer(conn)
    assert sent < len(request)
    assert reply.startswith(b"HTTP/1.0 408 Request Timeout\r\n")
    assert reply.endswith(b"no complete request within 0.5 s\n")


def test_a_head_too_long_is_refused_with_431(serve):
    with connect(serve()) as conn:
        reply = answer(conn, b"GET / HTTP/1.1\r\nX-Long: " + b"x" * (http_server.MAX_HEAD + 1))
    assert reply.startswith(b"HTTP/1.0 431 Request Header Fields Too Large\r\n")


def test_a_malformed_request_line_gets_400(serve):
    with connect(serve()) as conn:
        assert answer(conn, b"GET / HTTP/one\r\n\r\n").startswith(b"HTTP/1.0 400 Bad request version")


def test_beyond_the_bound_the_oldest_idle_connection_makes_way_for_a_new_one(serve, caplog):
    server = serve(max_connections=3)
    idle = [connect(server) for _ in range(3)]
    try:
        with caplog.at_level(logging.WARNING, logger=http_server.LOG.name):
            assert b"200 OK" in get(server)
            idle.append(connect(server))
            assert b"200 OK" in get(server)
        assert answer(idle[0]) == b"" and answer(idle[1]) == b""  # the oldest, closed
        for conn in idle[2:]:
            conn.settimeout(0.5)
            with pytest.raises(TimeoutError):
                conn.recv(1)  # still open
        assert caplog.messages == [
            "HTTP endpoint: 3 connections are open, the most it keeps; closed the oldest that had not "
            "sent its request (from 127.0.0.1)"]
    finally:
        for conn in idle:
            conn.close()


def test_beyond_the_bound_with_every_connection_answered_a_new_one_gets_503_at_once(serve):
    release, entered = threading.Event(), threading.Semaphore(0)

    def slow(environ, start_response):
        entered.release()
        release.wait(GUARD)
        return hello(environ, start_response)

    server = serve(app=slow, max_connections=2)
    busy = [connect(server) for _ in range(2)]
    for conn in busy:
        conn.sendall(b"GET /slow HTTP/1.0\r\n\r\n")
    try:
        assert entered.acquire(timeout=GUARD) and entered.acquire(timeout=GUARD)
        with connect(server) as refused:
            reply = answer(refused)
        assert reply.startswith(b"HTTP/1.0 503 Service Unavailable\r\n")
        assert reply.endswith(b"answering 2 requests, the most it serves at once: try again\n")
        release.set()
        assert [answer(conn).endswith(b"GET /slow\n") for conn in busy] == [True, True]
    finally:
        release.set()
        for conn in busy:
            conn.close()


def test_hundreds_of_idle_connections_cost_no_thread_and_a_request_is_still_answered(serve):
    server = serve()
    assert b"200 OK" in get(server)
    threads = threading.active_count()
    idle = [connect(server) for _ in range(200)]
    try:
        assert b"200 OK" in get(server)
        assert threading.active_count() <= threads + http_server.WORKERS
    finally:
        for conn in idle:
            conn.close()


def test_the_bound_is_a_quarter_of_the_descriptors_at_most():
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert http_server.default_max_connections() == max(8, min(http_server.MAX_CONNECTIONS, soft // 4))


def test_shutdown_closes_the_connections_open(serve):
    server = http_server.Server("127.0.0.1", 0, hello, GUARD)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with connect(server) as conn:
        get(server)  # the connection above is accepted by now
        server.shutdown()
        thread.join(GUARD)
        assert answer(conn) == b""
    with pytest.raises(OSError):
        get(server)
