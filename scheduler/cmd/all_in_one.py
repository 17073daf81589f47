"""berth-all-in-one: the scheduler and N fake compute agents in one process."""

import collections
import logging
import os
import shutil
import signal
import sys
import tempfile

from oslo_config import cfg

from berth_contract import amqp_names as names
from berth_contract import flavors, host_names
from compute_agent import conf as agent_conf
from compute_agent.client import ComputeClient
from compute_agent.driver import CannotStart
from compute_agent.instance_store import InstanceStoreError
from compute_agent.manager import ComputeManager
from scheduler import rpc, states
from scheduler.client import SchedulerClient
from scheduler.cmd import all_in_one_guests, common, output, scaling_demo
from scheduler.cmd.arguments import Interrupted
from scheduler.cmd.host_commands import hosts_command
from scheduler.cmd.instance_commands import build_request
from scheduler.cmd.waiting import Silent, wait_for, wait_until
from scheduler.process import running
from scheduler.process import startup as config
from scheduler.service import SchedulerService, status_routes
from scheduler.telemetry.endpoint import SCHEDULER_PORT, CannotListen, MetricsEndpoint
from scheduler.utils.masking import mask_url

LOG = logging.getLogger(__name__)
PROG = "berth-all-in-one"

cli_opts = [
    cfg.IntOpt("agents", default=4, min=1, max=1000,
               help="How many compute agents to run (2 with --driver qemu)."),
    cfg.StrOpt(
        "agent-prefix",
        default="vm",
        metavar="PREFIX",
        help="The agents are hosts PREFIX-compute-1, PREFIX-compute-2...: vm-compute-N by default, "
        "on any machine, as the documentation shows them. Give each all-in-one its own to run "
        "several on one broker (and each its own [prometheus] listen_port, or enabled = false).",
    ),
    cfg.StrOpt(
        "driver",
        help="The agents' driver, over [compute_agent] driver: fake (the default), host, or qemu for real "
        "guests (each agent's in <[qemu] instances_path>/<host>, the test image of "
        "tools/build-guest-image in [qemu] images_path; Ctrl-C deletes them).",
    ),
    cfg.BoolOpt(
        "demo",
        default=False,
        help="Boot a mixed workload, print where it landed and each host's usage, "
        "delete it again and exit.",
    ),
    cfg.BoolOpt(
        "demo-scaling",
        default=False,
        help="Create a scaling group, raise and drop its members' simulated load, print "
        "how it grows and shrinks (about a minute, with the controller's periods "
        "shortened), delete it and exit.",
    ),
]

#: The demo's workload: (flavor, count). One request fits nowhere, on purpose.
# The largest first, as an operator filling hosts without overcommit (RAM ratio 1.0) would: the
# smaller ones then fill the gaps instead of leaving no host room for a 16 GB instance.
DEMO_WORKLOAD = [("m1.xlarge", 2), ("m1.large", 4), ("m1.medium", 6), ("m1.small", 8), ("m1.tiny", 8)]
DEMO_TOO_BIG = {"name": "too-big", "memory_mb": 1024 * 1024, "root_gb": 10, "ephemeral_gb": 0,
                "vcpus": 4}
#: Seconds the demo keeps trying to reach a rabbit:// broker before giving up, as `berth` does.
DEMO_CONNECT_TIMEOUT = 5.0


def agent_hosts(conf):
    return [f"{conf.agent_prefix}-compute-{i + 1}" for i in range(conf.agents)]


def check_agent_prefix(conf):
    """Fail start-up on an --agent-prefix that cannot name an agent's queues."""
    host = agent_hosts(conf)[-1]
    why = host_names.problem(host)
    if why is not None:
        raise ValueError(f"--agent-prefix: {names.printable(host)[:60]!r}, an agent's host name, {why}")


def register_agent_opts(conf):
    """The agents here are simulated by design: driver fake, unless the operator chose one."""
    agent_conf.register_opts(conf)
    conf.set_default("driver", "fake", group="compute_agent")


def apply_driver_option(conf):
    """--driver is [compute_agent] driver; with qemu, the demo's defaults (all_in_one_guests)."""
    if conf.driver is not None:
        conf.set_override("driver", conf.driver, group="compute_agent")
    if all_in_one_guests.runs_guests(conf):
        all_in_one_guests.set_defaults(conf)


