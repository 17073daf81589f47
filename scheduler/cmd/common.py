"""What the scheduler's long-running commands do around their service (what every Berth program
does is scheduler.process's)."""

from scheduler.conf import opts
from scheduler.db.api import Database
from scheduler.policy import filters, weighers
from scheduler.process import startup
from scheduler.rpc import access


def check_plugins(conf):
    """Fail start-up on a filter or weigher name that is not installed."""
    filters.enabled_filters(conf)
    weighers.enabled_weighers(conf)


SCHEDULER_SETUP = {"register": [opts.register_plugin_opts],
                   "validators": [check_plugins, startup.check_host, access.check_options]}


def open_database(conf):
    """The Database of ``[database] connection``, migrated if auto_migrate; raises
    ValueError with one line (the URL masked) when it cannot be opened."""
    database = Database.from_conf(conf)
    if conf.database.auto_migrate:
        try:
            database.sync()
        except Exception as exc:
            database.dispose()
            raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return database
