"""Every option of the scheduler side, for oslo-config-generator and start-up.

A filter's or weigher's options live in the module that defines its class,
Berth's or an entry point's alike: the module's ``list_opts()`` returns
``[(group, [opt, ...]), ...]``; Berth registers them before any plugin is
built (with the module's ``register_opts(conf)`` when it has one, else the
pairs of ``list_opts``), and oslo-config-generator lists them under the
``berth.scheduler`` namespace. Options of every installed plugin are
registered, enabled or not, so that a config file may set them all.

The plugins are the policy layer's, above the options: they are imported when their options
are listed or registered, not with this module.
"""

from __future__ import annotations

from types import ModuleType

from oslo_config import cfg

from scheduler import conf as berth_conf
from scheduler.conf import groups


def plugin_modules() -> list[ModuleType]:
    """The modules of every installed filter and weigher that declare options."""
    from scheduler.policy import filters, plugins, weighers

    return plugins.option_modules([*filters.all_filters().values(), *weighers.all_weighers().values()])


def register_plugin_opts(conf: cfg.ConfigOpts) -> None:
    for module in plugin_modules():
        groups.register_module(conf, module)


def list_opts() -> list[tuple[str | cfg.OptGroup, list[cfg.Opt]]]:
    """(group, opts) pairs, one per group: plugins add their options to shared groups."""
    groups: dict[str, str | cfg.OptGroup] = {}
    merged: dict[str, list[cfg.Opt]] = {}
    for module in berth_conf.areas() + plugin_modules():
        for group, opts in module.list_opts():
            name = getattr(group, "name", group)
            if name not in groups or isinstance(groups[name], str):
                groups[name] = group
            merged.setdefault(name, []).extend(opts)
    return [(groups[name], opts) for name, opts in merged.items()]