def main(argv=None, out=None):
    out = out or sys.stdout
    conf = config.load(
        sys.argv[1:] if argv is None else argv,
        PROG,
        register=common.SCHEDULER_SETUP["register"] + [register_agent_opts],
        validators=[apply_driver_option, check_agent_prefix, *common.SCHEDULER_SETUP["validators"],
                    agent_conf.check_driver,
                    agent_conf.check_resources],
        cli_opts=cli_opts,
    )
    if conf.demo and conf.demo_scaling:
        return f"{PROG}: --demo and --demo-scaling: choose one"
    guests = all_in_one_guests.runs_guests(conf)
    if guests and (conf.demo or conf.demo_scaling):
        return (f"{PROG}: --{'demo' if conf.demo else 'demo-scaling'} runs fake agents (its workload is "
                "simulated), not driver qemu: start berth-all-in-one --driver qemu and boot with "
                "berth server create --image berth-test")
    no_image = all_in_one_guests.check_images(conf) if guests else None
    if no_image:
        return f"{PROG}: cannot start: {no_image}"
    demo_log = demo_log_file(conf) if conf.demo or conf.demo_scaling else None
    own_state = use_state_of_its_own(conf) if conf.demo or conf.demo_scaling else None
    if conf.demo_scaling:
        scaling_demo.apply_overrides(conf)
    config.setup_logging(conf, PROG)
    if own_state:
        LOG.info("The demo's broker, database and agents' records are in %s, removed at its end", own_state)
    try:
        return run(conf, out, demo_log)
    finally:
        if own_state:
            shutil.rmtree(own_state, ignore_errors=True)


def run(conf, out, demo_log):
    try:
        database = common.open_database(conf)
    except ValueError as exc:  # one line (the URL in it is masked), no traceback
        return f"{PROG}: cannot start: {exc}"
    transport = rpc.get_transport(conf)
    guests = all_in_one_guests.runs_guests(conf)
    try:
        by_host = all_in_one_guests.drivers(conf, agent_hosts(conf)) if guests else {}
        agents = [ComputeManager(conf, transport, host=host, driver=by_host.get(host))
                  for host in agent_hosts(conf)]
        described = agents[0].driver.describe()  # a qemu driver chooses its accelerator here
    except CannotStart as exc:
        transport.cleanup()
        database.dispose()
        return f"{PROG}: cannot start: {exc}"
    hosts = agents[0].host if len(agents) == 1 else f"{agents[0].host} to {agents[-1].host}"
    LOG.info("%d compute agent(s), %s, each %s", len(agents), hosts, described)
    scheduler = SchedulerService(conf, transport, database)
    endpoint = MetricsEndpoint(conf, SCHEDULER_PORT, routes=status_routes(conf, scheduler))
    services = [endpoint, scheduler] + agents
    if guests:
        all_in_one_guests.say(conf)
        services.append(all_in_one_guests.EndGuests(SchedulerClient(transport), by_host))
    try:
        if not conf.demo and not conf.demo_scaling:
            running.run_until_signalled(services, transport)
            return 0
        transport.reach(DEMO_CONNECT_TIMEOUT)
        client = SchedulerClient(transport)
        if conf.demo_scaling:
            compute = ComputeClient(transport)
            status = demo(conf, services, client, out, lambda output_, booted: scaling_demo.run_scaling_demo(
                client, compute, agent_hosts(conf), output_))
        else:
            status = demo(conf, services, client, out)
        if demo_log:
            print(f"The log of this run is in {demo_log}.", file=Output(out))
        return status
    except (InstanceStoreError, rpc.QueueInUse, rpc.BrokerUnreachable, CannotListen,
            CannotStart) as exc:  # said in full
        return f"{PROG}: cannot start: {exc}"
    finally:
        transport.cleanup()
        database.dispose()


#: The demos' transport and database, in a directory of their own under state_path.
DEMO_TRANSPORT_URL = "filesystem://"
DEMO_DATABASE = "sqlite:///{}/berth.sqlite"


def use_state_of_its_own(conf):
    """A demo runs on a broker, a database and agents' records of its own, in a new directory
    under ``state_path`` it removes at its end: it never sees, let alone deletes, what the
    operator booted with ``berth-all-in-one --agents N`` on the same host names, nor what a
    configuration's transport_url and [database] connection hold. Its metrics endpoint takes
    any free port, unless one is set, so that it runs beside a berth-all-in-one.
    Returns the directory."""
    configured = [f"{name} = {mask_url(value)}" for name, value, default in (
        ("transport_url", conf.transport_url, DEMO_TRANSPORT_URL),
        ("[database] connection", conf.database.connection, DEMO_DATABASE.format(conf.state_path)),
    ) if value != default]
    os.makedirs(conf.state_path, exist_ok=True)
    path = tempfile.mkdtemp(prefix="demo-", dir=conf.state_path)
    if configured:
        print(f"{PROG}: the demo runs on a broker and database of its own in {path}, "
              f"not on {' and '.join(configured)} of the configuration", file=sys.stderr)
    conf.set_override("state_path", path)
    conf.set_override("transport_url", DEMO_TRANSPORT_URL)
    conf.set_override("connection", DEMO_DATABASE.format(path), group="database")
    conf.set_override("auto_migrate", True, group="database")
    if conf.prometheus.listen_port is None:
        conf.set_override("listen_port", 0, group="prometheus")
    return path


