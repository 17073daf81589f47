"""Benchmarks of the scheduler: ``python -m scheduler.bench --help``."""
