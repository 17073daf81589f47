"""Every option of the scheduler side, for oslo-config-generator and start-up."""

from scheduler import conf as berth_conf
from scheduler import filters, plugins, weighers


def plugin_modules():
    return [m for m in plugins.modules(filters) + plugins.modules(weighers) if hasattr(m, "list_opts")]


def register_plugin_opts(conf):
    for module in plugin_modules():
        module.register_opts(conf)


def list_opts():
    """(group, opts) pairs, one per group: plugins add their options to shared groups."""
    groups, merged = {}, {}
    for module in list(berth_conf.AREAS) + plugin_modules():
        for group, opts in module.list_opts():
            name = getattr(group, "name", group)
            if name not in groups or isinstance(groups[name], str):
                groups[name] = group
            merged.setdefault(name, []).extend(opts)
    return [(groups[name], opts) for name, opts in merged.items()]
