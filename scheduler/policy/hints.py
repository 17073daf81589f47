"""Which filter or weigher honours each scheduler hint, zone and server group policy.

A plugin says what it reads: ``reads_hints`` (hint keys) and ``group_policies``
(the server group policies it enforces). A request asking for something that
no enabled plugin honours is refused, naming the plugin to enable, rather than
placed as if it had not asked (Nova places it silently). So is one whose flavor extra
specs or image properties no enabled filter reads (scheduler.policy.extra_specs).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from berth_contract.request_spec import RequestSpec
from scheduler.policy import extra_specs, server_groups
from scheduler.policy.filters import BaseHostFilter
from scheduler.policy.weighers import BaseHostWeigher

Plugin = BaseHostFilter | BaseHostWeigher
PluginClass = type[BaseHostFilter] | type[BaseHostWeigher]

#: The zone can come from the request's instance_properties as well as from this hint.
ZONE = "availability_zone"
#: Resolved by the scheduler itself (scheduler.planning.lookups): what is enforced is the group's policy.
GROUP = "group"


def _name(plugin: Plugin | PluginClass) -> str:
    return plugin.__name__ if isinstance(plugin, type) else plugin.name


def _reading(plugins: Iterable[Plugin | PluginClass], key: str) -> list[str]:
    """The names of the ``plugins`` that read scheduler hint ``key``."""
    return [_name(p) for p in plugins if key in p.reads_hints]


def _enforcing(plugins: Iterable[Plugin | PluginClass], policy: str) -> list[str]:
    """The names of the ``plugins`` that enforce server group policy ``policy``."""
    return [_name(p) for p in plugins if policy in p.group_policies]


def _where(plugin_class, installed_filters):
    return ("[filter_scheduler] enabled_filters" if plugin_class in installed_filters
            else "[filter_scheduler] weighers")


def unhonoured(spec: RequestSpec, enabled: Iterable[Plugin],
               installed_filters: dict[str, type[BaseHostFilter]],
               installed_weighers: dict[str, type[BaseHostWeigher]]) -> str | None:
    """Why the ``enabled`` plugins cannot honour ``spec`` as it asks, or None.

    ``installed_*``: {name: class} of every plugin installed, to name the one to
    enable. Each enabled plugin's ``check_hints(spec)`` may also refuse what it
    cannot read (a malformed query)."""
    enabled = list(enabled)
    installed: dict[str, PluginClass] = {**installed_weighers, **installed_filters}
    asked = [key for key in spec.scheduler_hints if key != GROUP]
    if spec.availability_zone and ZONE not in asked:
        asked.append(ZONE)
    for key in asked:
        readers = _reading(enabled, key)
        if readers:
            continue
        what = "the availability zone" if key == ZONE else f"scheduler hint {key}"
        candidates = _reading(installed.values(), key)
        if not candidates:
            read = sorted({hint for plugin in installed.values() for hint in plugin.reads_hints})
            near = difflib.get_close_matches(key, read, n=1, cutoff=0.7) if key != ZONE else []
            hint = f": did you mean {near[0]}?" if near else "; leave it out"
            return f"no installed filter or weigher reads {what}{hint}"
        cls = installed[candidates[0]]
        return (f"{what} is honoured by {' or '.join(candidates)}, which is not enabled: add it to "
                f"{_where(cls, installed_filters.values())}, or leave the hint out")
    policy = server_groups.policy(spec)
    if policy is not None and not _enforcing(enabled, policy):
        candidates = _enforcing(installed.values(), policy)
        group = (spec.group or {}).get("uuid", "")
        if not candidates:
            return f"server group {group} has policy {policy}, which no installed filter or weigher enforces"
        cls = installed[candidates[0]]
        return (f"server group {group} has policy {policy}, which {candidates[0]} enforces; it is not "
                f"enabled: add it to {_where(cls, installed_filters.values())}")
    why = extra_specs.unread(spec, enabled, installed_filters)
    if why is not None:
        return why
    for plugin in enabled:
        try:
            plugin.check_hints(spec)
        except ValueError as exc:
            return f"{plugin.name}: {exc}"
    return None
