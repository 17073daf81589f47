"""Berth's version, as installed."""

import functools
import importlib.metadata


@functools.cache
def version():
    """Berth's version, as installed (``--version`` on every command prints it)."""
    try:
        return importlib.metadata.version("berth")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"
