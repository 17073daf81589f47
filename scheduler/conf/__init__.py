"""Configuration options of the Berth services, one module per area.

Every module exposes ``list_opts()``, and ``register_opts(conf)`` only when
it registers more than those (:func:`groups.register_module`); options that
only one filter or weigher reads live in that plugin's module instead and
are collected by :mod:`scheduler.conf.opts`.

An option lives beside the code that reads it: this package's modules hold the groups
several parts read, and AREAS names the others' modules too (the database's fast paths,
the roles, the status page...). Those are imported when the options are registered or
listed, never with this package: importing scheduler.conf imports no service
(tests/unit/test_architecture.py).
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
    "scheduler.utils.log_lines",
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


def areas() -> list[ModuleType]:
    """The modules of AREAS, imported."""
    return [importlib.import_module(name) for name in AREAS]


def register_opts(conf):
    for area in areas():
        groups.register_module(conf, area)


def new_conf():
    """A fresh ConfigOpts with every shared option registered (tests, tools)."""
    conf = cfg.ConfigOpts()
    register_opts(conf)
    return conf
