"""Sections and options of the loaded configuration files that no Berth program reads.

oslo.config ignores a name it has no option for: ``fake_memroy_mb`` in [compute_agent], or a
whole ``[compute_agnet]``, would leave the defaults in force without a word. Every program
checks its files at start against every option Berth has (the scheduler's, its plugins', the
compute agent's and its drivers', oslo.log's: what berth.conf.sample lists), not only its own,
so that one file serves them all; it warns of each name it does not know, with the nearest known
one, and refuses to start on them with ``strict_config``.

Berth's own names are read from scheduler.process.known_options, a table written from the
declarations (tools/write-known-options): importing the scheduler's option modules, its policy
and plugins with them, cost a compute agent whose file holds the scheduler's sections about a
second of CPU at each start. The
declarations themselves are imported only for a name the table does not have while another
distribution installs a filter, weigher or driver, whose options the table cannot list.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import os
from importlib.metadata import entry_points

from oslo_config import cfg

opts = [
    cfg.BoolOpt(
        "strict_config",
        default=False,
        help="Refuse to start when a configuration file has a section or an option that Berth "
        "does not know (a misspelt name, an option under the wrong section), instead of warning "
        "of it and going on without it.",
    ),
]

DEFAULT = "DEFAULT"


def list_opts():
    return [(None, opts)]


@dataclasses.dataclass(frozen=True)
class Unknown:
    """A section, or an option of a section, of ``path`` that Berth does not know."""

    path: str
    section: str
    option: str | None = None  # None: the whole section
    nearest: str | None = None  # "[group] option", or "[group]"
    options: int = 0  # of an unknown section: how many it sets

    def said(self, ignored=True):
        """One line: the file, the name, the nearest known one; ``ignored``: that it is."""
        options = f"{self.options} option{'s' if self.options != 1 else ''}"
        if self.option is None:
            what = f"unknown section [{self.section}]" + (f", ignored with its {options}" if ignored
                                                          else f" ({options})")
        else:
            what = f"unknown option [{self.section}] {self.option}" + (", ignored" if ignored else "")
        hint = (f"did you mean {self.nearest}?" if self.nearest
                else "etc/berth/berth.conf.sample lists every section and option")
        return f"{self.path}: {what}: {hint}"

    __str__ = said


def _section(name):
    """How oslo.config matches a file's section to a group: DEFAULT as is, the others in any case."""
    return DEFAULT if name in (None, DEFAULT) else name.lower()


def loaded_files(conf):
    """The files ``conf`` read, in its order: config_file's, then each config_dir's ``*.conf``."""
    files = list(conf.config_file or ())
    dirs = conf.config_dir
    for config_dir in [dirs] if isinstance(dirs, str) else list(dirs or ()):
        files += sorted(glob.glob(os.path.join(config_dir, "*.conf")))
    return [path for path in files if os.path.isfile(path)]


def _registered(conf):
    """{group: {option names}} of what ``conf`` has registered, [DEFAULT] included."""
    known = {DEFAULT: set()}
    for name in conf:
        try:
            value = getattr(conf, name)
        except Exception:  # a value refused later on: its name is known all the same
            known[DEFAULT].add(name)
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            known.setdefault(_section(name), set()).update(value)
        else:
            known[DEFAULT].add(name)
    for driver_section in conf.config_source or ():  # oslo.config's own [<source>] sections
        known.setdefault(_section(driver_section), set()).update(("driver", "uri", "ca_path",
                                                                  "client_cert", "client_key"))
    return known


def _agent_options():
    from compute_agent import conf as agent_conf

    return agent_conf.list_opts()


def _scheduler_options():
    from scheduler.conf import opts as scheduler_opts

    return scheduler_opts.list_opts()


def _command_line_options():
    """The commands' own options, which a file's [DEFAULT] may set too (``agents = 3``)."""
    from compute_agent.cmd import agent
    from scheduler.cmd import all_in_one, cli

    return [(None, [*agent.cli_opts, *all_in_one.cli_opts, *cli.cli_opts])]


