"""``berth-compute-agent``: one compute agent for one host.

    berth-compute-agent --config-file /etc/berth/berth.conf [--host NAME]

The host name comes from ``--host``, else ``[DEFAULT] host`` (whose default
is this machine's hostname). The driver, reserves and report interval are in
``[compute_agent]``; the driver has no default (host or fake: the agent does not
start until it is chosen) and the agent logs at start what it reports. SIGTERM
or SIGINT stops the agent cleanly: it stops consuming, interrupts builds in
progress (they resume at the next start) and exits 0. SIGHUP opens the log
file again.
"""

import logging
import sys

from oslo_config import cfg

from compute_agent import conf as agent_conf  # first: the concurrency switch patches
from compute_agent.driver import CannotStart
from compute_agent.instance_store import InstanceStoreError
from compute_agent.inventory import NotOnThisHost
from compute_agent.manager import ComputeManager
from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.conf import upgrade_levels
from scheduler.process import running
from scheduler.process import startup as config
from scheduler.rpc import access
from scheduler.telemetry.endpoint import AGENT_PORT, CannotListen, MetricsEndpoint

LOG = logging.getLogger(__name__)
PROG = "berth-compute-agent"

# "host" is already [DEFAULT] host (a file option); a CLI option of the same
# name but another dest gives the agent its documented --host flag.
cli_opts = [
    cfg.StrOpt(
        "host",
        dest="agent_host",
        metavar="NAME",
        help="Host name this agent serves and reports as (overrides [DEFAULT] host).",
    ),
]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    conf = config.load(argv, PROG, register=[agent_conf.register_opts],
                       validators=[agent_conf.check_driver, agent_conf.check_resources, access.check_options],
                       cli_opts=cli_opts, areas=berth_conf.AGENT_AREAS)
    if conf.agent_host:
        conf.set_override("host", conf.agent_host)
    try:
        config.check_host(conf)
    except ValueError as exc:
        return f"{PROG}: invalid configuration: {exc}"
    config.setup_logging(conf, PROG)
    transport = rpc.get_transport(conf)
    try:
        manager = ComputeManager(conf, transport)
        LOG.info("Compute agent %s: %s", conf.host, manager.driver.describe())
        upgrade_levels.log_caps(conf)
        running.run_until_signalled([MetricsEndpoint(conf, AGENT_PORT), manager], transport)
    except (InstanceStoreError, rpc.QueueInUse, rpc.LoginRefused, CannotListen,
            NotOnThisHost, CannotStart) as exc:  # said in full
        LOG.error("Compute agent %s cannot start: %s", conf.host, exc)
        return f"{PROG}: cannot start: {exc}"
    except Exception as exc:
        LOG.exception("Compute agent %s failed to start", conf.host)
        return f"{PROG}: cannot start: {exc}"
    finally:
        transport.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
