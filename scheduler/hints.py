"""Which filter or weigher honours each scheduler hint, zone and server group policy.

A plugin says what it reads: ``reads_hints`` (hint keys) and ``group_policies``
(the server group policies it enforces). A request asking for something that
no enabled plugin honours is refused, naming the plugin to enable, rather than
placed as if it had not asked (Nova places it silently).
"""

from scheduler import server_groups

#: The zone can come from the request's instance_properties as well as from this hint.
ZONE = "availability_zone"
#: Resolved by the scheduler itself (scheduler.lookups): what is enforced is the group's policy.
GROUP = "group"


def _names(plugins, attribute, value):
    return [p.__name__ if isinstance(p, type) else p.name
            for p in plugins if value in (getattr(p, attribute, None) or ())]


def _where(plugin_class, installed_filters):
    return ("[filter_scheduler] enabled_filters" if plugin_class in installed_filters
            else "[filter_scheduler] weighers")


def unhonoured(spec, enabled, installed_filters, installed_weighers):
    """Why the ``enabled`` plugins cannot honour ``spec`` as it asks, or None.

    ``installed_*``: {name: class} of every plugin installed, to name the one to
    enable. A plugin's ``check_hints(spec)``, if it has one, may also refuse what
    it cannot read (a malformed query)."""
    installed = {**installed_weighers, **installed_filters}
    asked = [key for key in spec.scheduler_hints if key != GROUP]
    if spec.availability_zone and ZONE not in asked:
        asked.append(ZONE)
    for key in asked:
        readers = _names(enabled, "reads_hints", key)
        if readers:
            continue
        what = "the availability zone" if key == ZONE else f"scheduler hint {key}"
        candidates = _names(installed.values(), "reads_hints", key)
        if not candidates:
            return f"no installed filter or weigher reads {what}; leave it out"
        cls = installed[candidates[0]]
        return (f"{what} is honoured by {' or '.join(candidates)}, which is not enabled: add it to "
                f"{_where(cls, installed_filters.values())}, or leave the hint out")
    policy = server_groups.policy(spec)
    if policy is not None and not _names(enabled, "group_policies", policy):
        candidates = _names(installed.values(), "group_policies", policy)
        group = (spec.group or {}).get("uuid", "")
        if not candidates:
            return f"server group {group} has policy {policy}, which no installed filter or weigher enforces"
        cls = installed[candidates[0]]
        return (f"server group {group} has policy {policy}, which {candidates[0]} enforces; it is not "
                f"enabled: add it to {_where(cls, installed_filters.values())}")
    for plugin in enabled:
        check = getattr(plugin, "check_hints", None)
        if check is not None:
            try:
                check(spec)
            except ValueError as exc:
                return f"{plugin.name}: {exc}"
    return None
