"""Benchmarks of the scheduler: ``python -m benchmarks --help``.

Run from a checkout: Berth does not install them.
"""
