"""What a per-instance metric sample may be: the scaling groups' member metrics.

Two sources feed them (the ``instance_metrics`` table keeps the last sample of each
instance and name):

* the agents measure ``cpu`` (vCPUs used) and ``memory`` (MB used) of their instances
  and send them in each report as ``instance_usage: {uuid: {"cpu": ..., "memory": ...}}``
  (Kubernetes' resource metrics);
* anything else pushes a custom metric of an instance (``push_instance_metrics``: requests
  per second, queue depth...), Kubernetes' Pods metrics. Such a name is
  ``[a-z][a-z0-9_.-]{0,63}``, and never ``cpu`` or ``memory``, which only agents measure.

A value is a finite number >= 0. Pure: no I/O.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TypeGuard

from berth_contract.errors import InvalidRequest
from berth_contract.wire_numbers import is_finite

LOG = logging.getLogger(__name__)

#: What the agents measure of each instance (a report's ``instance_usage``): cpu in vCPUs used,
#: memory in MB used.
AGENT_METRICS = ("cpu", "memory")
#: The ``source`` of a stored sample.
AGENT = "agent"
PUSHED = "pushed"
SOURCES = (AGENT, PUSHED)

NAME_PATTERN = "[a-z][a-z0-9_.-]{0,63}"
_NAME = re.compile(NAME_PATTERN)
MAX_NAME = 64
#: Metrics one push may carry.
MAX_PUSHED = 32
#: Bad entries of one report its warning names; the rest are counted.
SHOWN = 5


def is_value(value: object) -> TypeGuard[int | float]:
    """A finite int or float (not a bool), at least 0."""
    return is_finite(value) and value >= 0


def check_pushed_name(name: object, where: str) -> str:
    """``name`` if a pushed metric may have it; InvalidRequest saying why not."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest(f"{where}: metric name {str(name)[:80]!r} must match {NAME_PATTERN} "
                             "(a lowercase letter, then up to 63 lowercase letters, digits, '_', '.', '-')")
    if name in AGENT_METRICS:
        raise InvalidRequest(f"{where}: metric {name} is measured by the compute agents; push another name")
    return name


def check_pushed_value(name: str, value: object, where: str) -> float:
    if not is_value(value):
        raise InvalidRequest(f"{where}: metric {name} must be a finite number >= 0, got {value!r}"[:300])
    return float(value)


def _shown(value: object) -> str:
    return repr(value)[:60]


def _clean_entry(uuid: object, usage: object, held: frozenset[str], problems: list[str]
                 ) -> dict[str, float] | None:
    """The valid samples of one instance's entry; what is wrong is appended to ``problems``."""
    if not isinstance(uuid, str) or uuid not in held:
        problems.append(f"{_shown(uuid)}: not an instance of the report's instance_uuids")
        return None
    if not isinstance(usage, dict):
        problems.append(f"{uuid}: must be an object {{cpu, memory}}, got {_shown(usage)}")
        return None
    samples = {}
    for name, value in usage.items():
        if name not in AGENT_METRICS:
            problems.append(f"{uuid}: unknown metric {_shown(name)} (an agent measures "
                            f"{' and '.join(AGENT_METRICS)})")
        elif not is_value(value):
            problems.append(f"{uuid}: {name} must be a finite number >= 0, got {_shown(value)}")
        else:
            samples[name] = float(value)
    return samples or None


def agent_samples(host: str, usage: object, uuids: Sequence[str]) -> dict[str, dict[str, float]] | None:
    """The valid entries of a report's ``instance_usage`` (None if there are none), the report
    listing ``uuids``: a bad entry (an instance the report does not list, a value that is not a
    finite number >= 0, a name other than cpu and memory) is dropped with one warning per report
    naming the host and the entries."""
    problems: list[str] = []
    cleaned: dict[str, dict[str, float]] = {}
    if not isinstance(usage, dict):
        problems.append(f"must be an object {{instance uuid: {{cpu, memory}}}}, got {_shown(usage)}")
    else:
        held = frozenset(uuids)
        for uuid, entry in usage.items():
            samples = _clean_entry(uuid, entry, held, problems)
            if samples is not None:
                cleaned[uuid] = samples
    if problems:
        more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        LOG.warning("Report of host %s: instance_usage entries dropped, the rest of the report kept: %s%s",
                    host, "; ".join(problems[:SHOWN]), more)
    return cleaned or None

