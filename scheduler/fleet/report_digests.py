"""Shared ingestion of the agents' reports: each report taken by one scheduler, passed on to the
others in digests.

With ``[scheduler] report_ingestion = shared`` the schedulers share the queue
``scheduler_reports`` on the reports' exchange (``scheduler_reports_fanout``): each report is
taken by one of them through the RPC path (checked, applied to its host table), which then
forwards it, with the others it took meanwhile, in one message (a digest) on the fanout
exchange ``scheduler_report_digests_fanout``. Every scheduler takes each digest from a queue of
its own and applies its reports straight to its host table: already checked by a Berth
scheduler, in the checked form ``HostReport.to_wire`` gives. A scheduler that dies with a digest
unsent costs its peers that batch's freshness only: each host reports again a report interval
later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from oslo_config import cfg

from berth_contract.host_report import HostReport
from scheduler.rpc import envelope, topology
from scheduler.rpc.consumer import ConsumeLoop
from scheduler.rpc.exceptions import MessageTooLarge
from scheduler.utils.log_once import LogOnce

LOG = logging.getLogger(__name__)

EACH = "each"
SHARED = "shared"
#: The fanout topic of the digests: exchange ``scheduler_report_digests_fanout``.
DIGEST_TOPIC = "scheduler_report_digests"
#: The format of the digests this release sends and reads; a digest of another is refused.
FORMAT = 1
#: Seconds a report waits at most in the shared queue: no news after that (its host has
#: reported again). A constant: every scheduler declares the queue with the same arguments.
REPORT_TTL = 60

opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "report_ingestion",
        default=EACH,
        choices=[
            (EACH, "every scheduler takes every report from the agents itself (a queue of its own "
             "on the reports' exchange)"),
            (SHARED, "each report is taken by one scheduler (the queue scheduler_reports, shared), "
             "which passes it on to the others in digests (report_digest_interval)"),
        ],
        help="How the schedulers take the agents' reports. Every scheduler keeps every host "
        "current either way. 'shared' spares each scheduler most of the cost of a report it does "
        "not take itself (a large fleet: see the install guide, Clusters); it needs agents "
        "that send reports to scheduler_reports_fanout (scheduler API 1.2; the reports of older "
        "agents reach every scheduler as before). The modes mix: a scheduler in 'each' mode beside "
        "'shared' ones takes every report itself, and the shared ones share them all between them.",
    ),
    cfg.FloatOpt(
        "report_digest_interval",
        default=0.25,
        min=0.01,
        max=5.0,
        help="With report_ingestion = shared: seconds at most between taking a report and passing "
        "it on to the other schedulers (sooner once report_digest_size reports wait).",
    ),
    cfg.IntOpt(
        "report_digest_size",
        default=200,
        min=1,
        max=5000,
        help="With report_ingestion = shared: reports at most in one digest sent to the other "
        "schedulers; a digest larger than [oslo_messaging_rabbit] max_message_bytes is split.",
    ),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("scheduler", opts)]


def taker(host_manager: Any, buffer: Any) -> Callable[[list[HostReport], str], None]:
    """What applies a digest's reports as report_resources applies one: into ``host_manager``'s
    table (ordered by each agent's report_seq), and into ``buffer`` (the ReportBuffer), whence
    their hosts' owner saves them."""

    def take(reports: list[HostReport], sender: str) -> None:
        older = 0
        with host_manager.lock:
            for report in reports:
                if host_manager.update_from_report(report):
                    buffer.put(report.host, report)
                else:
                    older += 1
        if older:
            LOG.debug("%d report(s) of a digest from %s older than those taken already; ignored",
                      older, sender)

    return take


def digest_body(sender: str, reports: Sequence[HostReport]) -> dict[str, Any]:
    """The message that passes ``reports`` (checked) on from ``sender``."""
    return {"digest": FORMAT, "from": sender, "reports": [report.to_wire() for report in reports]}


class DigestSender:
    """Collects the reports a scheduler took and publishes them in digests, from a thread of its
    own: at most ``interval`` seconds after the first waiting, or at once when ``size`` wait."""

    def __init__(self, transport: Any, me: str, interval: float, size: int):
        self._transport = transport
        self._me = me
        self._interval = interval
        self._size = size
        self._exchange = topology.fanout_exchange(DIGEST_TOPIC)
        self._lock = threading.Lock()
        self._pending: list[HostReport] = []
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = LogOnce(LOG)
        #: Reports sent in digests so far.
        self.sent = 0

    def add(self, report: HostReport) -> None:
        with self._lock:
            self._pending.append(report)
            full = len(self._pending) >= self._size
        if full:
            self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="report-digests-out", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Send what waits, and stop."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            self.flush()
        self.flush()

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        for start in range(0, len(batch), self._size):
            self._publish(batch[start:start + self._size])

    def _publish(self, reports: list[HostReport]) -> None:
        limit = self._transport.conf.oslo_messaging_rabbit.max_message_bytes
        try:
            self._transport.publisher.publish(digest_body(self._me, reports), self._exchange, DIGEST_TOPIC,
                                              persistent=False, max_bytes=limit)
            self.sent += len(reports)
        except MessageTooLarge:
            if len(reports) == 1:
                LOG.error("The report of host %s cannot be passed on to the other schedulers: alone it "
                          "exceeds max_message_bytes (%d)", reports[0].host, limit)
                return
            half = len(reports) // 2
            self._publish(reports[:half])
            self._publish(reports[half:])
        except Exception as exc:
            self._failures.log("publish", logging.WARNING,
                               "Cannot pass %d report(s) on to the other schedulers (%s): they see "
                               "those hosts' next reports instead", len(reports), exc)


class DigestReceiver:
    """Takes the other schedulers' digests from a queue of its own and hands their reports to
    ``take(reports, sender)`` (HostReports); its own digests are skipped. A digest that is not
    one of this release's format, or that a broker user other than a scheduler sent while
    ``[roles] enforce`` is on, is refused with an error in the log (once a minute).

    ``hearing`` (the host manager) is told when the digests stop coming (``deaf(since, source)``:
    the connection is lost) and come again (``heard(now, source)``), as the RPC server tells it of
    its own queues: the hosts whose reports the digests carry are not said down meanwhile."""

    def __init__(self, transport: Any, me: str, take: Callable[[list[HostReport], str], None],
                 access: Any = None, hearing: Any = None):
        self._transport = transport
        self._me = me
        self._take = take
        self._access = access
        self._hearing = hearing
        self._deaf_since: float | None = None
        self.queue_name = f"{DIGEST_TOPIC}_{envelope.new_id()}"
        self._refusals = LogOnce(LOG)
        self._loop = ConsumeLoop(transport, f"report-digests-{me}", queues=self._queues,
                                 on_message=self._on_message,
                                 prefetch=transport.conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count,
                                 on_stop=self._delete_queue, on_lost=self._lost,
                                 on_drained=self._drained, want_more=lambda: False)

    def _queues(self) -> list[Any]:
        return [topology.fanout_queue(self._transport, DIGEST_TOPIC, self.queue_name)]

    def start(self, timeout: float = 30) -> None:
        self._loop.start()
        self._loop.first_attempt.wait(timeout)

    def stop(self) -> None:
        self._loop.stop()
        self._loop.join()

    @property
    def ready(self) -> bool:
        return self._loop.ready.is_set()

    def _lost(self) -> None:
        if self._deaf_since is None:
            self._deaf_since = self._loop.heard_at or time.monotonic()
            if self._hearing is not None:
                self._hearing.deaf(self._deaf_since, DIGEST_TOPIC)

    def _drained(self) -> None:
        if self._deaf_since is not None:
            self._deaf_since = None
            if self._hearing is not None:
                self._hearing.heard(time.monotonic(), DIGEST_TOPIC)

    def _delete_queue(self, channel: Any) -> None:
        queue = self._queues()[0](channel)
        if not self._transport.is_rabbit:
            queue.purge()
        queue.delete()
        queue.unbind_from(queue.exchange, queue.routing_key)

    def _on_message(self, message: Any) -> None:
        try:
            self.apply(message.properties.get("user_id"), message)
        except Exception:
            LOG.exception("A digest of reports from another scheduler could not be applied")
        finally:
            message.ack()

    def apply(self, user_id: str | None, message: Any) -> None:
        try:
            body = envelope.decode(message)
        except Exception as exc:
            self._refuse("undecodable", "cannot decode its body: %s", exc)
            return
        if not isinstance(body, dict):
            self._refuse("not an object", "it is not a JSON object")
            return
        sender = body.get("from")
        if sender == self._me:
            return
        access = self._access
        if access is not None and access.enforce and user_id not in access.schedulers:
            self._refuse(("user", user_id), "sent by %s, not by a scheduler ([roles] schedulers)",
                         access.describe(user_id))
            return
        if body.get("digest") != FORMAT:
            self._refuse(("format", repr(body.get("digest"))[:40]),
                         "from %s, of format %s: this scheduler reads format %d only (a scheduler of "
                         "another release sent it; run one release in shared report ingestion)",
                         str(sender)[:100], repr(body.get("digest"))[:40], FORMAT)
            return
        wires = body.get("reports")
        if not isinstance(wires, list):
            self._refuse("no reports", "from %s: its reports are not a list", str(sender)[:100])
            return
        reports = []
        for wire in wires:
            try:
                reports.append(HostReport.trusted(wire))
            except Exception as exc:
                self._refuse("bad report", "from %s: a report of it is unreadable (%s: %s); the others "
                             "are taken", str(sender)[:100], type(exc).__name__, exc)
        if reports:
            self._take(reports, str(sender))

    def _refuse(self, key: Any, why: str, *args: Any) -> None:
        self._refusals.log(key, logging.ERROR, "Digest of reports refused: " + why, *args)
