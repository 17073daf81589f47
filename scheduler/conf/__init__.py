"""Configuration options of the Berth services, one module per area.

Every module exposes ``list_opts()``, and ``register_opts(conf)`` only when
it registers more than those (:func:`groups.register_module`); options that
only one filter or weigher reads live in that plugin's module instead and
are collected by :mod:`scheduler.conf.opts`.

An option lives beside the code that reads it: this package's modules hold the groups
several parts read, and AREAS names the others' modules too (the database's fast paths,
the roles, the status page...). Those are imported when the options are registered or
listed, never with this package: importing scheduler.conf imports no service
(tests/unit/test_architecture.py). A compute agent registers AGENT_AREAS alone, the options
it reads: none of those imports the scheduler's database, planning or services.
"""

import importlib
from types import ModuleType

from oslo_config import cfg

from scheduler.conf import (  # noqa: F401 (this package's own areas, as its attributes)
    database,
    default,
    filter_scheduler,
    groups,
    messaging,
    scaling,
    scheduler,
    upgrade_levels,
)

#: The modules that declare the options every Berth service registers, in the order the
#: sample configuration lists them.
AREAS = (
    "scheduler.conf.default",
    "scheduler.process.unknown_config",
    "scheduler.conf.database",
    "scheduler.db.fastpaths",
    "scheduler.conf.messaging",
    "scheduler.rpc.amqp_fast.options",
    "scheduler.rpc.access",
    "scheduler.conf.upgrade_levels",
    "scheduler.conf.scheduler",
    "scheduler.fleet.report_digests",
    "scheduler.conf.filter_scheduler",
    "scheduler.moves.planner",
    "scheduler.planning.fragmentation",
    "scheduler.moves.expiry",
    "scheduler.moves.jobs.options",
    "scheduler.conf.scaling",
    "scheduler.telemetry.endpoint",
    "scheduler.telemetry.scheduler_metrics",
    "scheduler.status_page.app",
)

#: The modules of AREAS that declare what a compute agent reads besides [compute_agent] and its
#: driver's group (compute_agent.conf): [DEFAULT] (host, state_path, logging, strict_config,
#: the transport), messaging, the roles, the upgrade levels and its metrics' endpoint.
AGENT_AREAS = (
    "scheduler.conf.default",
    "scheduler.process.unknown_config",
    "scheduler.conf.messaging",
    "scheduler.rpc.amqp_fast.options",
    "scheduler.rpc.access",
    "scheduler.conf.upgrade_levels",
    "scheduler.telemetry.endpoint",
)

#: What the ``berth`` command line reads: the agent's areas but its metrics' endpoint. Importing
#: no service, database or policy module keeps a listing's start short; a service's options in a
#: file it shares are left unread (and unjudged: the daemons say their misspellings).
CLI_AREAS = tuple(area for area in AGENT_AREAS if area != "scheduler.telemetry.endpoint")


def areas(names: tuple[str, ...] = AREAS) -> list[ModuleType]:
    """The modules of ``names`` (AREAS by default), imported."""
    return [importlib.import_module(name) for name in names]


def register_opts(conf, names: tuple[str, ...] = AREAS):
    """Register the options of the areas ``names``: every Berth service's by default."""
    for area in areas(names):
        groups.register_module(conf, area)


def new_conf():
    """A fresh ConfigOpts with every shared option registered (tests, tools)."""
    conf = cfg.ConfigOpts()
    register_opts(conf)
    return conf
