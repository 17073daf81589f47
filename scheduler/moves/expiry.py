"""Moves that wait: resizes confirmed after ``resize_confirm_window``, moves that never finish
failed after ``move_timeout``. Every scheduler's periodic task runs it; the compare-and-set on
the instance's row makes one of them act."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Any

from oslo_config import cfg

from scheduler import rpc, states
from scheduler.db.engine import DatabaseUnavailable

LOG = logging.getLogger(__name__)

opts: list[cfg.Opt] = [
    cfg.IntOpt(
        "resize_confirm_window",
        default=0,
        min=0,
        help="Seconds after which a resize waiting for confirmation (VERIFY_RESIZE) is confirmed by "
        "itself, as Nova's option of that name: 0 never confirms one by itself (berth server resize "
        "--confirm or --revert must).",
    ),
    cfg.IntOpt(
        "move_timeout",
        default=1800,
        min=1,
        help="Seconds a move may stay MIGRATING without its destination's word. Past it, the move "
        "fails: the instance stays ACTIVE on its source with its old size, and the destination is "
        "told to drop what it took of it.",
    ),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("scheduler", opts)]


class MoveExpiry:
    def __init__(self, conf: Any, database: Any, move_applier: Any,
                 unit_of_work: Callable[[], Any] = contextlib.nullcontext) -> None:
        """``unit_of_work()``: one transaction whose casts go out once it commits (the scheduler's
        UnitOfWork), so that both rows of a move's end are written together, before its casts."""
        self._conf = conf
        self._db = database
        self._moves = move_applier
        self._unit_of_work = unit_of_work

    def expire(self, now: datetime.datetime | None = None) -> int:
        """Confirm the resizes and fail the moves that waited too long at ``now`` (the database's
        clock by default); how many."""
        now = now or self._db.now()
        acted = 0
        timeout = self._conf.scheduler.move_timeout
        reason = f"no word of the move for more than {timeout} s ([scheduler] move_timeout)"

        def abandon(ctxt: Any, migration: dict[str, Any]) -> bool:
            return bool(self._moves.abandon(ctxt, migration, f"{migration['dest_host']}: {reason}"))

        for instance in self._db.list_instances(states=[states.MIGRATING],
                                                updated_before=now - datetime.timedelta(seconds=timeout)):
            acted += self._act(instance, "migrating", abandon)
        window = self._conf.scheduler.resize_confirm_window

        def confirm(ctxt: Any, migration: dict[str, Any]) -> bool:
            LOG.info("Instance %s: resize %s confirmed by itself after %s s ([scheduler] "
                     "resize_confirm_window)", migration["instance_uuid"], migration["id"], window)
            return bool(self._moves.confirm(ctxt, migration))

        if window:
            for instance in self._db.list_instances(states=[states.VERIFY_RESIZE],
                                                    updated_before=now - datetime.timedelta(seconds=window)):
                acted += self._act(instance, "finished", confirm)
        return acted

    def _act(self, instance: dict[str, Any], status: str, act: Callable[[Any, dict[str, Any]], bool]) -> bool:
        """``act`` on the instance's move in ``status``, in a transaction of its own. Its casts are
        sent once it commits; should the broker be away then, the agents' next reports show what
        they did not hear, and it is told again (scheduler.fleet.reconciler)."""
        ctxt = {"request_id": rpc.new_request_id()}
        with rpc.handling(ctxt):
            try:
                with self._unit_of_work():
                    migration = self._db.active_migration(instance["uuid"])
                    return migration is not None and migration["status"] == status and act(ctxt, migration)
            except rpc.RetryLater as exc:  # the commit met the database away, or lost a race
                raise DatabaseUnavailable(str(exc)) from exc
            except rpc.MessageDeliveryFailure as exc:
                LOG.warning("Instance %s: its move's end is recorded, but the agents could not be told now "
                            "(%s); they are told again once their reports show they did not hear",
                            instance["uuid"], exc)
                return True
