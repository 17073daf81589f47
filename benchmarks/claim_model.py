"""The host_generations and instances tables as ClaimQueries reads and writes them
(scheduler/db/claims.py), in memory, for simulated schedulers.

Each scheduler works through a ``Session``, its transaction: a host it claims is locked
until it commits, as ``SELECT ... FOR UPDATE`` locks the row; another session's claim of
that host finds it held (skipped, as SKIP LOCKED does), or with ``wait`` waits for the
commit. Until then the others read the generation and the instances committed before
(PostgreSQL's snapshot). Instances are written by ``commit`` as SCHEDULED, and stay so:
the simulated agents update no rows. tests/unit/scheduler/test_scale_out.py checks that
a session committing after each call answers as ClaimQueries does on SQLite.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

import greenlet

from benchmarks.sim_clock import SimClock

#: The database's clock at simulated time 0.
EPOCH = datetime.datetime(2026, 1, 1)


class Deadlock(RuntimeError):
    """This session's wait would close a cycle of sessions waiting for each other's locks:
    as PostgreSQL does, its transaction is the one that fails (the caller rolls back)."""


class ClaimModel:
    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.generations: dict[str, int] = {}  # committed; no entry: no row (generation 0)
        self.placed: dict[str, list[dict[str, Any]]] = {}  # host -> rows of instances placed there
        self.locks: dict[str, Session] = {}  # host -> the session whose transaction holds its row
        self._waiting: list[Any] = []  # actors waiting for locks to go
        self.held = 0  # hosts claims found held
        self.waits_for: dict[Session, set[Session]] = {}  # session -> the sessions it waits for

    def session(self, round_trip: float = 0.0) -> Session:
        """A scheduler's connection; each of its calls takes ``round_trip`` seconds."""
        return Session(self, round_trip)

    def now(self) -> datetime.datetime:
        return EPOCH + datetime.timedelta(seconds=self.clock.now)

    def _released(self) -> None:
        waiting, self._waiting = self._waiting, []
        for actor in waiting:
            self.clock.wake(actor)


class Session:
    """What HostClaims needs of the database (scheduler.planning.claims.ClaimsDatabase), for
    one scheduler, and the commit that ends its transaction."""

    def __init__(self, model: ClaimModel, round_trip: float) -> None:
        self.model = model
        self.round_trip = round_trip
        self.bumps: dict[str, int] = {}  # generations bumped in this transaction, not committed
        #: Simulated seconds spent deciding since the last call, paid before the next one.
        self.owed = 0.0
        self.calls = 0

    def _pay(self) -> None:
        """The decisions made since the last call, then this call's trip."""
        owed, self.owed = self.owed, 0.0
        self.calls += 1
        if owed or self.round_trip:
            self.model.clock.wait(owed + self.round_trip)

    def now(self) -> datetime.datetime:
        return self.model.now()

    def _generation(self, host: str) -> int:
        return self.model.generations.get(host, 0) + self.bumps.get(host, 0)

    def claim_hosts(self, expected: Mapping[str, int], wait: bool = False
                    ) -> tuple[set[str], set[str], set[str]]:
        """As ClaimQueries.claim_hosts: (claimed, conflicts, held)."""
        self._pay()
        model = self.model
        if wait:
            while True:
                holders = {model.locks.get(host, self) for host in expected} - {self}
                if not holders:
                    break
                if self._reaches(holders):
                    raise Deadlock(f"sessions waiting for each other's hosts: {sorted(expected)}")
                model.waits_for[self] = holders
                model._waiting.append(greenlet.getcurrent())
                model.clock.park()
            model.waits_for.pop(self, None)
        claimed: set[str] = set()
        conflicts: set[str] = set()
        held: set[str] = set()
        for host, generation in expected.items():
            if model.locks.get(host, self) is not self:
                held.add(host)
            elif generation and host not in model.generations and host not in self.bumps:
                held.add(host)  # no row: ClaimQueries takes it for a row another transaction locks
            elif self._generation(host) == generation:
                claimed.add(host)
            else:
                conflicts.add(host)
        model.held += len(held)
        for host in claimed:
            model.locks[host] = self
            self.bumps[host] = self.bumps.get(host, 0) + 1
        return claimed, conflicts, held

    def _reaches(self, holders: set[Session]) -> bool:
        """Whether ``holders`` wait, directly or not, for this session."""
        seen, todo = set(), list(holders)
        while todo:
            session = todo.pop()
            if session is self:
                return True
            if session not in seen:
                seen.add(session)
                todo.extend(self.model.waits_for.get(session, ()))
        return False

    def read(self) -> None:
        """A read whose answer the simulation does not need (a batch's instance rows)."""
        self._pay()

    def host_generations(self, hosts: Iterable[str] | None = None) -> dict[str, int]:
        self._pay()
        if hosts is None:
            return {host: self._generation(host)
                    for host in set(self.model.generations) | set(self.bumps)}
        return {host: self._generation(host) for host in hosts}

    def instances_placed_since(self, hosts: Iterable[str] | None, since: datetime.datetime
                               ) -> list[dict[str, Any]]:
        """The instances placed on ``hosts`` (every one with None): all SCHEDULED here."""
        self._pay()
        placed = self.model.placed
        which = placed if hosts is None else hosts
        return [dict(row) for host in which for row in placed.get(host, ())]

    def commit(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        """Write ``rows`` (new instances, SCHEDULED on their ``host``) and the generations bumped;
        the locks go."""
        self._pay()
        model = self.model
        for row in rows:
            model.placed.setdefault(row["host"], []).append(row)
        for host, bumps in self.bumps.items():
            model.generations[host] = model.generations.get(host, 0) + bumps
        self._unlock()

    def rollback(self) -> None:
        """End the transaction writing nothing: its bumps undone, its locks gone."""
        self._unlock()

    def _unlock(self) -> None:
        model = self.model
        for host in self.bumps:
            del model.locks[host]
        if self.bumps:
            self.bumps = {}
            model._released()
