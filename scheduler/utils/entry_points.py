"""Classes that distributions install under entry points: Berth's filters and weighers
(scheduler.policy.plugins) and the agents' compute drivers (compute_agent.driver.installed)
are loaded, and said, alike."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import TypeVar

P = TypeVar("P")


def describe(ep: EntryPoint) -> str:
    """``entry point 'X = pkg.mod:X' (group) of distribution D 1.0``."""
    dist = getattr(ep, "dist", None)
    owner = f" of distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}' ({ep.group}){owner}"


#: Where the plugin base classes lived before the policy layer had a package of its own.
MOVED = {"scheduler.filters": "scheduler.policy.filters", "scheduler.weighers": "scheduler.policy.weighers"}


def moved_hint(exc: Exception) -> str:
    """What to change in a plugin written for the old place of the base classes."""
    if not isinstance(exc, ImportError):
        return ""
    text = str(exc)
    for old, new in MOVED.items():
        package, leaf = old.rsplit(".", 1)
        if f"'{old}'" in text or f"'{leaf}' from '{package}'" in text:
            return f" ({old} is now {new}: import the base class from there)"
    return ""


def load_class(ep: EntryPoint, base: type[P]) -> type[P] | str:
    """The class entry point ``ep`` names, if it imports and is a subclass of ``base``; else why not."""
    try:
        loaded = ep.load()
    except Exception as exc:  # a plugin's import may fail any way
        return f"it fails to import: {type(exc).__name__}: {exc}{moved_hint(exc)}"
    if isinstance(loaded, type) and issubclass(loaded, base):
        return loaded
    return f"{loaded!r} is not a subclass of {base.__module__}.{base.__qualname__}"
