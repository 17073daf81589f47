"""One request id from the caller through the scheduler to the agent, on every log line about
the request; and what the scheduler logs of each decision. All on memory:// and SQLite, the
scheduler, the agents and the command line in this process, logging as a service does."""

import io
import json
import time

import pytest

from berth_contract.host_report import HostReport
from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent.manager import ComputeManager
from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.cmd import cli
from scheduler.service import SchedulerService
from tests.unit.cli_scheduler import fields
from tests.unit.logs import request_ids, service_log
from tests.unit.scheduler.manager_world import report, request
from tests.unit.scheduler.service_parts import transport_and_database

GUARD = 30  # against hangs only
#: The logger of `berth server create`'s "Booting <uuids> as request req-..." line.
BOOT_LOGGER = "scheduler.cmd.instance_commands"


def wait_for(condition, what):
    deadline = time.monotonic() + GUARD
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return result


class BrokenHypervisor(drivers.FakeDriver):
    def spawn(self, instance):
        raise RuntimeError("the hypervisor said no")


@pytest.fixture
def stack(conf, tmp_path):
    """A scheduler service, and agents started by ``add_agent(host, driver=None)``."""
    agent_conf.register_opts(conf)
    conf.set_override("driver", "fake", "compute_agent")
    transport, database = transport_and_database(conf)
    service = SchedulerService(conf, transport, database)
    service.start()
    agents = []

    def add_agent(host, driver=None):
        agent = ComputeManager(conf, transport, host=host, driver=driver)
        agent.start()
        agents.append(agent)
        wait_for(lambda: host in service.manager.host_manager.table.index, f"{host} to report")
        return agent

    yield service, add_agent, SchedulerClient(transport, timeout=GUARD)
    for agent in agents:
        agent.stop()
    service.stop()
    transport.cleanup()
    database.dispose()


def berth(conf, tmp_path, *argv):
    """Run the ``berth`` command line against the stack: (status, what it printed)."""
    path = tmp_path / "cli.conf"
    path.write_text(f"[DEFAULT]\ntransport_url = memory://\ncontrol_exchange = {conf.control_exchange}\n"
                    f"state_path = {conf.state_path}\nrpc_response_timeout = {GUARD}\n")
    out = io.StringIO()
    status = cli.main(["--config-file", str(path), *argv], out=out)
    return status, out.getvalue()


#: The loggers of the planner's refusals and of the applier's decisions.
PLANNER, APPLIER = "scheduler.planning.planner", "scheduler.planning.applier"


def lines_of(lines, logger):
    return [line for line in lines if f" {logger} [" in line]


def boot_logged(conf, tmp_path):
    """``berth server create --wait`` of one m1.tiny, logged as a service logs: (its UUID, the request id
    the command line logged it with, that line, every line logged)."""
    with service_log(conf, tmp_path / "berth.log", debug=True) as read:
        status, out = berth(conf, tmp_path, "boot", "--flavor", "m1.tiny", "--wait", "--timeout", str(GUARD))
        lines = read()
    assert status == 0, out
    uuid = out.splitlines()[1].split()[0]
    [booting] = [line for line in lines_of(lines, BOOT_LOGGER) if f"Booting {uuid} as " in line]
    [request_id] = set(request_ids(booting))
    return uuid, request_id, booting, lines


def test_a_boot_from_the_command_line_is_one_request_id_in_all_three(conf, tmp_path, stack):
    _, add_agent, _ = stack
    add_agent("agent-1")
    uuid, request_id, booting, lines = boot_logged(conf, tmp_path)
    about_it = [line for line in lines if uuid in line]
    assert all(request_ids(line) == [request_id] for line in about_it if line is not booting), about_it
    assert any(f"Placed instance {uuid} on host agent-1" in line
               for line in lines_of(about_it, APPLIER))
    agent_says = [line.split("] ", 1)[1] for line in lines_of(about_it, "compute_agent.manager")]
    assert f"Claimed {uuid} on agent-1; building" in agent_says
    assert any(said.startswith(f"Instance {uuid} is ACTIVE on agent-1") for said in agent_says)


