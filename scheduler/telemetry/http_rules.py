"""Which requests a daemon's HTTP endpoint answers: GET and HEAD, addressed to a name it is
meant to be reached by.

The Host check keeps a web page from reading the endpoint through DNS rebinding (a name the
attacker controls, pointed at 127.0.0.1 once the page is loaded): the names served are this
machine's, ``localhost``, those ``[prometheus] allowed_hosts`` adds, and any IP address (an
address cannot be rebound). A request without a Host header (HTTP/1.0) is served.
"""

from __future__ import annotations

import http
import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterable
from typing import Any

from scheduler.rpc.deadletter import LogOnce

LOG = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]

SERVED = ("GET", "HEAD")
KNOWN = frozenset(method.value for method in http.HTTPMethod)
ANY = "*"
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_PORT = re.compile(r":[0-9]{1,5}")
_PLAIN = ("Content-Type", "text/plain; charset=utf-8")


def host_name(host: str) -> str:
    """The name in a Host header or an allowed_hosts entry, without its port, lower case and
    without a final dot; ValueError when it is not a host name or address, with or without a port."""
    text = host.strip().lower()
    if text.startswith("["):
        name, _, port = text[1:].partition("]")
        valid = is_address(name)
    else:
        name, port = text.split(":") if text.count(":") == 1 else (text, "")
        name = name.rstrip(".")
        valid = is_address(name) or _NAME.fullmatch(name) is not None
        port = port and ":" + port
    if not valid or (port and not _PORT.fullmatch(port)):
        raise ValueError(f"{host!r} is not a host name or address, with or without a port")
    return name


def allowed_host(entry: str) -> str:
    """An ``allowed_hosts`` entry as it is matched (oslo.config item type)."""
    return ANY if entry.strip() == ANY else host_name(entry)


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def names_of_this_machine(listen_address: str, host: str) -> set[str]:
    """The names an endpoint on ``listen_address`` is reached by without allowed_hosts."""
    names = set()
    for name in ("localhost", socket.gethostname(), socket.getfqdn(), host, listen_address):
        try:
            names.add(host_name(name))
        except ValueError:
            pass  # no Host header can name it
    return names


def _refuse(start_response: Any, status: http.HTTPStatus, text: str,
            headers: Iterable[tuple[str, str]] = ()) -> list[bytes]:
    body = text.encode()
    start_response(f"{status.value} {status.phrase}",
                   [_PLAIN, ("Content-Length", str(len(body))), *headers])
    return [body]


def only_get_and_head(app: WsgiApp) -> WsgiApp:
    """``app`` for GET; for HEAD, the headers of its GET and no body; 405 for the other known
    methods, 501 for the rest, each saying why."""

    def serve(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if method == "GET":
            return app(environ, start_response)
        if method == "HEAD":
            return _headers_of_get(app, environ, start_response)
        if method in KNOWN:
            return _refuse(start_response, http.HTTPStatus.METHOD_NOT_ALLOWED,
                           f"{method} is not allowed here: this endpoint serves GET and HEAD only\n",
                           [("Allow", ", ".join(SERVED))])
        return _refuse(start_response, http.HTTPStatus.NOT_IMPLEMENTED,
                       f"{method} is not a method this endpoint knows: it serves GET and HEAD only\n")

    return serve


def _headers_of_get(app: WsgiApp, environ: dict[str, Any], start_response: Any) -> list[bytes]:
    answer: dict[str, Any] = {}
    written: list[bytes] = []

    def keep(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        answer.update(status=status, headers=headers)
        return written.append

    result = app(dict(environ, REQUEST_METHOD="GET"), keep)
    try:
        length = sum(len(chunk) for chunk in written) + sum(len(chunk) for chunk in result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    headers = list(answer["headers"])
    if not any(name.lower() == "content-length" for name, _ in headers):
        headers.append(("Content-Length", str(length)))
    start_response(answer["status"], headers)
    return []


class HostCheck:
    """``app`` for requests addressed to ``names`` (or with no Host header); 421 for the others,
    logged once a minute."""

    def __init__(self, app: WsgiApp, names: Iterable[str]) -> None:
        self._app = app
        self._names = frozenset(names)
        self._refusals = LogOnce(LOG)

    def allows(self, host: str) -> bool:
        if ANY in self._names:
            return True
        try:
            name = host_name(host)
        except ValueError:
            return False
        return name in self._names or is_address(name)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST")
        if host is None or self.allows(host):
            return self._app(environ, start_response)
        self._refusals.log(
            "host", logging.WARNING,
            "HTTP endpoint: refused a request for Host %r from %s: not a name of this machine nor in "
            "[prometheus] allowed_hosts (a web page using DNS rebinding, or a name to add there)",
            host[:200], environ.get("REMOTE_ADDR"))
        return _refuse(start_response, http.HTTPStatus.MISDIRECTED_REQUEST,
                       "This endpoint does not answer to the host name in this request. If it is reached "
                       "by that name (a reverse proxy, a DNS name), add the name to [prometheus] "
                       "allowed_hosts in the daemon's configuration ('*': any name).\n")
