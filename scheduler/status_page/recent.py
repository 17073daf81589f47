"""What the status page remembers that nothing else keeps: the latest refusals and dead
letters, and each scaling group's last hour. In memory, bounded, lost at a restart."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable
from typing import Any

#: Refusals and dead letters the page lists.
KEPT = 50
#: How far back a scaling group's plot goes, and how many groups are plotted.
HISTORY_S = 3600.0
MAX_GROUPS = 200


class Recent:
    """The last ``KEPT`` of something, newest last, each with the wall time it was added."""

    def __init__(self, kept: int = KEPT) -> None:
        self._items: collections.deque[dict[str, Any]] = collections.deque(maxlen=kept)
        self._lock = threading.Lock()

    def add(self, **item: Any) -> None:
        with self._lock:
            self._items.append({"at": time.time(), **item})

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items)


class ScalingHistory:
    """Each scaling group's (time, members, desired, first metric's current and target)
    at every sync of the last hour, for at most ``max_groups`` groups: those that scaled
    last, then those synced last, then by name."""

    def __init__(self, window_s: float = HISTORY_S, max_groups: int = MAX_GROUPS) -> None:
        self._window = window_s
        self._max = max_groups
        self._points: dict[str, collections.deque[tuple[float, int, int, float | None, float | None]]] = {}
        self._scaled_at: dict[str, float] = {}
        self._synced_at: dict[str, float] = {}
        self._metric: dict[str, tuple[str, str]] = {}  # the first metric's (name, target type)
        self._lock = threading.Lock()

    def record(self, results: Iterable[Any], now: float | None = None) -> None:
        """Take a sync's results (scheduler.scaling.controller.SyncResult); only groups synced count."""
        now = time.time() if now is None else now
        with self._lock:
            for result in results:
                if result.outcome != "synced":
                    continue
                reading = result.metrics[0] if result.metrics else None
                current, target = (None, None) if reading is None else (reading.current, reading.target)
                point = (now, result.members or 0, result.desired or 0, current, target)
                self._points.setdefault(result.name, collections.deque()).append(point)
                if reading is not None:
                    self._metric[result.name] = (reading.name, reading.target_type)
                self._synced_at[result.name] = now
                if result.scale_event:
                    self._scaled_at[result.name] = now
            horizon = now - self._window
            for name in list(self._points):
                points = self._points[name]
                while points and points[0][0] < horizon:
                    points.popleft()
                if not points:
                    del self._points[name]
            if len(self._points) > self._max:
                self._points = {name: self._points[name] for name in self._ranked()[: self._max]}
            self._scaled_at = {n: t for n, t in self._scaled_at.items() if n in self._points}
            self._synced_at = {n: t for n, t in self._synced_at.items() if n in self._points}
            self._metric = {n: m for n, m in self._metric.items() if n in self._points}

    def _ranked(self) -> list[str]:
        return sorted(self._points, key=lambda n: (-self._scaled_at.get(n, 0.0), -self._synced_at[n], n))

    def groups(self) -> list[dict[str, Any]]:
        """[{name, points: [[t, members, desired, current, target], ...], metric: {name,
        target_type} or None}], the latest scaled first."""
        with self._lock:
            return [{"name": name, "points": [list(point) for point in self._points[name]],
                     "metric": _metric(self._metric.get(name))}
                    for name in self._ranked()]


def _metric(reading: tuple[str, str] | None) -> dict[str, str] | None:
    return None if reading is None else {"name": reading[0], "target_type": reading[1]}