def test_a_request_that_comes_without_a_request_id_gets_one_the_agent_keeps(conf, tmp_path, stack):
    service, add_agent, client = stack
    add_agent("agent-1")
    [uuid], request_spec, filter_properties = request()
    with service_log(conf, tmp_path / "berth.log") as read:
        client.run_instance({"project_id": "p1"}, request_spec, filter_properties)
        wait_for(lambda: (service.database.get_instance(uuid) or {}).get("state") == "ACTIVE", "ACTIVE")
        lines = read()
    [placed] = [line for line in lines_of(lines, APPLIER) if f"Placed instance {uuid}" in line]
    [request_id] = request_ids(placed)
    agent_lines = [line for line in lines_of(lines, "compute_agent.manager") if uuid in line]
    assert agent_lines and all(request_ids(line) == [request_id] for line in agent_lines), agent_lines


def test_requests_cast_in_one_bundle_are_placed_each_under_a_request_id_of_its_own(conf, tmp_path, stack):
    service, add_agent, client = stack
    add_agent("agent-1")
    requests = [request() for _ in range(3)]
    uuids = [uuid for [uuid], _, _ in requests]
    with service_log(conf, tmp_path / "berth.log") as read:
        client.run_instances([({"project_id": "p1"}, spec, properties) for _, spec, properties in requests])
        wait_for(lambda: all((service.database.get_instance(u) or {}).get("state") == "ACTIVE"
                             for u in uuids), "ACTIVE")
        lines = read()
    placed = [[line for line in lines_of(lines, APPLIER) if f"Placed instance {uuid}" in line]
              for uuid in uuids]
    assert all(len(lines) == 1 for lines in placed), placed
    assert len({request_id for [line] in placed for request_id in request_ids(line)}) == 3


def test_a_reschedule_and_its_final_refusal_keep_the_request_id(conf, tmp_path, stack):
    service, add_agent, _ = stack
    for host in ("agent-1", "agent-2"):
        add_agent(host, driver=BrokenHypervisor(conf))
    with service_log(conf, tmp_path / "berth.log", debug=True) as read:
        status, out = berth(conf, tmp_path, "boot", "--flavor", "m1.tiny", "--wait", "--timeout", str(GUARD))
        lines = read()
    assert status == 1, out  # in ERROR: every host failed to build it
    uuid = out.splitlines()[1].split()[0]
    [booting] = [line for line in lines_of(lines, BOOT_LOGGER) if f"Booting {uuid} as " in line]
    [request_id] = set(request_ids(booting))
    said = [line.split("] ", 1)[1]
            for line in lines_of(lines, PLANNER) + lines_of(lines, APPLIER)
            if uuid in line and request_ids(line) == [request_id]]
    placed = [line for line in said if line.startswith(f"Placed instance {uuid} on host agent-")]
    assert len(placed) == 2 and "(attempt 2; " in placed[1], said
    assert any(line.startswith(f"Instances {uuid}: No valid host was found") for line in said), said


def test_each_decision_is_one_info_line_and_what_each_filter_left_only_a_debug_one(conf, tmp_path, world):
    manager, _, _ = world
    for debug in (False, True):
        [uuid], request_spec, filter_properties = request(memory_mb=6144)  # h3 has 4096 MB
        with service_log(conf, tmp_path / f"debug-{debug}.log", debug=debug) as read:
            manager.run_instance({"request_id": rpc.new_request_id()}, request_spec, filter_properties)
            said = [line.split("] ", 1)[1] for line in lines_of(read(), APPLIER)
                    if uuid in line]
        assert said[0] == f"Placed instance {uuid} on host h2 (3 hosts considered, 2 passed the filters)"
        if not debug:
            assert len(said) == 1
            continue
        [detail] = said[1:]
        assert detail.startswith(f"Instance {uuid}: of 3 hosts, ")
        assert "ComputeFilter left 3" in detail and "RamFilter left 2" in detail
        assert "; heaviest: h2 " in detail and ", h1 " in detail


