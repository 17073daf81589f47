"""The scheduler's periodic look at what each agent holds against the database.

scheduler.fleet.holdings decides what differs and what to do about it; this
module reads the rows, logs the differences and sends the terminates.
"""

from __future__ import annotations

import datetime
import functools
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler import rpc
from scheduler.db.engine import to_db_time
from scheduler.fleet import holdings as reconcile
from scheduler.utils.log_once import LogOnce

if TYPE_CHECKING:
    from berth_contract.host_report import HostReport

LOG = logging.getLogger(__name__)

#: Terminates sent remembered before the old ones are forgotten.
RECONCILE_KEEP = 100_000


class Reconciler:
    """A host is looked at when first seen, when its agent started again, and then about
    every service_down_time (the while after which a difference counts as settled; spread
    out, so that hosts do not all come due at once); a terminate is sent again at most as
    often."""

    def __init__(self, database: Any, grace: float, terminate: Callable[[dict, str, str, str], None],
                 rng: random.Random | None = None, moves: Any = None,
                 build: Callable[[dict, str], None] | None = None,
                 power: Callable[[dict, str, str, str], None] | None = None):
        """``terminate(context, host, uuid, reason)`` tells an agent to drop an instance;
        ``moves`` (MoveApplier) tells a destination a move again (``send_move``) and a host a
        move's end (``send_end``); ``build(context, uuid)`` casts an instance's build again."""
        self._db = database
        self._grace = grace
        self._terminate = terminate
        self._moves = moves
        self._build = build
        self._power = power
        self._rng = rng or random.Random()
        self._looked_at: dict[str, tuple[Any, float]] = {}  # host -> (agent's started_at, due again)
        # instance uuid, or (command, migration id), -> monotonic time it was last sent
        self._sent: dict[Any, float] = {}
        self._notes = LogOnce(LOG, interval=3600)

    def run(self, reports: dict[str, HostReport], now: float | None = None) -> list[reconcile.Difference]:
        """Set what each agent of ``reports`` ({host: HostReport}) holds against the database;
        returns the differences found on the hosts that were due. Every report is set against
        the moves under way, and the commands its agent missed are sent again."""
        now = time.monotonic() if now is None else now
        if self._moves is not None and reports:
            self._tell_again(reports, now)
        grace = self._grace
        due = {}
        for host, report in reports.items():
            started = report.started_at
            last = self._looked_at.get(host)
            if last is None or last[0] != started or now >= last[1]:
                due[host] = frozenset(report.instance_uuids)
                self._looked_at[host] = (started, now + grace * self._rng.uniform(0.75, 1.25))
        if not due:
            return []
        recorded = self._db.instances_to_reconcile(list(due), [u for held in due.values() for u in held])
        settled_before = self._db.now() - datetime.timedelta(seconds=grace)
        on_host: dict[str, dict[str, dict]] = {}
        for u, r in recorded.items():
            on_host.setdefault(r["host"], {})[u] = r
        found = []
        for host, held in due.items():
            mine = dict(on_host.get(host, ()))
            mine.update((u, recorded[u]) for u in held if u in recorded)
            for difference in reconcile.differences(host, held, mine, settled_before):
                found.append(difference)
                self._act(host, difference, now)
        if len(self._sent) > RECONCILE_KEEP:
            self._sent = {u: t for u, t in self._sent.items() if now - t < grace}
        return found

    def _tell_again(self, reports: dict[str, HostReport], now: float) -> None:
        moves = self._db.moves_to_check(
            [entry[0] for report in reports.values()
             for said in (report.open_moves, report.move_steps) for entry in (said or {}).values()])
        if not moves:
            return
        for migration in moves.values():
            migration["updated_at"] = to_db_time(migration["updated_at"])
        settled_before = self._db.now() - datetime.timedelta(seconds=self._grace)
        for host, report in reports.items():
            for unheard in reconcile.unheard(host, frozenset(report.instance_uuids), report.open_moves, moves,
                                             settled_before, report.move_steps):
                self._once((unheard.command, unheard.migration["id"]), now, host,
                           functools.partial(self._tell_unheard, unheard))

    def _tell_unheard(self, unheard: reconcile.Unheard) -> None:
        LOG.warning("%s: telling it again", unheard.why)
        if unheard.command == "end":
            self._moves.send_end({}, unheard.migration, unheard.why)
        elif not self._moves.send_move({}, unheard.migration):
            LOG.warning("Migration %s was recorded by an earlier Berth, without what its destination is "
                        "told: it fails after [scheduler] move_timeout", unheard.migration["id"])

    def _once(self, key: Any, now: float, host: str, send: Callable[[], None]) -> None:
        """``send()`` unless it was sent for ``key`` within grace; one the broker refuses now is sent
        at the next look."""
        sent = self._sent.get(key)
        if sent is not None and now - sent < self._grace:
            return
        self._sent[key] = now
        try:
            send()
        except rpc.MessageDeliveryFailure as exc:
            LOG.warning("Cannot tell %s now (%s); trying again later", host, exc)
            del self._sent[key]

    def _act(self, host: str, difference: reconcile.Difference, now: float) -> None:
        uuid, why = difference.instance_uuid, difference.why
        if difference.action == "build" and self._build is not None:
            self._once(uuid, now, host, functools.partial(self._build_again, self._build, uuid, why))
        elif difference.action == "power" and self._power is not None:
            self._once(("power", uuid), now, host,
                       functools.partial(self._power_again, host, uuid, difference.power, why))
        elif difference.action == "terminate":
            self._once(uuid, now, host, functools.partial(self._terminate_it, host, uuid, why))
        else:
            self._notes.log(("note", uuid), logging.WARNING, "%s", why)

    @staticmethod
    def _build_again(build: Callable[[dict, str], None], uuid: str, why: str) -> None:
        LOG.warning("%s: sending its build again", why)
        build({}, uuid)

    def _power_again(self, host: str, uuid: str, action: str | None, why: str) -> None:
        LOG.warning("%s: telling %s again to %s it", why, host, action)
        assert self._power is not None and action is not None
        self._power({}, host, uuid, action)

    def _terminate_it(self, host: str, uuid: str, why: str) -> None:
        LOG.warning("%s: telling %s to terminate it", why, host)
        self._terminate({}, host, uuid, why)
