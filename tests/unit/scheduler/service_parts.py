"""What a scheduler in a unit test runs on: every plugin's options, memory:// and SQLite."""

from scheduler import rpc
from scheduler.conf import opts
from scheduler.db.api import Database


def transport_and_database(conf):
    """A transport and a database (its schema made) of ``conf``, once the plugins' options are on it."""
    opts.register_plugin_opts(conf)
    transport = rpc.get_transport(conf)
    database = Database.from_conf(conf)
    database.sync()
    return transport, database
