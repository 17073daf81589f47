"""Berth's compute agent: claims and builds the instances the scheduler sends."""

from scheduler import concurrency  # noqa: F401  (must patch before anything else loads)
