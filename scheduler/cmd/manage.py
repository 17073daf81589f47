"""berth-manage: operator commands on the scheduler's database.

berth-manage [--config-file F] [--config-dir D] db sync
berth-manage [--config-file F] [--config-dir D] db version
"""

import sys

from oslo_config import cfg
from sqlalchemy import exc as sa_exc

from scheduler import config
from scheduler.db import api as db_api

PROG = "berth-manage"


def db_sync(database):
    """Upgrade the schema to the newest migration and print the revision."""
    print(database.sync() or "none")


def db_version(database):
    """Print the schema's current revision, or "none"."""
    print(database.version() or "none")


DB_ACTIONS = {"sync": db_sync, "version": db_version}


def _add_command_parsers(subparsers):
    db = subparsers.add_parser("db", help="The scheduler's database schema.")
    actions = db.add_subparsers(dest="action", metavar="{sync,version}")
    actions.required = True
    for name, function in DB_ACTIONS.items():
        actions.add_parser(name, help=function.__doc__.splitlines()[0])


command_opt = cfg.SubCommandOpt(
    "category",
    title="Commands",
    help="Available categories",
    handler=_add_command_parsers,
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = config.load(argv, PROG, cli_opts=[command_opt])
    except SystemExit as exc:  # load() reports bad configuration by exiting
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        return exc.code or 0
    config.setup_logging(conf, PROG)

    action = DB_ACTIONS[conf.category.action]
    url = db_api.mask_url(conf.database.connection)
    database = None
    try:
        database = db_api.Database.from_conf(conf)
        action(database)
    except ValueError as exc:
        print(f"{PROG}: [database] connection: {exc}", file=sys.stderr)
        return 1
    except db_api.DatabaseUnavailable as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except sa_exc.SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        reason = reason[0] if reason else type(exc).__name__
        if database is not None:
            url, reason = database.masked_url, database.scrub(reason)
        print(f"{PROG}: database {url}: {reason}", file=sys.stderr)
        return 1
    finally:
        if database is not None:
            database.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
