"""The version ranges of the libraries whose private names Berth's fast paths use (py-amqp's,
TESTED_AMQP), each checked against its range. setup.cfg requires only each range's lower bound,
so that distributions can package Berth beside newer releases; a fast path is taken only with
a release in its range, and with any other the library's public API.

The ranges are read with ``packaging`` (PEP 440), as pip reads a requirement's: a pre-release
of the release above a range is outside it."""

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def admits(pin: str, version: str) -> bool:
    """Whether the release ``version`` (``"5.4.0"``) is in ``pin`` (``">=5.2,<5.5"``, as a requirement
    writes it); False for a text that is no version."""
    try:
        return SpecifierSet(pin).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
