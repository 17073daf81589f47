"""Fixtures every test may ask for."""

pytest_plugins = ["tests.fixtures"]
