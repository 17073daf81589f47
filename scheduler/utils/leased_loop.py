"""Periodic work held by lease, in a thread of its own: what the scaling controller
(scheduler.scaling.service.ScalingLoop) and the jobs (scheduler.moves.jobs.runner.JobLoop) run.

``look()`` runs at once, then every ``period_s`` (a slow look delays the next, never runs
beside it); on stop, once the thread has ended, ``release()`` gives the leases up so that
another scheduler takes the work over at its next look instead of when the leases expire.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

LOG = logging.getLogger(__name__)


class LeasedLoop:
    def __init__(self, look: Callable[[], object], release: Callable[[], int], period_s: float, name: str,
                 what: str, expires_s: float | None = None) -> None:
        """``name``: the thread's; ``what``: what the leases are of, for the log ("scaling
        groups"); ``expires_s``: how long a lease not given up still holds (``period_s``)."""
        self._look, self._release = look, release
        self.period_s = period_s
        self._name, self._what = name, what
        self._expires_s = period_s if expires_s is None else expires_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        try:
            released = self._release()
        except Exception:
            LOG.exception("Giving up the leases of the %s failed; they expire in %g s", self._what,
                          self._expires_s)
            return
        if released:
            LOG.info("Gave up the leases of %d %s", released, self._what)

    def _run(self) -> None:
        delay = 0.0
        while not self._stopping.wait(delay):
            started = time.monotonic()
            self._look()
            delay = max(0.0, self.period_s - (time.monotonic() - started))
