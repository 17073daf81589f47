"""The HTTP endpoint of a real scheduler (its metrics and status page) answers GET and HEAD
only, for the names it is meant to be reached by only, and idle connections cannot hold it:
they are closed after ``[prometheus] read_timeout``, and ``/metrics`` answers while thousands
of them are open, in a process allowed 1,024 descriptors (systemd's default)."""

import os
import resource
import selectors
import socket
import time
import urllib.request

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

READ_TIMEOUT = 10
IDLE = 3000
NOFILE = 1024
GUARD = 10  # seconds: against hangs only


@pytest.fixture
def fleet(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, prometheus__read_timeout=READ_TIMEOUT)
        try:
            proc = fleet.start_scheduler()
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
            fleet.wait(lambda: fleet.hosts() is not None, 60, "the scheduler to answer")
            yield fleet
        finally:
            fleet.close()


def exchange(port, request):
    """(status, {header: value}, body) of one raw request, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = (line.partition(":") for line in lines)
    headers = {name.strip().lower(): value.strip() for name, _, value in fields}
    return int(status_line.split()[1]), headers, body


def request(method, path="/metrics", host="127.0.0.1", body=b""):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_only_get_and_head_are_served_and_only_for_this_machines_names(fleet):
    port = fleet.metrics_port("scheduler")
    for path in ("/status.json", "/metrics"):
        for method in ("POST", "PUT", "DELETE"):
            status, headers, body = exchange(port, request(method, path, body=b"berth_scheduler_hosts 99\n"))
            why = f"{method} is not allowed here: this endpoint serves GET and HEAD only\n"
            assert (status, headers.get("allow"), body) == (405, "GET, HEAD", why.encode()), path
    status, headers, body = exchange(port, request("BREW", "/"))
    assert (status, body) == (501, b"BREW is not a method this endpoint knows: it serves GET and HEAD only\n")
    _, _, metrics = exchange(port, request("GET"))
    assert b"berth_scheduler_hosts 99" not in metrics and b"berth_scheduler_hosts{" in metrics

    _, page_headers, page = exchange(port, request("GET", "/"))
    status, headers, body = exchange(port, request("HEAD", "/"))
    assert (status, body) == (200, b"")
    assert headers["content-length"] == str(len(page)) and headers == page_headers | {"date": headers["date"]}
    status, headers, body = exchange(port, request("HEAD"))
    assert status == 200 and int(headers["content-length"]) > 1000 and body == b""

    for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", "scheduler", socket.gethostname()):
        assert exchange(port, request("GET", "/status.json", host=host))[0] == 200, host
    assert exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")[0] == 200  # no Host header at all
    status, _, body = exchange(port, request("GET", "/status.json", host="evil.example"))
    assert status == 421 and b"[prometheus] allowed_hosts" in body
    exchange(port, request("GET", host=f"evil.example:{port}"))
    refusals = [line for line in fleet.log("scheduler").splitlines() if "allowed_hosts" in line]
    assert len(refusals) == 1 and "WARNING" in refusals[0] and "'evil.example'" in refusals[0], refusals


def figures(pid):
    """(threads, resident MiB, open descriptors) of process ``pid`` now."""
    with open(f"/proc/{pid}/status") as status_file:
        status = dict(line.split(":", 1) for line in status_file.read().splitlines())
    return int(status["Threads"]), int(status["VmRSS"].split()[0]) / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def settled(pid, quiet=3, limit=90):
    """figures(pid) once its descriptors stopped growing for ``quiet`` s (``limit`` s at most):
    the server has accepted what it will."""
    most, since, started = figures(pid), time.monotonic(), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() - started < limit:
        time.sleep(0.5)
        now = figures(pid)
        if now[2] > most[2]:
            most, since = now, time.monotonic()
    return most


def open_idle(port, count, batch=5):
    """``count`` TCP connections to ``port`` that send nothing: ``batch`` at a time, 20 ms apart
    for the server to accept them (one completed while the listen queue is full may never be
    accepted), each batch given up to 1 s to connect until one is not: then the server has
    stopped accepting, and the rest are opened without waiting."""
    idle, waiting = [], 1.0
    with selectors.DefaultSelector() as selector:
        for start in range(0, count, batch):
            for _ in range(start, min(count, start + batch)):
                conn = socket.socket()
                conn.setblocking(False)
                conn.connect_ex(("127.0.0.1", port))
                selector.register(conn, selectors.EVENT_WRITE)
                idle.append(conn)
            deadline = time.monotonic() + waiting
            while selector.get_map() and time.monotonic() < deadline:
                for key, _ in selector.select(deadline - time.monotonic()):
                    selector.unregister(key.fileobj)
            if selector.get_map():
                waiting = 0
            for key in list(selector.get_map().values()):
                selector.unregister(key.fileobj)
            time.sleep(0.02)
    return idle


def still_open(conns):
    """The connections the server has not closed (nor reset)."""
    open_ = []
    for conn in conns:
        try:
            if conn.recv(1):
                open_.append(conn)  # an answer to nothing: counted open, and fails the test below
        except BlockingIOError:
            open_.append(conn)
        except OSError:
            pass
    return open_


def scrape(port):
    """The seconds /metrics took to answer, or the error it ended in (GUARD s at most)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=GUARD) as response:
            response.read()
    except OSError as exc:
        return repr(exc)
    return round(time.monotonic() - started, 3)


def test_thousands_of_idle_connections_hold_neither_threads_nor_the_metrics(fleet):
    port = fleet.metrics_port("scheduler")
    pid = fleet.processes["scheduler"].pid
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 2 * IDLE + 1000)), hard))
    assert isinstance(scrape(port), float)  # answers before
    threads_before, rss_before, fds_before = figures(pid)
    started = time.monotonic()
    idle = open_idle(port, IDLE)
    opened = time.monotonic()
    try:
        threads, rss, fds = settled(pid)
        answered = scrape(port)
        print(f"\n{IDLE} idle connections, the scheduler allowed {NOFILE} descriptors: threads "
              f"{threads_before} -> {threads}, RSS {rss_before:.0f} -> {rss:.0f} MiB, descriptors "
              f"{fds_before} -> {fds}; /metrics: {answered}")
        deadline = opened + READ_TIMEOUT + 30
        left = idle
        while (left := still_open(left)) and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"opened in {opened - started:.1f} s; {IDLE - len(left)} closed by the server "
              f"{time.monotonic() - opened:.1f} s after the last was opened (read timeout {READ_TIMEOUT} s)")
        assert isinstance(answered, float), f"/metrics did not answer: {answered}"
        assert threads - threads_before < 20
        assert rss - rss_before < 16  # MiB
        assert not left
        full = [line for line in fleet.log("scheduler").splitlines() if "the most it keeps" in line]
        assert 1 <= len(full) <= 2 and " WARNING " in full[0], full  # once a minute
        assert isinstance(scrape(port), float)
    finally:
        for conn in idle:
            conn.close()
