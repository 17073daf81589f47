"""The HTTP endpoint a Berth daemon serves its Prometheus metrics on: ``[prometheus]``.

On by default, on the loopback address: a scrape target costs nothing until something
scrapes it, the metrics hold no secret, and nothing beyond this machine reaches them
until the operator sets ``listen_address``. Each daemon has a port of its own by default
(berth-scheduler and berth-all-in-one 9618, berth-compute-agent 9619); a second daemon
of the same kind on one machine needs ``listen_port`` set, and is refused at start, with
the reason, when its port is taken. ``listen_port = 0`` takes any free port and logs it.

It answers GET and HEAD, for the names it is meant to be reached by (:mod:`http_rules`), and
no client holds it long (:mod:`http_server`).
"""

from __future__ import annotations

import errno
import logging
import threading
from typing import Any

import prometheus_client
from oslo_config import cfg, types

from scheduler.telemetry import http_rules, http_server

LOG = logging.getLogger(__name__)

SCHEDULER_PORT = 9618
AGENT_PORT = 9619
PATH = "/metrics"


class _AllowedHost(types.String):
    """An allowed_hosts entry: a host name or address, a port may follow; or '*'."""

    def __init__(self) -> None:
        super().__init__(type_name="host name")

    def __call__(self, value: Any) -> str:
        return http_rules.allowed_host(super().__call__(value))


group = cfg.OptGroup("prometheus", title="Prometheus metrics",
                     help="Where this daemon serves its metrics, in Prometheus' text format, at /metrics.")
opts = [
    cfg.BoolOpt("enabled", default=True,
                help="Serve the metrics. On by default: the endpoint listens on the loopback address "
                "only, and serves nothing secret."),
    cfg.HostAddressOpt("listen_address", default="127.0.0.1",
                       help="Address to listen on: the loopback address by default; 0.0.0.0 or :: for "
                       "every interface, so that a Prometheus on another machine can scrape it."),
    cfg.PortOpt("listen_port",
                help="TCP port. Unset: the daemon's own, 9618 for berth-scheduler and berth-all-in-one, "
                "9619 for berth-compute-agent; two daemons of a kind on one machine need a port each. "
                "0: any free port (the log says which)."),
    cfg.ListOpt("allowed_hosts", default=[], item_type=_AllowedHost(),
                help="Host names (a port may follow) the endpoint answers to besides its own: those of "
                "this machine, localhost, [DEFAULT] host, listen_address and any IP address. Add the names "
                "a reverse proxy or Prometheus reaches it by; '*' answers to any name. Requests for other "
                "names get 421 Misdirected Request, so that a web page cannot read the endpoint by DNS "
                "rebinding."),
    cfg.FloatOpt("read_timeout", default=5.0, min=0.1,
                 help="Seconds a connection has to send its request, and again to read the answer, "
                 "before it is closed: a client that connects and sends nothing holds nothing for long."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group)
    conf.register_opts(opts, group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(group, opts)]


class CannotListen(Exception):
    """The endpoint's address cannot be listened on; the message says what to change."""


def _not_found(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
    return [f"Berth serves its metrics at {PATH}\n".encode()]


class MetricsEndpoint:
    """A service (start, stop) serving ``registry`` at http://listen_address:port/metrics."""

    def __init__(self, conf: cfg.ConfigOpts, default_port: int,
                 registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
                 routes: dict[str, Any] | None = None) -> None:
        """``routes``: {path: WSGI app} served beside /metrics (the scheduler's status page)."""
        self._conf = conf.prometheus
        self._host = conf.host
        self._default_port = default_port
        self._metrics = prometheus_client.make_wsgi_app(registry)
        self._routes = dict(routes or {})
        self._server: http_server.Server | None = None
        self._thread: threading.Thread | None = None
        #: The port listened on once started (the one chosen when listen_port is 0), else None.
        self.port: int | None = None

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO")
        if path in (PATH, PATH + "/"):
            return self._metrics(environ, start_response)
        if path in self._routes:
            return self._routes[path](environ, start_response)
        return _not_found(environ, start_response)

    def start(self) -> None:
        if not self._conf.enabled:
            LOG.info("Prometheus metrics are not served: [prometheus] enabled = false")
            return
        address = self._conf.listen_address
        port = self._default_port if self._conf.listen_port is None else self._conf.listen_port
        names = http_rules.names_of_this_machine(address, self._host) | set(self._conf.allowed_hosts)
        app = http_rules.HostCheck(http_rules.only_get_and_head(self._app), names)
        try:
            self._server = http_server.Server(address, port, app, self._conf.read_timeout)
        except OSError as exc:
            taken = (" (another process listens there: another Berth daemon of this machine, a "
                     "berth-all-in-one still running?)" if exc.errno == errno.EADDRINUSE else "")
            raise CannotListen(
                f"[prometheus] cannot listen on {address} port {port}: {exc.strerror or exc}{taken}; "
                "give each Berth daemon on this machine a listen_port of its own (0: any free port), "
                "or set [prometheus] enabled = false") from None
        self.port = self._server.port
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-endpoint",
                                        daemon=True)
        self._thread.start()
        shown = f"[{address}]" if ":" in address else address
        LOG.info("Serving Prometheus metrics on http://%s:%d%s", shown, self.port, PATH)
        if "/" in self._routes:
            LOG.info("Serving the status page on http://%s:%d/", shown, self.port)

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None
