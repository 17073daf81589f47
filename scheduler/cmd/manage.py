"""berth-manage: operator commands on the scheduler's database.

berth-manage [--config-file F] [--config-dir D] db sync
berth-manage [--config-file F] [--config-dir D] db version
berth-manage [--config-file F] [--config-dir D] db archive --before DATE [--max-rows N] [--dry-run]
berth-manage [--config-file F] [--config-dir D] db purge --before DATE [--dry-run]

``archive`` moves the instances DELETED, or in ERROR on no host, before DATE
(with their server-group memberships) into the shadow tables; ``purge``
deletes them for good, and the shadow rows before DATE too (see
scheduler.db.archive for what is touched and what never is). Both print the
rows per table. DATE is an ISO 8601 date or date-time (UTC unless it has an
offset) or an age such as 30d or 12h; a DATE in the future is refused.

Exit status: 0 done; 1 refused (nothing changed) or failed (each batch is one
transaction: those committed before the failure stay done); 2 bad usage;
3 (archive --max-rows) the limit was reached and rows before DATE remain: run
it again.
"""

import re
import sys
from datetime import timedelta

from oslo_config import cfg
from sqlalchemy import exc as sa_exc

from scheduler.cmd import output, unknown_options
from scheduler.cmd.arguments import positive
from scheduler.db import api as db_api
from scheduler.db import archive, schema
from scheduler.process import startup as config
from scheduler.utils.masking import mask_url

PROG = "berth-manage"
MORE_LEFT = 3  # exit status of an archive that stopped at --max-rows with rows left

DATE_FORMS = ("an ISO 8601 date or date-time (2026-11-01, 2026-11-01T12:00:00, 2026-11-01T12:00:00Z, "
              "2026-11-01T12:00:00+02:00; UTC unless it has an offset) or an age in days or hours "
              "(30d, 12h)")
_AGE = re.compile(r"(\d+)([dh])")


class Refused(Exception):
    """What the operator asked cannot be done; nothing was changed."""


def parse_before(text):
    """A --before DATE: a naive UTC datetime, or a timedelta for an age; ValueError naming the
    accepted forms."""
    age = _AGE.fullmatch(text.strip().lower())
    if age:
        number, unit = int(age.group(1)), age.group(2)
        try:
            return timedelta(days=number) if unit == "d" else timedelta(hours=number)
        except OverflowError:
            pass
    else:
        try:
            return db_api.to_db_time(text)
        except (ValueError, OverflowError):
            pass
    raise ValueError(f"--before {text!r} is not a date: give {DATE_FORMS}")


def _cutoff(database, before, action):
    """The naive UTC time that ``before`` (parse_before's) means now, by the database's clock."""
    if not database.is_sqlite:
        database.sync_clock()
    now = database.now()
    if isinstance(before, timedelta):
        try:
            return now - before
        except OverflowError:
            raise Refused(f"--before: {before.days} days ago is before the year 1") from None
    if before > now:
        raise Refused(f"--before {_iso(before)} is in the future (it is {_iso(now)}): "
                      f"it would {action} even the rows made a moment ago; give a past date or an age (30d)")
    return before


def _iso(when):
    return f"{when.isoformat(timespec='seconds')}Z"


def _check_schema(database):
    current, head = database.version(), schema.head()
    if current != head:
        raise Refused(f"the database schema is at revision {current or 'none'}, not {head}: "
                      f"run '{PROG} db sync' first")


def _print_counts(counts, cutoff, verb, dry_run):
    what = f"instances DELETED, or in ERROR on no host, before {_iso(cutoff)}"
    print(f"Dry run, nothing changed; would be {verb}: {what}" if dry_run else f"{verb.capitalize()}: {what}")
    output.print_columns(["TABLE", "ROWS"], list(counts.items()), sys.stdout)


def db_sync(database, args):
    """Upgrade the schema to its newest version and print the revision."""
    print(database.sync() or "none")


def db_version(database, args):
    """Print the schema's current revision, or "none"."""
    print(database.version() or "none")


