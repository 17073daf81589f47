"""The [prometheus] endpoint a daemon serves its metrics on."""

import http.client
import socket
import urllib.error

import pytest

from scheduler.process import startup as config
from scheduler.telemetry.endpoint import CannotListen, MetricsEndpoint
from scheduler.telemetry.scheduler_metrics import PLACEMENTS
from tests.unit.telemetry.scrape import fetch, samples


@pytest.fixture
def endpoint(conf):
    conf.set_override("listen_port", 0, group="prometheus")
    served = MetricsEndpoint(conf, default_port=1)  # never the default: 0 takes a free port
    served.start()
    yield served
    served.stop()


def test_metrics_are_served_in_prometheus_text_format(endpoint):
    PLACEMENTS.labels("placed").inc(0)
    status, content_type, text = fetch(endpoint.port)
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    found = samples(text)
    assert ("berth_scheduler_placements_total", (("outcome", "placed"),)) in found
    assert not [name for name, _ in found if name.endswith("_created")]  # no creation-time series


def test_any_other_path_says_where_the_metrics_are(endpoint):
    with pytest.raises(urllib.error.HTTPError) as refused:
        fetch(endpoint.port, "/")
    assert refused.value.code == 404
    assert refused.value.read().decode() == "Berth serves its metrics at /metrics\n"


def test_a_taken_port_is_refused_with_what_to_change(conf, endpoint):
    conf.set_override("listen_port", endpoint.port, group="prometheus")
    second = MetricsEndpoint(conf, default_port=1)
    with pytest.raises(CannotListen) as refused:
        second.start()
    assert str(refused.value) == (
        f"[prometheus] cannot listen on 127.0.0.1 port {endpoint.port}: Address already in use "
        "(another process listens there: another Berth daemon of this machine, a berth-all-in-one "
        "still running?); give each Berth daemon on this machine a listen_port of its own (0: any "
        "free port), or set [prometheus] enabled = false")


def test_the_default_port_is_the_daemons_own(conf):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    served = MetricsEndpoint(conf, default_port=free)
    served.start()
    try:
        assert served.port == free and fetch(free)[0] == 200
    finally:
        served.stop()
    with pytest.raises(OSError):  # closed once stopped
        fetch(free)


def test_turned_off_it_listens_nowhere_and_says_so(conf, caplog):
    conf.set_override("enabled", False, group="prometheus")
    served = MetricsEndpoint(conf, default_port=1)
    with caplog.at_level("INFO"):
        served.start()
    served.stop()
    assert served.port is None
    assert "Prometheus metrics are not served: [prometheus] enabled = false" in caplog.messages


def page(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"page"]


@pytest.fixture
def with_page(conf):
    conf.set_override("listen_port", 0, group="prometheus")
    served = MetricsEndpoint(conf, default_port=1, routes={"/": page})
    served.start()
    yield served
    served.stop()


def test_other_routes_are_served_beside_the_metrics(with_page):
    assert fetch(with_page.port, "/")[2] == "page"
    assert fetch(with_page.port)[0] == 200  # /metrics still


def ask(port, method="GET", path="/metrics", **headers):
    """(status, headers, body) of one request, its headers as given (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_only_get_and_head_reach_the_metrics_and_the_routes_beside_them(with_page):
    for path in ("/", "/metrics"):
        status, headers, body = ask(with_page.port, "POST", path)
        assert (status, headers["Allow"]) == (405, "GET, HEAD")
    status, headers, body = ask(with_page.port, "HEAD", "/")
    assert (status, headers["Content-Length"], body) == (200, "4", b"")
    status, headers, body = ask(with_page.port, "HEAD")
    assert status == 200 and int(headers["Content-Length"]) > 0 and body == b""
    assert ask(with_page.port, "BREW")[0] == 501


def test_other_host_names_are_refused_until_allowed_hosts_names_them(conf):
    conf.set_override("listen_port", 0, group="prometheus")
    for allowed, served_names in (([], {"localhost", conf.host}),
                                  (["prom.example:9090"], {"localhost", conf.host, "prom.example"}),
                                  (["*"], {"localhost", conf.host, "prom.example", "evil.example"})):
        conf.set_override("allowed_hosts", allowed, group="prometheus")
        endpoint = MetricsEndpoint(conf, default_port=1)
        endpoint.start()
        try:
            answered = {host for host in ("localhost", conf.host, "prom.example", "evil.example")
                        if ask(endpoint.port, Host=f"{host}:{endpoint.port}")[0] == 200}
        finally:
            endpoint.stop()
        assert answered == served_names, allowed


def test_a_bad_allowed_hosts_entry_stops_start_up_with_one_line(tmp_path):
    path = tmp_path / "berth.conf"
    path.write_text("[prometheus]\nallowed_hosts = prom.example,http://prom.example/\n")
    with pytest.raises(SystemExit) as info:
        config.load(["--config-file", str(path)], "berth-scheduler")
    assert str(info.value) == (
        "berth-scheduler: invalid configuration: [prometheus] allowed_hosts: 'http://prom.example/' is not "
        f"a host name or address, with or without a port (in {path})")


def test_a_connection_that_sends_nothing_is_closed_after_read_timeout(conf):
    conf.set_override("listen_port", 0, group="prometheus")
    conf.set_override("read_timeout", 0.3, group="prometheus")
    served = MetricsEndpoint(conf, default_port=1)
    served.start()
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as idle:
            assert idle.recv(1) == b""
    finally:
        served.stop()