def declared():
    """{section: {names}} of every option the installed Berth declares, its plugins' and
    drivers' included, as oslo-config-generator reads them (berth.conf.sample), then the
    commands' own; oslo.log's aside. Imports the services: known_options is written from it."""
    known = {}
    for listing in (_agent_options, _scheduler_options, _command_line_options):
        _add(known, listing())
    return known


def _oslo_log_names():
    from oslo_log import _options  # what oslo.log's oslo.config.opts entry point lists

    return _add({}, _options.list_opts())


def _berth_names():
    from scheduler.process import known_options

    return known_options.SECTIONS


#: The entry point groups through which another distribution adds plugins, and with them options.
PLUGIN_GROUPS = ("berth.scheduler.filters", "berth.scheduler.weighers", "berth.compute.drivers")
#: The packages of Berth's own plugins and drivers, whose options known_options lists.
OWN_PACKAGES = ("scheduler", "compute_agent")


def other_distributions_plugins():
    """The entry points of PLUGIN_GROUPS that name a module outside Berth's own packages."""
    found = entry_points()
    return [ep for group in PLUGIN_GROUPS for ep in found.select(group=group)
            if ep.module.partition(".")[0] not in OWN_PACKAGES]


def _other_distributions_names():
    """declared() when another distribution installs a plugin; else nothing it would add."""
    return declared() if other_distributions_plugins() else {}


#: Where every option of Berth's is listed, each a callable returning {section: names}: the
#: quickest to read first. oslo.log is read live, its names being those of the installed version.
EVERY_OPTION = (_oslo_log_names, _berth_names, _other_distributions_names)


def _add(known, pairs):
    """Add to ``known`` ({section: {names}}) the options of ``pairs`` ((group, opts)), their
    old names included."""
    for group, group_opts in pairs:
        name = _section(getattr(group, "name", group))
        names = known.setdefault(name, set())
        for opt in group_opts:
            names.update((opt.name, opt.dest))
            for old in opt.deprecated_opts:
                known.setdefault(_section(old.group or name), set()).add(old.name or opt.dest)
    return known


def _nearest(word, candidates):
    found = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _sections_of(path):
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


#: How near a name must be to one the command line reads to be taken for its misspelling.
NEAR_OWN = 0.8


def find(conf, listings=EVERY_OPTION, own_only=False):
    """The Unknown names of the files ``conf`` loaded, file by file, in the files' order.

    Names are looked up in what ``conf`` registered, then in each of ``listings`` (callables
    returning ``{section: names}``), read only while some name is still unknown.

    ``own_only`` (the ``berth`` command line, which registers only what it reads so as to start
    quickly): only names near one ``conf`` registered, in a section it registered, are judged;
    the others, likely a daemon's, are the daemons' to judge."""
    known = _registered(conf)
    read = [(path, section, values) for path in loaded_files(conf)
            for section, values in _sections_of(path).items()]
    if own_only:
        read = [(path, section, [name for name in values if _near_own(known, section, name)])
                for path, section, values in read if _section(section) in known]
        read = [(path, section, values) for path, section, values in read if values]
    listings = list(listings)
    while listings and any(_unknown_in(known, section, values) for _, section, values in read):
        for section, names in listings.pop(0)().items():
            known.setdefault(section, set()).update(names)
    return [unknown for path, section, values in read
            for unknown in _check_section(path, section, values, known)]


def _near_own(known, section, name):
    names = known[_section(section)]
    return name not in names and bool(difflib.get_close_matches(name, names, n=1, cutoff=NEAR_OWN))


def _unknown_in(known, section, values):
    group = _section(section)
    return group not in known or any(name not in known[group] for name in values)


def _check_section(path, section, values, known):
    group = _section(section)
    if group not in known:
        guess = _nearest(group, [name for name in known if name != DEFAULT])
        return [Unknown(path, section, nearest=f"[{guess}]" if guess else None, options=len(values))]
    found = []
    for option in values:
        if option in known[group]:
            continue
        elsewhere = sorted(name for name, names in known.items() if option in names)  # wrong section?
        guess = _nearest(option, known[group])
        if elsewhere:
            nearest = f"[{elsewhere[0]}] {option}"
        else:
            nearest = f"[{section}] {guess}" if guess else None
        found.append(Unknown(path, section, option, nearest))
    return found
