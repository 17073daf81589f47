"""The fragmentation hint of a refusal, in the service: its time limit, what all hints may spend,
and the instances a migration may take, read through a lookup (the database's, in the service).

Only a refusal by the filters pays for it (a placement never does). Each hint examines hosts for
at most [scheduler] fragmentation_hint_time_limit seconds, and all hints together spend at most
that much in any second: in a burst of refusals, a request like one answered within the last
second on a fleet whose figures have not changed gets the same answer, and the others get none
(a log line says so). The policy is scheduler.moves.rebalance.hint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from oslo_config import cfg

from berth_contract.request_spec import RequestSpec
from scheduler.exception import BerthError, NoValidHost
from scheduler.moves.planner import MIGRATION, Move, flavor_of
from scheduler.planning.lookups import SettledInstances

if TYPE_CHECKING:  # the planner's modules load scipy: not for reading the options
    from scheduler.moves.rebalance.hint import Hint, NoHint
    from scheduler.moves.rebalance.snapshot import Resident

LOG = logging.getLogger(__name__)

opts: list[cfg.Opt] = [
    cfg.FloatOpt(
        "fragmentation_hint_time_limit",
        default=0.1,
        min=0,
        max=10,
        help="Seconds a refusal by the filters may spend finding whether the request failed only "
        "through fragmentation (the hosts it may use have room in total, none alone, and moving "
        "instances off some would give it room), to say so in the instance's fault with the hosts "
        "found and the fewest migrations; all refusals together spend at most this much in any "
        "second. Checked between hosts: one host's plan may run past it. 0: no hint.",
    ),
]

#: Seconds an answer is given again to a like request while the fleet's figures are unchanged.
REUSED_FOR = 1.0
#: Answers kept at most.
KEPT = 256
#: Requests of instances kept at most, read again once their row changes.
SPECS_KEPT = 100_000
#: Scheduler hints whose hosts a resident's move would have to look up: such instances stay put.
PLACEMENT_HINTS = ("group", "same_host", "different_host")


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("scheduler", opts)]


class FragmentationHints:
    """Adds the fragmentation hint to the reason of a refusal by the filters."""

    def __init__(self, conf: Any, stored: SettledInstances, hosts: Any, filters: Sequence[Any],
                 move_spec: Callable[[Move], RequestSpec],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._conf = conf
        self._stored = stored  # read only: the instances a migration may take
        self._hosts = hosts  # HostManager: its table and lock
        self._filters = filters
        self._move_spec = move_spec  # MovePlanner.spec: the request a migration of an instance places
        self._clock = clock
        self._budget = float("inf")  # seconds the hints may spend now: the limit at first
        self._refilled = clock()
        self._answers: dict[Any, tuple[int, float, Hint | NoHint]] = {}
        self._seen: list[Any] = []  # the fleet's figures (_columns) when last asked, and their number
        self._seen_number = 0
        #: {uuid: (updated_at, the request its migration places)}
        self._specs: dict[str, tuple[Any, RequestSpec | None]] = {}

    def reason(self, spec: RequestSpec, refusal: NoValidHost) -> str:
        """The reason ``refusal`` of ``spec`` gives, with the hint when there is one."""
        said = str(refusal)
        limit = self._conf.scheduler.fragmentation_hint_time_limit
        if not limit or not refusal.removed:
            return said
        uuids = ", ".join(spec.instance_uuids)
        with self._hosts.lock:
            answer = self._answer(spec, limit, uuids)
        if answer is None:
            return said
        if not answer:
            log = LOG.info if answer.timed_out else LOG.debug
            log("Instances %s: no fragmentation hint: %s", uuids, answer.reason)
            return said
        command = not any(spec.scheduler_hints.get(h) for h in PLACEMENT_HINTS)
        return f"{said}; {answer.text(spec.flavor, spec.availability_zone, command)}"

    def _answer(self, spec: RequestSpec, limit: float, uuids: str) -> Hint | NoHint | None:
        from scheduler.moves.rebalance.hint import fragmentation
        from scheduler.moves.rebalance.judge import request_key
        from scheduler.moves.rebalance.snapshot import Snapshot

        table = self._hosts.table
        now = self._clock()
        figures = self._figures(table)
        key = (request_key(spec), tuple(spec.ignore_hosts))
        kept = self._answers.get(key)
        if kept is not None and kept[0] == figures and now - kept[1] < REUSED_FOR:
            return kept[2]
        self._budget = min(limit, self._budget + (now - self._refilled) * limit)
        self._refilled = now
        if self._budget <= 0:
            LOG.info("Instances %s: no fragmentation hint: the hints of other refusals spent this "
                     "second's [scheduler] fragmentation_hint_time_limit (%g s)", uuids, limit)
            return None
        snapshot = Snapshot.from_conf(table, [], self._conf)
        answer = fragmentation(snapshot, spec, self._filters, self._residents_of, self._budget, self._clock)
        spent = self._clock() - now
        self._budget -= spent
        self._refilled = self._clock()
        if len(self._answers) >= KEPT:
            self._answers.clear()
        self._answers[key] = (figures, now, answer)
        LOG.debug("Instances %s: fragmentation hint in %.3f s", uuids, spent)
        return answer

    def _figures(self, table: Any) -> int:
        """The number of the fleet's figures as they are: it changes when they do."""
        columns = _columns(table)
        seen = self._seen
        if not seen or not all(np.array_equal(a, b) for a, b in zip(seen, columns, strict=True)):
            self._seen = [column.copy() for column in columns]
            self._seen_number += 1
        return self._seen_number

    def _residents_of(self, hosts: Sequence[str]) -> list[Resident]:
        """The instances on ``hosts`` a migration may take, each with the request it would place."""
        from scheduler.moves.rebalance.snapshot import Resident

        residents = []
        for row in self._stored.settled_instances_on_hosts(hosts):
            spec = self._spec(row)
            if spec is not None:
                residents.append(Resident(row["uuid"], row["host"], spec))
        return residents

    def _spec(self, row: dict[str, Any]) -> RequestSpec | None:
        """The request a migration of instance ``row`` places, read again only once the row has
        changed (most of a hint's time is reading them); None when it stays put."""
        kept = self._specs.get(row["uuid"])
        if kept is not None and kept[0] == row.get("updated_at"):
            return kept[1]
        hints = (row.get("filter_properties") or {}).get("scheduler_hints") or {}
        spec = None
        if isinstance(hints, dict) and not any(hints.get(h) for h in PLACEMENT_HINTS):
            try:
                spec = self._move_spec(Move(None, row, MIGRATION, flavor_of(row)))
            except BerthError:
                pass  # its stored request cannot be read, or a move of it would be refused
        if len(self._specs) >= SPECS_KEPT:
            self._specs.clear()
        self._specs[row["uuid"]] = (row.get("updated_at"), spec)
        return spec


def _columns(table: Any) -> list[Any]:
    """What every host has and uses: while they are equal, the fleet's room is as it was."""
    return [table.total_ram_mb, table.free_ram_mb, table.total_disk_gb, table.free_disk_gb,
            table.vcpus_total, table.vcpus_used, table.disabled]
