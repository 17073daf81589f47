"""Traits: qualitative facts about a host (``HW_CPU_X86_AVX2``, ``CUSTOM_SSD``) that a request
can require or forbid, with Nova's syntax.

A flavor says ``trait:NAME=required`` or ``trait:NAME=forbidden``; an image
property says ``trait:NAME=required`` (as in Nova, an image cannot forbid). A
trait is one of os-traits' standard names or ``CUSTOM_`` followed by capital
letters, digits and ``_``. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re

from berth_contract.errors import InvalidRequest
from berth_contract.resource_classes import NUMBERED

TRAIT = "trait:"
#: The trait an agent reports when its driver powers instances off and on and reboots them
#: (Capabilities.power_control, compute API 2.1): a scheduler casts stop, start and reboot only to
#: hosts that have it, as Nova exposes its drivers' capabilities as COMPUTE_* traits.
POWER_CONTROL = "CUSTOM_BERTH_POWER_CONTROL"
#: The trait an agent reports when its driver gives an instance a new flavor on the host it runs on
#: (Capabilities.resize_in_place): a scheduler resizes an instance in place only on a host that has it.
RESIZE_IN_PLACE = "CUSTOM_BERTH_RESIZE_IN_PLACE"
REQUIRED, FORBIDDEN = "required", "forbidden"
_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]{1,248}$")


@functools.cache
def _standard() -> frozenset[str]:
    import os_traits  # read when a trait is first checked: the command line seldom does

    return frozenset(os_traits.get_traits())


def is_trait(name: str) -> bool:
    return name in _standard() or bool(_CUSTOM.match(name))


def check_name(name: str, where: str) -> str:
    """``name`` if it is a trait; InvalidRequest otherwise."""
    if is_trait(name):
        return name
    raise InvalidRequest(f"{where}: {name!r} is not a trait: use a standard trait of os-traits "
                         "(HW_CPU_X86_AVX2, COMPUTE_...) or CUSTOM_ followed by capital letters, "
                         "digits and _")


def _granular(key: str) -> bool:
    return key.startswith("trait") and not key.startswith(TRAIT) and ":" in key


def of_flavor(extra_specs: dict, where: str = "flavor.extra_specs") -> tuple[frozenset, frozenset]:
    """(required, forbidden) traits a flavor's extra specs ask for."""
    required, forbidden = set(), set()
    for key, value in extra_specs.items():
        if _granular(key):
            raise InvalidRequest(f"{where}[{key}]: {NUMBERED} in Berth; use trait:NAME=required")
        if not key.startswith(TRAIT):
            continue
        name = check_name(key[len(TRAIT):], f"{where}[{key}]")
        if value == REQUIRED:
            required.add(name)
        elif value == FORBIDDEN:
            forbidden.add(name)
        else:
            raise InvalidRequest(f"{where}[{key}]: must be required or forbidden, got {str(value)[:40]!r}")
    return frozenset(required), frozenset(forbidden)


def of_image(properties: dict, where: str = "image.properties") -> frozenset:
    """The traits an image's properties require."""
    required = set()
    for key, value in properties.items():
        if not key.startswith(TRAIT):
            continue
        name = check_name(key[len(TRAIT):], f"{where}[{key}]")
        if value != REQUIRED:
            raise InvalidRequest(f"{where}[{key}]: an image can only require a trait (as in Nova), "
                                 f"got {str(value)[:40]!r}")
        required.add(name)
    return frozenset(required)


def of_aggregate(metadata: dict, where: str = "aggregate metadata") -> frozenset:
    """The traits an aggregate's metadata requires of the requests its hosts take
    (``trait:NAME=required``: Nova's isolated aggregates)."""
    return of_image(metadata, where)
