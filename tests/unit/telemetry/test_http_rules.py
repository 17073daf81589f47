"""Which requests the HTTP endpoint answers: GET and HEAD, for the names it is reached by."""

import logging
import socket

import pytest

from scheduler.telemetry import http_rules


def page(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Method", environ["REQUEST_METHOD"])])
    return [b"the ", b"page\n"]


def call(app, method="GET", **environ):
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer.update(status=status, headers=dict(headers))
        return lambda data: None

    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": "/", **environ}, start_response))
    return answer["status"], answer["headers"], body


served = http_rules.only_get_and_head(page)


def test_get_is_served_as_it_is():
    assert call(served) == ("200 OK", {"Content-Type": "text/plain", "X-Method": "GET"}, b"the page\n")


def test_head_gets_the_headers_of_get_with_its_length_and_no_body():
    assert call(served, "HEAD") == (
        "200 OK", {"Content-Type": "text/plain", "X-Method": "GET", "Content-Length": "9"}, b"")


def test_head_keeps_the_length_the_application_gave():
    def sized(environ, start_response):
        start_response("200 OK", [("Content-Length", "9")])
        return iter([b"the page\n"])

    assert call(http_rules.only_get_and_head(sized), "HEAD") == ("200 OK", {"Content-Length": "9"}, b"")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"])
def test_other_known_methods_are_not_allowed_and_told_what_is(method):
    status, headers, body = call(served, method)
    assert (status, headers["Allow"]) == ("405 Method Not Allowed", "GET, HEAD")
    assert body == f"{method} is not allowed here: this endpoint serves GET and HEAD only\n".encode()
    assert headers["Content-Length"] == str(len(body))


@pytest.mark.parametrize("method", ["BREW", "get", "PROPFIND"])
def test_unknown_methods_are_not_implemented(method):
    status, headers, body = call(served, method)
    assert status == "501 Not Implemented" and "Allow" not in headers
    assert body == f"{method} is not a method this endpoint knows: it serves GET and HEAD only\n".encode()


@pytest.mark.parametrize(("host", "name"), [
    ("localhost", "localhost"),
    ("LocalHost:9618", "localhost"),
    ("prom.example.", "prom.example"),
    ("prom.example.:9618", "prom.example"),
    ("127.0.0.1:9618", "127.0.0.1"),
    ("[::1]:9618", "::1"),
    ("[::1]", "::1"),
    ("::1", "::1"),
    ("compute_1", "compute_1"),
])
def test_a_host_is_matched_by_its_name_without_port_case_or_final_dot(host, name):
    assert http_rules.host_name(host) == name


@pytest.mark.parametrize("host", ["", "a b", "evil.example/x", "user@evil.example", "host:port",
                                  "host:999999", "[evil.example]", "[::1]x", "a..b", "évil.example", "x:1:2"])
def test_what_is_no_host_name_is_refused(host):
    with pytest.raises(ValueError, match="is not a host name or address, with or without a port"):
        http_rules.host_name(host)


def test_this_machines_names_are_served_by_default():
    names = http_rules.names_of_this_machine("127.0.0.1", "compute-7")
    assert {"localhost", socket.gethostname().lower(), "compute-7", "127.0.0.1"} <= names
    assert "bad name" not in http_rules.names_of_this_machine("0.0.0.0", "bad name")


checked = http_rules.HostCheck(served, {"localhost", "berth-1"})


@pytest.mark.parametrize("host", ["localhost", "localhost:9618", "BERTH-1:9618", "127.0.0.1:9618",
                                  "10.1.2.3:9618", "[::1]:9618", "[fe80::1]"])
def test_a_name_of_the_endpoint_or_an_address_is_served(host):
    assert call(checked, HTTP_HOST=host)[0] == "200 OK"


def test_a_request_without_a_host_header_is_served():
    assert call(checked)[0] == "200 OK"


def test_any_other_name_is_refused_with_the_option_to_set_and_logged_once_a_minute(caplog):
    logged = http_rules.HostCheck(served, {"localhost"})
    with caplog.at_level(logging.WARNING, logger=http_rules.LOG.name):
        answers = [call(logged, "GET", HTTP_HOST=host, REMOTE_ADDR="127.0.0.1")
                   for host in ("evil.example", "evil.example:9618", "other.example", "not a name")]
    for status, _, body in answers:
        assert status == "421 Misdirected Request"
        assert b"add the name to [prometheus] allowed_hosts" in body
    assert caplog.messages == [
        "HTTP endpoint: refused a request for Host 'evil.example' from 127.0.0.1: not a name of this machine "
        "nor in [prometheus] allowed_hosts (a web page using DNS rebinding, or a name to add there)"]


def test_a_post_to_another_name_is_refused_for_its_name():
    assert call(checked, "POST", HTTP_HOST="evil.example")[0] == "421 Misdirected Request"


def test_any_name_is_served_with_a_star():
    assert call(http_rules.HostCheck(served, {"*"}), HTTP_HOST="evil.example")[0] == "200 OK"


@pytest.mark.parametrize(("entry", "name"), [("*", "*"), ("Prom.Example:9090", "prom.example")])
def test_an_allowed_hosts_entry_is_read_as_a_host_header(entry, name):
    assert http_rules.allowed_host(entry) == name
