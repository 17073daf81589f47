"""berth-scheduler: the scheduler service."""

import sys

from scheduler import rpc
from scheduler.cmd import common
from scheduler.process import running
from scheduler.process import startup as config
from scheduler.service import SchedulerService, status_routes
from scheduler.telemetry.endpoint import SCHEDULER_PORT, CannotListen, MetricsEndpoint

PROG = "berth-scheduler"


def main(argv=None):
    conf = config.load(sys.argv[1:] if argv is None else argv, PROG, **common.SCHEDULER_SETUP)
    config.setup_logging(conf, PROG)
    try:
        database = common.open_database(conf)
    except ValueError as exc:  # one line (the URL in it is masked), no traceback
        return f"{PROG}: cannot start: {exc}"
    transport = rpc.get_transport(conf)
    try:
        service = SchedulerService(conf, transport, database)
        services = [MetricsEndpoint(conf, SCHEDULER_PORT, routes=status_routes(conf, service)), service]
        running.run_until_signalled(services, transport)
    except (rpc.LoginRefused, CannotListen) as exc:  # the URL in it is masked
        return f"{PROG}: cannot start: {exc}"
    finally:
        transport.cleanup()
        database.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
