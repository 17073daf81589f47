"""RPC API versions, read as oslo.messaging reads them.

An API (the methods of one endpoint, or of a few that change together) has a version
``MAJOR.MINOR``. A minor version only adds to the one before it (a method, an optional
argument), so a server of ``X.Y`` serves every ``X.Z`` with ``Z <= Y``; a new major
version is a break. Every message names the version it needs (its ``"version"``: 1.0
when it has none, as oslo reads it); a client sends the oldest version that carries
what it sends, and a version cap (``[upgrade_levels]``) keeps it below what the
servers of an older release serve.
"""

from __future__ import annotations

import dataclasses
import functools
import re

#: What a message without a version asks for, and an endpoint without an API serves.
DEFAULT = "1.0"

_VERSION = re.compile(r"(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?\Z")


def parse(version: object) -> tuple[int, int, int]:
    """(major, minor, revision) of ``MAJOR.MINOR`` or ``MAJOR.MINOR.REVISION``; ValueError otherwise."""
    if not isinstance(version, str):
        raise ValueError(_not_a_version(version))
    return _parse(version)


@functools.lru_cache(maxsize=256)
def _parse(version: str) -> tuple[int, int, int]:
    # Every message names its version: each distinct text is read once (a refusal is not kept).
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(_not_a_version(version))
    major, minor, revision = match.groups()
    return int(major), int(minor), int(revision or 0)


def _not_a_version(version: object) -> str:
    shown = repr(version) if len(repr(version)) <= 40 else repr(version)[:40] + "..."
    return f"{shown} is not a version: give MAJOR.MINOR, e.g. {DEFAULT}"


@functools.lru_cache(maxsize=256)
def is_compatible(served: str, requested: str) -> bool:
    """oslo's version_is_compatible: whether what serves ``served`` (or a cap of it)
    serves a message of ``requested``: the same major version, nothing newer."""
    have, want = parse(served), parse(requested)
    return want[0] == have[0] and want[1:] <= have[1:]


@dataclasses.dataclass(frozen=True)
class API:
    """An RPC API: its name (the ``[upgrade_levels]`` option that caps what its clients
    send) and its history, ``((version, what it added), ...)`` oldest first, as Nova's
    rpcapi modules keep it; the newest version is what this release serves and sends.
    A history may run over a new major version (a break): an endpoint then serves the
    newest, another one the previous major version (:meth:`at`) for a rolling upgrade."""

    name: str
    history: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.history:
            raise ValueError(f"the {self.name} API has no version")
        numbers = [parse(version) for version, _ in self.history]
        if numbers != sorted(set(numbers)):
            raise ValueError(f"the {self.name} API's versions must grow")

    @property
    def version(self) -> str:
        return self.history[-1][0]

    def serves(self, requested: str) -> bool:
        return is_compatible(self.version, requested)

    @property
    def majors(self) -> tuple[int, ...]:
        """The major versions of its history, oldest first."""
        return tuple(sorted({parse(version)[0] for version, _ in self.history}))

    def at(self, version: str) -> API:
        """This API as the release whose newest version was ``version`` had it (of that major
        version only)."""
        kept = tuple(entry for entry in self.history if is_compatible(version, entry[0]))
        return dataclasses.replace(self, history=kept)
