"""berth-scheduler: the scheduler service."""

import sys

from scheduler import config, rpc
from scheduler.cmd import common
from scheduler.db.api import Database
from scheduler.service import SchedulerService

PROG = "berth-scheduler"


def main(argv=None):
    conf = config.load(sys.argv[1:] if argv is None else argv, PROG, **common.SCHEDULER_SETUP)
    config.setup_logging(conf, PROG)
    database = Database.from_conf(conf)
    if conf.database.auto_migrate:
        try:
            database.sync()
        except Exception as exc:  # one line (the URL in it is masked), no traceback
            database.dispose()
            return f"{PROG}: cannot start: {exc}"
    transport = rpc.get_transport(conf)
    try:
        common.run_until_signalled([SchedulerService(conf, transport, database)])
    finally:
        transport.cleanup()
        database.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
