"""Moves that wait: resizes confirmed after ``resize_confirm_window``, moves that never finish
failed after ``move_timeout``. Every scheduler's periodic task runs it; the compare-and-set on
the instance's row makes one of them act."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from oslo_config import cfg

from scheduler import rpc, states

LOG = logging.getLogger(__name__)

opts: list[cfg.Opt] = [
    cfg.IntOpt(
        "resize_confirm_window",
        default=0,
        min=0,
        help="Seconds after which a resize waiting for confirmation (VERIFY_RESIZE) is confirmed by "
        "itself, as Nova's option of that name: 0 never confirms one by itself (berth resize "
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
    def __init__(self, conf: Any, database: Any, move_applier: Any) -> None:
        self._conf = conf
        self._db = database
        self._moves = move_applier

    def expire(self, now: datetime.datetime | None = None) -> int:
        """Confirm the resizes and fail the moves that waited too long at ``now`` (the database's
        clock by default); how many."""
        now = now or self._db.now()
        acted = 0
        timeout = self._conf.scheduler.move_timeout
        for instance in self._db.list_instances(states=[states.MIGRATING],
                                                updated_before=now - datetime.timedelta(seconds=timeout)):
            migration = self._db.active_migration(instance["uuid"])
            if migration is None or migration["status"] != "migrating":
                continue
            ctxt = {"request_id": rpc.new_request_id()}
            with rpc.handling(ctxt):
                reason = (f"{migration['dest_host']}: no word of the move for more than {timeout} s "
                          "([scheduler] move_timeout)")
                if self._moves.abandon(ctxt, migration, reason):
                    acted += 1
        window = self._conf.scheduler.resize_confirm_window
        if window:
            for instance in self._db.list_instances(states=[states.VERIFY_RESIZE],
                                                    updated_before=now - datetime.timedelta(seconds=window)):
                migration = self._db.active_migration(instance["uuid"])
                if migration is None or migration["status"] != "finished":
                    continue
                ctxt = {"request_id": rpc.new_request_id()}
                with rpc.handling(ctxt):
                    LOG.info("Instance %s: resize %s confirmed by itself after %s s ([scheduler] "
                             "resize_confirm_window)", instance["uuid"], migration["id"], window)
                    if self._moves.confirm(ctxt, migration):
                        acted += 1
        return acted