def test_a_host_going_down_and_coming_back_is_said_once_each_way(conf, tmp_path, world):
    manager, _, _ = world
    hosts = manager.host_manager
    down_time = conf.scheduler.service_down_time
    now = time.monotonic()
    hosts.update_from_report(HostReport.from_wire(report("h1", 8192), "h1"), now=now)
    with service_log(conf, tmp_path / "berth.log") as read:
        for later in (1, 2, 3):
            hosts.notice_down_hosts(now=now + down_time + later)
        hosts.update_from_report(HostReport.from_wire(report("h1", 8192), "h1"), now=now + down_time + 10)
        hosts.update_from_report(HostReport.from_wire(report("h1", 8192), "h1"), now=now + down_time + 11)
        hosts.notice_down_hosts(now=now + down_time + 12)
        lines = lines_of(read(), "scheduler.fleet.host_manager")
    said = [(line.split()[3], line.split("] ", 1)[1]) for line in lines if "Host h1 " in line]
    assert said == [
        ("WARNING", f"Host h1 is down: no report for {down_time + 1} s (service_down_time is {down_time} s)"),
        ("INFO", f"Host h1 is up: it reports again after {down_time + 10} s without a report"),
    ]


def test_a_scheduler_that_could_not_hear_does_not_count_that_time_against_the_hosts(conf, world):
    manager, _, _ = world
    hosts = manager.host_manager
    down_time = conf.scheduler.service_down_time
    now = time.monotonic()
    hosts.update_from_report(HostReport.from_wire(report("h1", 8192), "h1"), now=now)
    # h2 was down before.
    hosts.update_from_report(HostReport.from_wire(report("h2", 8192), "h2"), now=now - down_time - 5)
    hosts.deaf(now + 2)  # cut off from the broker, or holding its messages
    assert hosts.notice_down_hosts(now=now + 10 * down_time) == ["h2"]  # h1's age stands still
    hosts.heard(now + 10 * down_time)
    assert hosts.is_up(hosts.get("h1"), now=now + 10 * down_time + 1)  # aged 3 s, not 10 x down_time
    assert not hosts.is_up(hosts.get("h2"), now=now + 10 * down_time + 1)
    assert "h1" in hosts.notice_down_hosts(now=now + 10 * down_time + down_time + 3)  # then it ages


def test_berth_show_names_the_request_id_every_process_logged_the_boot_with(conf, tmp_path, stack):
    _, add_agent, _ = stack
    add_agent("agent-1")
    uuid, request_id, _, _ = boot_logged(conf, tmp_path)
    status, shown = berth(conf, tmp_path, "show", uuid)
    assert status == 0 and fields(shown)["request_id"] == request_id, shown
    status, as_json = berth(conf, tmp_path, "show", uuid, "-f", "json")
    assert status == 0 and json.loads(as_json)["request_id"] == request_id, as_json
    status, as_yaml = berth(conf, tmp_path, "show", uuid, "-f", "yaml")
    assert status == 0 and f"\nrequest_id: {request_id}\n" in as_yaml, as_yaml


def test_an_instance_refused_keeps_the_request_id_it_was_refused_in(conf, tmp_path, stack):
    service, add_agent, client = stack
    add_agent("agent-1")
    [uuid], request_spec, filter_properties = request(memory_mb=10 ** 6)  # larger than agent-1
    request_id = rpc.new_request_id()
    client.run_instance({"request_id": request_id}, request_spec, filter_properties)
    refused = wait_for(lambda: (service.database.get_instance(uuid) or {}).get("state") == "ERROR"
                       and service.database.get_instance(uuid), "ERROR")
    assert refused["request_id"] == request_id
    status, shown = berth(conf, tmp_path, "show", uuid, "-f", "json")
    assert json.loads(shown)["request_id"] == request_id, shown
