"""The scaling groups' controller as a scheduler process runs it: its settings from
[scaling], the metrics it reads (the members' samples from the database, queue depths
from the broker) and the thread that syncs the groups every sync_period.

Why in the scheduler processes rather than a daemon of its own: they already hold the
database, the broker and the periodic machinery a controller needs; the groups' leases
let any number of them share the work; and an operator has nothing more to deploy.
``[scaling] enabled = false`` keeps a scheduler out of it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from scheduler.scaling import metrics as sync_metrics
from scheduler.scaling.controller import ControllerSettings, ScalingController, SyncResult
from scheduler.scaling.sync_plan import plan_settings
from scheduler.status_page.recent import ScalingHistory
from scheduler.utils.leased_loop import LeasedLoop

LOG = logging.getLogger(__name__)

#: External metrics Berth can read: ``queue:<name>``, the messages ready in that queue of
#: the scheduler's broker (virtual host included).
QUEUE_PREFIX = "queue:"
EXTERNAL_PREFIXES = (QUEUE_PREFIX,)


def external_metric_error(name: str) -> str | None:
    """Why Berth cannot read the external metric ``name``, None when it can."""
    if name.startswith(QUEUE_PREFIX) and len(name) > len(QUEUE_PREFIX):
        return None
    return (f"external metric {name!r}: Berth reads {QUEUE_PREFIX}<queue name> (the depth of a "
            "queue on its broker)")


def controller_settings(conf: Any, pid: int | None = None) -> ControllerSettings:
    """The controller's settings; it holds its leases as ``<host>:<pid>``, so that two
    schedulers on one host, or one restarted, never take each other's leases for their own."""
    scaling = conf.scaling
    plan = plan_settings(conf)
    return ControllerSettings(
        owner=f"{conf.host}:{os.getpid() if pid is None else pid}",
        period_s=scaling.sync_period,
        replace_backoff_s=plan.replace_backoff_s,
        replace_backoff_max_s=plan.replace_backoff_max_s,
        cast_grace_s=scaling.cast_grace,
        max_members=scaling.max_members,
        max_new_members=plan.max_new_members,
        readiness=plan.readiness,
    )


class BrokerQueues:
    """The depth of the broker's queues, over one connection of its own, opened again
    after any failure. ``last_error`` keeps why each queue could not be read."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._conn: Any = None
        self._lock = threading.Lock()
        self.last_error: dict[str, str] = {}

    def depth(self, queue: str) -> int | None:
        """Messages ready in ``queue``; None when it does not exist or the broker is away."""
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._transport.connection("scaling-metrics", heartbeat=False)
                    self._conn.ensure_connection(max_retries=1)
                declared = self._conn.default_channel.queue_declare(queue, passive=True)
            except Exception as exc:  # a missing queue closes the channel: start afresh
                self._reset()
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if self.last_error.get(queue) != reason:
                    LOG.warning("Cannot read the depth of queue %s: %s", queue, reason)
                self.last_error[queue] = reason
                return None
            self.last_error.pop(queue, None)
            return int(declared.message_count)

    def missing(self, queue: str) -> bool:
        """Whether the broker says ``queue`` does not exist; False when it does, or when the broker
        cannot say (away, or filesystem://, whose every queue exists)."""
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._transport.connection("scaling-metrics", heartbeat=False)
                    self._conn.ensure_connection(max_retries=1)
                self._conn.default_channel.queue_declare(queue, passive=True)
            except Exception as exc:  # a missing queue closes the channel: start afresh
                self._reset()
                return str(getattr(exc, "reply_code", "")) == "404"  # AMQP's NOT_FOUND
            return False

    def _reset(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.release()
            except Exception:
                LOG.debug("Closing the queue-depth connection failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._reset()


class FleetMetrics:
    """The controller's MetricsSource on a running fleet: the members' samples the agents
    reported or the applications pushed, no older than ``max_age_s``; external metrics
    from the broker."""

    def __init__(self, database: Any, queues: BrokerQueues, max_age_s: float,
                 clock: Callable[[], datetime] | None = None) -> None:
        self._db = database
        self._queues = queues
        self._max_age = timedelta(seconds=max_age_s)
        self._clock = clock or database.now

    def member_usage(self, uuids: Sequence[str]) -> Mapping[str, Mapping[str, Decimal | float | int]]:
        if not uuids:
            return {}
        return self._db.latest_instance_metrics(list(uuids), since=self._clock() - self._max_age)

    def external(self, name: str) -> Decimal | float | int | None:
        if external_metric_error(name) is not None:
            return None
        return self._queues.depth(name[len(QUEUE_PREFIX):])


class ScalingLoop:
    """Runs ``controller.sync_once`` now and then every ``period_s`` in a thread of its
    own (a slow sync delays the next, never runs beside it); on stop, gives the leases
    up so that another scheduler takes the groups over at its next sync."""

    def __init__(self, controller: ScalingController, period_s: float) -> None:
        self.controller = controller
        self.period_s = period_s
        self._loop = LeasedLoop(self.run_once, controller.release, period_s, "scaling-controller",
                                "scaling group(s)")
        self.syncs = 0
        #: The results of the last sync (what the metrics show of each group).
        self.last_results: list[SyncResult] = []
        #: The groups' last hour, for the status page.
        self.history = ScalingHistory()

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def run_once(self) -> list[SyncResult]:
        """One sync; a failure is logged and the next period tries again."""
        started = time.monotonic()
        try:
            results = self.controller.sync_once()
        except Exception:
            LOG.exception("Syncing the scaling groups failed; trying again in %g s", self.period_s)
            return []
        self.syncs += 1
        self.last_results = results
        sync_metrics.count_syncs(results)
        self.history.record(results)
        if results:
            LOG.debug("Synced %d scaling group(s) in %.3f s", len(results), time.monotonic() - started)
        return results
