"""The [prometheus] endpoint a daemon serves its metrics on."""

import socket
import urllib.error

import pytest

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
        f"[prometheus] cannot listen on 127.0.0.1 port {endpoint.port}: Address already in use; give "
        "each Berth daemon on this machine a listen_port of its own (0: any free port), or set "
        "[prometheus] enabled = false")


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


def test_other_routes_are_served_beside_the_metrics(conf):
    def hello(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"page"]

    conf.set_override("listen_port", 0, group="prometheus")
    served = MetricsEndpoint(conf, default_port=1, routes={"/": hello})
    served.start()
    try:
        assert fetch(served.port, "/")[2] == "page"
        assert fetch(served.port)[0] == 200  # /metrics still
    finally:
        served.stop()
