"""The version ranges of the libraries whose private names Berth's fast paths use (py-amqp,
SQLAlchemy, oslo.log). setup.cfg pins each library to its range, and a fast path is taken
only with a release of it: an install that ignored the pin falls back to the public API.

The ranges are read with ``packaging`` (PEP 440), as pip reads setup.cfg's: a pre-release
of the release above a range is outside it."""

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def admits(pin: str, version: str) -> bool:
    """Whether the release ``version`` (``"5.4.0"``) is in ``pin`` (``">=5.2,<5.5"``, as setup.cfg
    writes it); False for a text that is no version."""
    try:
        return SpecifierSet(pin).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
