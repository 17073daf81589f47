"""``berth server metric push|show`` and ``berth fake-load set|clear``: parsing, and the
whole commands over memory:// against a real scheduler and real fake agents."""

import io
import re
import time
import uuid as uuidlib
from datetime import timedelta

import pytest
from oslo_config import cfg

from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from compute_agent.manager import ComputeManager
from scheduler import rpc, states
from scheduler.client import SchedulerClient
from scheduler.cmd.arguments import CommandError
from scheduler.process import startup as config
from scheduler.scaling.instance_metrics_api import InstanceMetricsEndpoint
from tests.unit.cli_scheduler import cli_scheduler, main, parse, write_conf

U1 = "00000000-0000-4000-8000-0000000000a1"
TIMEOUT = 30.0  # guards against hangs only


@pytest.fixture
def conf_file(tmp_path):
    """The CLI's file, with the fake agents' options for the fleet's agents."""
    agent = ("[compute_agent]\ndriver = fake\nfake_build_time = 0\nfake_idle_cpu_load = 0.1\n"
             "fake_idle_memory_fraction = 0.5\nreport_interval = 3600\n")
    return write_conf(tmp_path, agent)


def berth_lines(capsys):
    """The CLI's own lines on stderr (in-process, other tests' log handlers may write there too)."""
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]


def wait_for(condition, what):
    deadline = time.monotonic() + TIMEOUT
    while not (result := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)
    return result


# -- parsing ---------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["instance-metric", "push", U1, "rps"], "a metric is NAME=VALUE, got 'rps'"),
    (["instance-metric", "push", U1, "rps=lots"],
     "metric rps: the value must be a finite number >= 0, got 'lots'"),
    (["instance-metric", "push", U1, "rps=-1"], "metric rps: the value must be a finite number >= 0"),
    (["instance-metric", "push", U1, "rps=nan"], "metric rps: the value must be a finite number >= 0"),
    (["instance-metric", "push", U1, "cpu=1"], "metric cpu is measured by the compute agents"),
    (["instance-metric", "push", U1, "RPS=1"], "metric name 'RPS' must match [a-z][a-z0-9_.-]{0,63}"),
    (["instance-metric", "push", U1], "the following arguments are required: NAME=VALUE"),
    (["fake-load", "set", "--cpu", "1.5", "--all"],
     "--cpu: must be a fraction from 0 to 1 (0.9: 90 %), got '1.5'"),
    (["fake-load", "set", "--cpu", "x", "--all"], "--cpu: must be a fraction from 0 to 1"),
    (["fake-load", "set", "--cpu", "0.5", "--memory", "nan", "--all"], "--memory: must be a fraction"),
    (["fake-load", "set", "--all"], "the following arguments are required: --cpu"),
])
def test_bad_arguments_exit_with_status_2_saying_which(conf_file, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["fake-load", "set", "--cpu", "0.5"], "name the instances, or give --all for every instance"),
    (["fake-load", "set", "--cpu", "0.5", "--all", U1], "name the instances or give --all, not both"),
    (["fake-load", "clear"], "name the instances, or give --all for every instance"),
])
def test_fake_load_wants_instances_or_all_not_both(conf_file, argv, message):
    args = parse(conf_file, *argv)
    with pytest.raises(CommandError, match=message):
        args.func(None, args, io.StringIO())


def test_a_metric_given_twice_is_refused_before_anything_is_sent(conf_file):
    args = parse(conf_file, "instance-metric", "push", U1, "rps=1", "rps=2")
    with pytest.raises(CommandError, match="metric rps given more than once; nothing pushed"):
        args.func(None, args, io.StringIO())


# -- the whole commands, over memory:// ----------------------------------------------


@pytest.fixture
def scheduler(conf_file):
    """A scheduler's manager and instance-metrics endpoints on memory://, from the CLI's file."""
    def endpoints(conf, database, manager):
        return [InstanceMetricsEndpoint(conf, database)]

    with cli_scheduler(conf_file, endpoints) as database:
        yield database


def test_push_then_show_by_name(scheduler, conf_file):
    database = scheduler
    database.create_instances([{"uuid": U1, "state": states.ACTIVE, "display_name": "web-1"}])
    status, out = main(conf_file, "instance-metric", "push", "web-1", "rps=120", "queue.depth=3.5")
    assert status == 0
    assert re.fullmatch(f"{U1}: queue.depth=3.5, rps=120 \\(sampled at [0-9T:.-]+Z\\)\n", out), out
    assert database.latest_instance_metrics([U1], database.now() - timedelta(seconds=60)) == {
        U1: {"rps": 120.0, "queue.depth": 3.5}}

    status, out = main(conf_file, "instance-metric", "show", "web-1")
    assert status == 0
    header, *rows = out.splitlines()
    assert header.split() == ["INSTANCE", "NAME", "VALUE", "SOURCE", "SAMPLED", "AT"]
    assert [row.split()[:4] for row in rows] == [[U1, "queue.depth", "3.5", "pushed"],
                                                 [U1, "rps", "120", "pushed"]]


