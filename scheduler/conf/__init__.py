"""Configuration options of the Berth services, one module per area.

Every module exposes ``list_opts()``, and ``register_opts(conf)`` only when
it registers more than those (:func:`groups.register_module`); options that
only one filter or weigher reads live in that plugin's module instead and
are collected by :mod:`scheduler.conf.opts`.
"""

from oslo_config import cfg

from scheduler.conf import (
    database,
    default,
    filter_scheduler,
    groups,
    messaging,
    scaling,
    scheduler,
    upgrade_levels,
)
from scheduler.db import fastpaths as db_fastpaths
from scheduler.fleet import report_digests
from scheduler.jobs import options as jobs
from scheduler.moves import expiry as move_expiry
from scheduler.planning import fragmentation as planning_fragmentation
from scheduler.planning import moves as planning_moves
from scheduler.rpc import access as roles
from scheduler.rpc.amqp_fast import options as amqp_fast
from scheduler.status_page import app as status_page
from scheduler.telemetry import endpoint as telemetry_endpoint
from scheduler.telemetry import scheduler_metrics
from scheduler.utils import log_lines

AREAS = (default, log_lines, database, db_fastpaths, messaging, amqp_fast, roles, upgrade_levels, scheduler,
         report_digests, filter_scheduler, planning_moves, planning_fragmentation, move_expiry, jobs,
         scaling, telemetry_endpoint, scheduler_metrics, status_page)


def register_opts(conf):
    for area in AREAS:
        groups.register_module(conf, area)


def new_conf():
    """A fresh ConfigOpts with every shared option registered (tests, tools)."""
    conf = cfg.ConfigOpts()
    register_opts(conf)
    return conf
