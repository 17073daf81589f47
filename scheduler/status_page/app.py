"""The status page's routes on a daemon's HTTP endpoint: the page and its script and style
(files beside this module: nothing from the internet), and ``/status.json``.

Every answer forbids caching and framing, and the page's policy lets it load only what this
endpoint serves. ``[prometheus] status_page`` turns the page off, e.g. before
``listen_address`` opens the endpoint beyond this machine.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg

from scheduler.utils import jsonutils

LOG = logging.getLogger(__name__)

opts = [
    cfg.BoolOpt("status_page", default=True,
                help="Serve the scheduler's status page at / (and its data at /status.json) on this "
                "endpoint: hosts, instances by state, refusals, scaling groups, dead letters. It shows "
                "no secret, but names hosts and instances: turn it off before opening the endpoint to "
                "other machines if that matters."),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("prometheus", opts)]


_HERE = pathlib.Path(__file__).parent
ASSETS = {
    "/": ("page.html", "text/html; charset=utf-8"),
    "/status.js": ("status.js", "text/javascript; charset=utf-8"),
    "/status.css": ("status.css", "text/css; charset=utf-8"),
}
_HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
]

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


def _static(file_name: str, content_type: str) -> WsgiApp:
    body = (_HERE / file_name).read_bytes()

    def serve(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", content_type), *_HEADERS])
        return [body]

    return serve


def routes(snapshot: Callable[[], dict[str, Any]]) -> dict[str, WsgiApp]:
    """{path: WSGI app} of the page, its assets and ``/status.json`` (``snapshot()``)."""

    def status(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        try:
            body = jsonutils.dumps(snapshot()).encode()
        except Exception:
            LOG.exception("Status page: cannot build /status.json")
            start_response("500 Internal Server Error", [("Content-Type", "text/plain; charset=utf-8"),
                                                         *_HEADERS])
            return [b"the status cannot be read now: see the scheduler's log\n"]
        start_response("200 OK", [("Content-Type", "application/json"), *_HEADERS])
        return [body]

    served = {path: _static(name, kind) for path, (name, kind) in ASSETS.items()}
    served["/status.json"] = status
    return served