def test_a_refused_push_is_one_line_and_saves_nothing(scheduler, conf_file, capsys):
    database = scheduler
    deleted = str(uuidlib.uuid4())
    database.create_instances([{"uuid": deleted, "state": states.DELETED}])
    for argv, message in [
        ([deleted, "rps=1"], f"berth: push_instance_metrics: instance {deleted} is DELETED"),
        ([U1, "rps=1"], f"berth: push_instance_metrics: no instance {U1}"),
        (["nosuch", "rps=1"], "berth: No instance named nosuch"),
    ]:
        status, out = main(conf_file, "instance-metric", "push", *argv)
        assert status == 1 and out == ""
        assert berth_lines(capsys) == [message]
    assert database.list_instance_metrics([deleted, U1]) == {}


@pytest.fixture
def fleet(scheduler, conf_file):
    """Start agents (fake by default) reporting to the scheduler; place built instances on them."""
    conf = cfg.ConfigOpts()
    config.load(["--config-file", str(conf_file)], "berth-compute-agent", register=[agent_conf.register_opts],
                conf=conf)
    transport = rpc.get_transport(conf)
    started = []

    class Fleet:
        database = scheduler

        def agent(self, host, driver=None):
            manager = ComputeManager(conf, transport, host=host,
                                     driver=None if driver is None else drivers.load_driver(conf, driver))
            manager.start()
            started.append(manager)
            return manager

        def build(self, host, name, vcpus=2):
            uuid = str(uuidlib.uuid4())
            flavor = {"name": "m1.test", "memory_mb": 1000, "root_gb": 0, "ephemeral_gb": 0, "vcpus": vcpus,
                      "extra_specs": {}}
            self.database.create_instances([{"uuid": uuid, "state": states.SCHEDULED, "host": host,
                                             "display_name": name, "memory_mb": 1000, "vcpus": vcpus}])
            instance = {"uuid": uuid, "flavor": flavor, "project_id": "p"}
            ComputeClient(transport).run_instance({}, host, instance, {"instance_uuids": [uuid]}, {})
            wait_for(lambda: self.database.get_instance(uuid)["state"] == states.ACTIVE, f"{name} ACTIVE")
            return uuid

        @staticmethod
        def hosts_up():
            return [h["host"] for h in SchedulerClient(transport).list_hosts({}) if h["state"] == "up"]

        @staticmethod
        def usage(manager, uuid):
            return manager.tracker.report().get("instance_usage", {}).get(uuid)

    yield Fleet()
    for manager in started:
        manager.stop()
    transport.cleanup()


def test_fake_load_set_on_instances_by_name_then_clear(fleet, conf_file):
    one, two = fleet.agent("agent-1"), fleet.agent("agent-2")
    web1, web2 = fleet.build("agent-1", "web-1"), fleet.build("agent-2", "web-2")
    other = fleet.build("agent-2", "db-1")

    status, out = main(conf_file, "fake-load", "set", "--cpu", "0.9", "--memory", "0.25", "web-1", web2)
    assert status == 0
    assert out.splitlines() == [f"agent-1: cpu 0.9, memory 0.25 for {web1}",
                                f"agent-2: cpu 0.9, memory 0.25 for {web2}"]
    assert fleet.usage(one, web1) == {"cpu": 1.8, "memory": 250.0}
    assert fleet.usage(two, web2) == {"cpu": 1.8, "memory": 250.0}
    assert fleet.usage(two, other) == {"cpu": pytest.approx(0.2), "memory": 500.0}

    status, out = main(conf_file, "fake-load", "clear", "web-2")
    assert status == 0 and out == f"agent-2: {web2} cleared\n"
    assert fleet.usage(two, web2) == {"cpu": pytest.approx(0.2), "memory": 500.0}
    assert fleet.usage(one, web1)["cpu"] == 1.8


def test_fake_load_all_reaches_every_host_and_a_non_fake_agent_refuses(fleet, conf_file, capsys):
    one = fleet.agent("agent-1")
    fleet.agent("agent-3", driver="host")
    web1 = fleet.build("agent-1", "web-1")
    wait_for(lambda: fleet.hosts_up() == ["agent-1", "agent-3"], "both agents' reports")

    status, out = main(conf_file, "fake-load", "set", "--cpu", "0.5", "--all")
    assert status == 1
    assert out == "agent-1: cpu 0.5, memory as modelled for every instance (1 now)\n"
    assert berth_lines(capsys) == [
        "berth fake-load: agent-3: set_fake_load: host agent-3 runs the host driver, which simulates no "
        "load; only [compute_agent] driver = fake does"]
    assert fleet.usage(one, web1) == {"cpu": 1.0, "memory": 500.0}
    built_later = fleet.build("agent-1", "web-9")
    assert fleet.usage(one, built_later)["cpu"] == 1.0

    status, out = main(conf_file, "fake-load", "clear", "web-9")
    assert status == 0
    assert out == (f"agent-1: {built_later} cleared; the override for every instance (cpu 0.5, memory as "
                   "modelled) still applies\n")
    status, out = main(conf_file, "fake-load", "clear", "--all")
    assert status == 1 and out == "agent-1: every override cleared\n"
    assert fleet.usage(one, web1)["cpu"] == pytest.approx(0.2)


def test_fake_load_refuses_an_instance_on_no_host(fleet, conf_file, capsys):
    fleet.agent("agent-1")
    waiting = str(uuidlib.uuid4())
    fleet.database.create_instances([{"uuid": waiting, "state": states.SCHEDULING, "display_name": "w"}])
    status, out = main(conf_file, "fake-load", "set", "--cpu", "0.5", "w")
    assert status == 1 and out == ""
    assert berth_lines(capsys) == [f"berth: instance {waiting} is SCHEDULING on no host; nothing changed"]
