"""Claiming hosts in the database, so that schedulers sharing it never both fill the same room.

Each host has a generation in the database. A scheduler places instances in
memory, then claims their hosts: a compare-and-set of each host's generation
against the one it last saw. A claim that fails means another scheduler
placed there meanwhile: the placements on that host are given back, what the
others placed is read, and those requests placed again knowing it. A host
another scheduler is claiming at this very moment is left out for a few
attempts, then waited for.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.exception import NoValidHost
from scheduler.planning.plan import Placement
from scheduler.telemetry import scheduler_metrics as telemetry

LOG = logging.getLogger(__name__)

#: Times a request is placed again after its claims conflicted with another scheduler's.
CLAIM_ATTEMPTS = 20
#: Seconds to let other workers finish claiming when only their hosts would do (times the attempt).
BUSY_WAIT = 0.02
#: Claims skip the hosts other workers hold for this many attempts, then wait for them.
WAIT_AFTER = 4

#: Chooses and consumes hosts in memory for the instances of a request, or raises NoValidHost.
Select = Callable[[RequestSpec], list[Placement]]


class ClaimsDatabase(Protocol):
    """What the claim protocol needs of the database (scheduler.db.api.Database has it)."""

    def now(self) -> datetime.datetime: ...

    def claim_hosts(self, expected: dict[str, int], wait: bool = False
                    ) -> tuple[set[str], set[str], set[str]]: ...

    def host_generations(self, hosts: list[str] | None = None) -> dict[str, int]: ...

    def instances_placed_since(self, hosts: list[str] | None, since: datetime.datetime
                               ) -> list[dict[str, Any]]: ...


class Fleet(Protocol):
    """What the claim protocol needs of the scheduler's hosts (HostManager has it)."""

    lock: threading.RLock

    @property
    def table(self) -> Any: ...

    def release(self, host: str, instance_uuid: str) -> None: ...

    def consume(self, host: str, instance_uuid: str, flavor: Flavor) -> Any: ...


class HostClaims:
    """The hosts' generations as this scheduler last claimed or read them, and the protocol
    that places requests under them."""

    def __init__(self, database: ClaimsDatabase, hosts: Fleet, service_down_time: float,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self._db = database
        self._hosts = hosts
        self._service_down_time = service_down_time
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.generations: dict[str, int] = {}

    def place(self, specs: Sequence[RequestSpec], select: Select) -> list[list[Placement] | NoValidHost]:
        """For each spec, [(host, node, limits)] per instance, chosen by ``select`` and claimed
        in the database; or the NoValidHost that says why not."""
        outcomes: list[Any] = [None] * len(specs)
        pending = list(range(len(specs)))
        busy: set[str] = set()
        for attempt in range(CLAIM_ATTEMPTS):
            chosen, waiting = self._select_all(specs, pending, select, busy, outcomes)
            # After a few tries that skip what others hold, wait for them instead: each wait
            # ends with their placements committed and ours next in line.
            conflicts, held = self.claim({p.host for placements in chosen.values() for p in placements},
                                         wait=attempt >= WAIT_AFTER)
            retry = list(waiting)
            with self._hosts.lock:
                for index, placements in chosen.items():
                    hosts = [p.host for p in placements]
                    if conflicts.isdisjoint(hosts) and held.isdisjoint(hosts):
                        outcomes[index] = placements
                        continue
                    for placement in placements:  # as many as fit may be fewer than asked
                        self._hosts.release(placement.host, placement.instance_uuid)
                    retry.append(index)
            if conflicts:
                self.learn(conflicts)
            busy |= held
            pending = sorted(retry)
            if not pending:
                return outcomes
            if waiting:
                # Let the other workers finish claiming the hosts only they could take.
                busy.clear()
                self._sleep(BUSY_WAIT * (attempt + 1))
            elif 2 <= attempt < WAIT_AFTER:
                # Conflicting again and again: step out of the way of the workers racing
                # for the same hosts, each for its own random while.
                self._sleep(BUSY_WAIT * (attempt - 1) * self._rng.random())
        LOG.warning("Hosts kept changing under instances %s; placing them without a claim; their "
                    "agents' claims decide",
                    ", ".join(u for index in pending for u in specs[index].instance_uuids))
        with self._hosts.lock:
            for index in pending:
                try:
                    outcomes[index] = select(specs[index])
                except NoValidHost as exc:
                    outcomes[index] = exc
        return outcomes

    def _select_all(self, specs: Sequence[RequestSpec], pending: list[int], select: Select, busy: set[str],
                    outcomes: list[Any]) -> tuple[dict[int, list[Placement]], list[int]]:
        """({index: placements} for the pending specs that found hosts, [indexes that found
        none while hosts others hold were left out]); the others' NoValidHost into outcomes."""
        chosen: dict[int, list[Placement]] = {}
        waiting: list[int] = []
        with self._hosts.lock:
            for index in pending:
                spec = specs[index]
                if busy:
                    spec = dataclasses.replace(spec, ignore_hosts=spec.ignore_hosts + sorted(busy))
                try:
                    chosen[index] = select(spec)
                except NoValidHost as exc:
                    if busy:
                        waiting.append(index)  # perhaps only hosts other workers hold would do
                    else:
                        outcomes[index] = exc
        return chosen, waiting

    def claim(self, hosts: Iterable[str], wait: bool = False) -> tuple[set[str], set[str]]:
        """Claim ``hosts``: returns (hosts that conflicted, hosts another scheduler is
        claiming now, skipped; none when told to ``wait`` for them).

        A host this scheduler never claimed counts as a conflict: what others
        placed there is read first, and its requests placed again knowing it.
        """
        hosts = set(hosts)
        unknown = {h for h in hosts if h not in self.generations}
        claimed, conflicts, held = self._db.claim_hosts(
            {h: self.generations[h] for h in hosts if h not in unknown}, wait=wait)
        if conflicts:
            telemetry.CLAIM_CONFLICTS.inc(len(conflicts))
        for host in claimed:
            self.generations[host] += 1
        return conflicts | unknown, held

    def learn(self, hosts: Iterable[str] | None = None) -> None:
        """Count, on ``hosts`` (every host with None), the instances other schedulers placed
        that the agents have not reported yet; and their generations now.

        Generations are read first: a placement committed in between then shows
        as a conflict later, never as room that is not there. An instance the
        host's last report lists is counted there already (HostManager.consume
        leaves it alone); one claimed after that report was made is not, however
        long before it was scheduled. Placements older than service_down_time
        would be dropped by the next report anyway (pending_ttl): not read.
        """
        which = None if hosts is None else list(hosts)
        if which is None:
            # Every known host: one never claimed is at generation 0.
            self.generations.update(dict.fromkeys(self._hosts.table.names, 0))
        self.generations.update(self._db.host_generations(which))
        since = self._db.now() - datetime.timedelta(seconds=self._service_down_time)
        scheduled = self._db.instances_placed_since(which, since)
        with self._hosts.lock:
            for instance in scheduled:
                flavor = Flavor(memory_mb=instance["memory_mb"], root_gb=instance["root_gb"],
                                ephemeral_gb=instance["ephemeral_gb"], vcpus=instance["vcpus"])
                self._hosts.consume(instance["host"], instance["uuid"], flavor)
