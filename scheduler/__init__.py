"""Berth's scheduler daemon and the parts every Berth service shares."""

from scheduler import concurrency  # noqa: F401  (must patch before anything else loads)
