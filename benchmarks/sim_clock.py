"""A simulated clock whose actors are greenlets: each runs Berth's own code until it spends
simulated time (``wait``) or has nothing to do (``park``), and the clock resumes the next one
in time order. One actor runs at a time, so a run is the same for the same inputs."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

import greenlet


class Stalled(RuntimeError):
    """Nothing is left to happen while the run waits for more: actors wait for each other."""


class SimClock:
    def __init__(self) -> None:
        self.now = 0.0
        self._events: list[tuple[float, int, Callable[[], object]]] = []
        self._order = itertools.count()
        self._main = greenlet.getcurrent()

    def at(self, when: float, action: Callable[[], object]) -> None:
        """Run ``action`` (in the clock's own greenlet) at simulated time ``when``."""
        heapq.heappush(self._events, (max(when, self.now), next(self._order), action))

    def spawn(self, run: Callable[[], object]) -> greenlet.greenlet:
        """An actor running ``run``, started now."""
        actor = greenlet.greenlet(run, parent=self._main)
        self.at(self.now, actor.switch)
        return actor

    def wait(self, seconds: float) -> None:
        """From an actor: let ``seconds`` of simulated time pass."""
        self.at(self.now + max(seconds, 0.0), greenlet.getcurrent().switch)
        self._main.switch()

    def park(self) -> None:
        """From an actor: sleep until something calls ``wake`` with it."""
        self._main.switch()

    def wake(self, actor: greenlet.greenlet) -> None:
        self.at(self.now, actor.switch)

    def run(self, done: Callable[[], bool]) -> None:
        """Play the events in time order until ``done()``; Stalled if they run out first."""
        while not done():
            if not self._events:
                raise Stalled(f"nothing left to happen at {self.now:.3f} s")
            self.now, _, action = heapq.heappop(self._events)
            action()
