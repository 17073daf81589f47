"""The scheduler's queries: rows in and out as plain dicts.

:class:`Database` is made of one family of queries per group of tables, each
in its own module:

- :mod:`scheduler.db.engine`: connecting, transactions, retries, the clock,
  the schema, and the errors and time helpers below;
- :mod:`scheduler.db.claims`: host generations (claims on hosts);
- :mod:`scheduler.db.instances`: instance records;
- :mod:`scheduler.db.hosts`: compute nodes and services;
- :mod:`scheduler.db.aggregates`: host aggregates;
- :mod:`scheduler.db.flavors`: flavors;
- :mod:`scheduler.db.server_groups`: server groups and their members;
- :mod:`scheduler.db.scaling_groups`: scaling groups, their history and their leases;
- :mod:`scheduler.db.instance_metrics`: the last sample of each instance's metrics;
- :mod:`scheduler.db.moves`: the moves of instances (the migrations table);
- :mod:`scheduler.db.rebalance_plans`: saved rebalance plans and their steps;
- :mod:`scheduler.db.jobs`: drains and rebalance plans the schedulers carry on, and their leases;
- :mod:`scheduler.db.fastpaths`: the PostgreSQL fast paths.

Every public method is one transaction, retried on a passing failure; times
are taken and given as scheduler.db.engine says.
"""

from scheduler.db.aggregates import AggregateQueries
from scheduler.db.claims import ClaimQueries
from scheduler.db.engine import (
    SQLITE_BUSY_TIMEOUT,
    Conflict,
    DatabaseEngine,
    DatabaseUnavailable,
    NotFound,
    _retry,
    is_conflict,
    is_transient,
    to_db_time,
    to_iso,
    utcnow,
)
from scheduler.db.flavors import FlavorQueries
from scheduler.db.hosts import HostQueries
from scheduler.db.instance_metrics import InstanceMetricQueries
from scheduler.db.instances import InstanceQueries
from scheduler.db.jobs import JobQueries
from scheduler.db.moves import MigrationQueries
from scheduler.db.rebalance_plans import RebalancePlanQueries
from scheduler.db.scaling_groups import ScalingGroupQueries
from scheduler.db.server_groups import ServerGroupQueries

__all__ = [
    "SQLITE_BUSY_TIMEOUT",
    "Conflict",
    "Database",
    "DatabaseUnavailable",
    "NotFound",
    "_retry",
    "is_conflict",
    "is_transient",
    "to_db_time",
    "to_iso",
    "utcnow",
]


class Database(ClaimQueries, InstanceQueries, HostQueries, AggregateQueries, FlavorQueries,
               ServerGroupQueries, ScalingGroupQueries, InstanceMetricQueries, MigrationQueries,
               RebalancePlanQueries, JobQueries, DatabaseEngine):
    """The scheduler's database: an engine, the migrations and the queries."""