def demo_log_file(conf):
    """The demo prints its results; its INFO log goes to ``state_path/berth-all-in-one.log``
    unless the options send it somewhere. Returns that file, or None."""
    if config.log_destination(conf) or conf.use_stderr:
        return None
    os.makedirs(conf.state_path, exist_ok=True)
    path = os.path.join(conf.state_path, f"{PROG}.log")
    conf.set_override("log_file", path)
    return path


class Output:
    """The demo's output; once its reader is gone (``| head -3``), the rest goes nowhere
    and the demo still finishes, deleting what it booted."""

    def __init__(self, out):
        self.out = out
        self.gone = False

    def write(self, text):
        if not self.gone:
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                self.gone = True
                output.quiet_stdout()
        return len(text)

    def flush(self):
        pass


def demo(conf, services, client, out, run=None):
    """Run the demo (``run(out, booted)``, the mixed workload's by default); Ctrl-C (or
    SIGTERM) stops it at once, deletes what it booted and stops the services; a second
    one only says that this is under way."""
    running = [True]  # until interrupted or done: then a signal only says what is under way

    def on_signal(signum, frame):
        if not running[0]:
            print(f"{PROG}: stopping already", file=sys.stderr)
            return
        running[0] = False
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    booted, out = [], Output(out)
    started = []
    try:
        for service in services:
            service.start()
            started.append(service)
        if run is not None:
            return run(out, booted)
        return run_demo(conf, client, out, booted)
    except (KeyboardInterrupt, Interrupted):  # Interrupted: in one of its waits
        print(f"{PROG}: interrupted: deleting the {len(booted)} instance(s) the demo booted, then "
              "stopping", file=sys.stderr)
        delete_all(client, booted, timeout=30)
        return 130
    finally:
        running[0] = False
        for service in reversed(started):
            service.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def delete_all(client, uuids, timeout):
    for u in uuids:
        client.delete_instance({}, u)
    if uuids:
        wait_for(client, uuids, timeout, settled=(states.DELETED,), progress=Silent())


def run_demo(conf, client, out, booted, timeout=120):
    """Boot the workload (its uuids appended to ``booted`` before it is cast), show where it
    went, delete it. Its database is its own and new (use_state_of_its_own): nothing else is there."""
    hosts = set(agent_hosts(conf))
    wait_until(lambda: hosts <= {h["host"] for h in client.list_hosts({}) if h["state"] == "up"},
               timeout, "the agents to report")
    uuids, flavor_of = [], {}
    for name, count in DEMO_WORKLOAD:
        request_spec, filter_properties = build_request(flavors.get(name), count)
        booted += request_spec["instance_uuids"]
        client.run_instance({}, request_spec, filter_properties)
        uuids += request_spec["instance_uuids"]
        flavor_of.update(dict.fromkeys(request_spec["instance_uuids"], name))
    request_spec, filter_properties = build_request(DEMO_TOO_BIG, 1)
    booted += request_spec["instance_uuids"]
    client.run_instance({}, request_spec, filter_properties)
    too_big = request_spec["instance_uuids"][0]
    flavor_of[too_big] = DEMO_TOO_BIG["name"]
    found = wait_for(client, uuids + [too_big], timeout, progress=Silent())

    print(f"Booted {len(uuids)} instances on {len(hosts)} fake hosts, and 1 too big for any of them:\n",
          file=out)
    per_host = collections.defaultdict(collections.Counter)
    for u in uuids:
        per_host[found[u]["host"] or "-"][flavor_of[u]] += 1
    output.print_columns(
        ["HOST", "INSTANCES"],
        [[h, ", ".join(f"{n} x {f}" for f, n in sorted(c.items()))] for h, c in sorted(per_host.items())],
        out,
    )
    print(f"\n{too_big} ({DEMO_TOO_BIG['name']}, {DEMO_TOO_BIG['memory_mb']} MB): "
          f"{found[too_big]['state']}: {found[too_big]['fault_reason']}\n", file=out)
    hosts_command(client, None, out)

    active = [u for u in uuids if found[u]["state"] == states.ACTIVE]
    delete_all(client, uuids + [too_big], timeout)
    print(f"\n{len(active)} of {len(uuids)} ACTIVE; all deleted again.", file=out)
    return 0 if len(active) == len(uuids) and found[too_big]["state"] == states.ERROR else 1


if __name__ == "__main__":
    sys.exit(main())