def db_archive(database, args):
    """Move DELETED and failed instances older than DATE to the shadow tables."""
    _check_schema(database)
    cutoff = _cutoff(database, args.before, "archive")
    counts, left = archive.archive(database, cutoff, max_rows=args.max_rows, dry_run=args.dry_run)
    _print_counts(counts, cutoff, "archived", args.dry_run)
    if left:
        print(f"--max-rows {args.max_rows} reached; more rows before {_iso(cutoff)} remain: "
              "run it again (exit status 3)")
        return MORE_LEFT
    return 0


def db_purge(database, args):
    """Delete DELETED and failed instances older than DATE for good, live and archived."""
    _check_schema(database)
    cutoff = _cutoff(database, args.before, "purge")
    counts = archive.purge(database, cutoff, dry_run=args.dry_run)
    _print_counts(counts, cutoff, "purged", args.dry_run)
    return 0


def _before_argument(parser):
    parser.add_argument("--before", required=True, metavar="DATE",
                        help="only instances deleted (or, in ERROR, last changed) before DATE: "
                        f"{DATE_FORMS}; a DATE in the future is refused")
    parser.add_argument("--dry-run", action="store_true",
                        help="print how many rows would go, and change nothing")


def _archive_arguments(parser):
    parser.description = (
        "Move the instances DELETED before DATE, and those in ERROR on no host (refused or placed "
        "nowhere) last changed before DATE, with their fault and their server-group memberships, from "
        f"the tables {', '.join(archive.LIVE_TABLES)} to {', '.join(archive.SHADOW_TABLES)}; print the "
        "rows moved per table. Instances in any other state, ERROR instances still on a host and the "
        "memberships of other instances are never touched. Exit status: 0 done, 1 refused or failed, "
        "3 --max-rows reached with rows left (run it again).")
    _before_argument(parser)
    parser.add_argument("--max-rows", type=positive, metavar="N",
                        help="move at most N instances (their memberships go with them) and exit with "
                        "status 3 if more remain; default: all")


def _purge_arguments(parser):
    parser.description = (
        "Delete for good what 'db archive' would move (instances DELETED, or in ERROR on no host, before "
        f"DATE, and their server-group memberships) from the live tables {', '.join(archive.LIVE_TABLES)}, "
        f"and the archived instances before DATE and their memberships from the shadow tables "
        f"{', '.join(archive.SHADOW_TABLES)}; print the rows deleted per table. Instances in any other "
        "state, ERROR instances still on a host and the memberships of other instances are never "
        "touched. Exit status: 0 done, 1 refused or failed.")
    _before_argument(parser)


DB_ACTIONS = {
    "sync": (db_sync, None),
    "version": (db_version, None),
    "archive": (db_archive, _archive_arguments),
    "purge": (db_purge, _purge_arguments),
}


def _add_command_parsers(subparsers):
    db = subparsers.add_parser("db", help="The scheduler's database schema and old rows.")
    actions = db.add_subparsers(dest="action", metavar="{" + ",".join(DB_ACTIONS) + "}")
    actions.required = True
    for name, (function, arguments) in DB_ACTIONS.items():
        parser = actions.add_parser(name, help=function.__doc__.splitlines()[0])
        if arguments is not None:
            arguments(parser)
    unknown_options.refuse_in_place(subparsers)


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

    args = conf.category
    action = DB_ACTIONS[args.action][0]
    if action in (db_archive, db_purge):
        try:
            args.before = parse_before(args.before)  # before connecting: a bad DATE touches nothing
        except ValueError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1
    url = mask_url(conf.database.connection)
    if not conf.config_file and not conf.config_dir:  # acting on the embedded default: say which
        print(f"{PROG}: no configuration file (--config-file, /etc/berth/berth.conf): database {url}",
              file=sys.stderr)
    database = None
    try:
        database = db_api.Database.from_conf(conf)
        return action(database, args) or 0
    except (Refused, archive.RowsChanged, db_api.DatabaseUnavailable) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"{PROG}: [database] connection: {exc}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
