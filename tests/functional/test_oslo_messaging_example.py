"""examples/oslo_messaging_client.py, as an API-service author runs it, against a real Berth.

A scheduler and two agents at Berth's defaults (durable exchange `berth`) on
RabbitMQ and PostgreSQL; the example runs with its own configuration file,
only transport_url pointed at the test's virtual host.
"""

import pathlib
import re
import subprocess
import sys

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

pytestmark = pytest.mark.functional

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
AGENTS = ("oslo-a", "oslo-b")
DURABLE_LINE = ("exchange berth (durable: clients must set [oslo_messaging_rabbit] amqp_durable_queues = "
                "true)")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oslo-example")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp, url, transport_url, DEFAULT__control_exchange="berth", DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["oslo-sched"])
            for host in AGENTS:
                fleet.start_agent(host)
            fleet.wait_hosts_up(AGENTS)
            yield fleet
        finally:
            fleet.close()


def run_example(fleet, *args, durable="true"):
    """The example on its configuration file, with transport_url the fleet's (and
    amqp_durable_queues ``durable``)."""
    text = (EXAMPLES / "oslo_messaging_client.conf").read_text()
    text, found = re.subn(r"(?m)^transport_url = .*$", f"transport_url = {fleet.conf.transport_url}", text)
    assert found == 1
    text, found = re.subn(r"(?m)^amqp_durable_queues = true$", f"amqp_durable_queues = {durable}", text)
    assert found == 1
    conf = fleet.tmp / f"oslo-client-{durable}.conf"
    conf.write_text(text)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "oslo_messaging_client.py"), "--config-file", str(conf), *args],
        capture_output=True, text=True, timeout=180, cwd=fleet.tmp,
    )


def test_the_scheduler_says_at_start_which_setting_its_clients_need(fleet):
    assert DURABLE_LINE in fleet.log("oslo-sched")


def test_the_example_boots_instances_that_end_active(fleet):
    result = run_example(fleet, "--flavor", "m1.small", "--count", "3")
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    assert len(lines) == 3
    assert all(state == "ACTIVE" and host in AGENTS for _, state, host in lines)
    uuids = [uuid for uuid, _, _ in lines]
    for uuid in uuids:
        shown = fleet.cli("show", uuid)
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"(?m)^\| state +\| ACTIVE +\|$", shown.stdout)
        assert re.search(r"(?m)^\| flavor_name +\| m1.small +\|$", shown.stdout)
    assert {u: i["state"] for u, i in fleet.instances(uuids).items()} == dict.fromkeys(uuids, "ACTIVE")


def test_at_oslo_default_the_example_names_the_setting_and_boots_nothing(fleet):
    before = fleet.instances()
    result = run_example(fleet, "--count", "2", durable="false")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        "oslo_messaging_client: RabbitMQ refused the exchange 'berth' as declared: set "
        "[oslo_messaging_rabbit] amqp_durable_queues = true to match the Berth scheduler's durable exchange"
    )
    assert fleet.instances() == before



def test_a_scheduler_made_not_durable_says_so_and_the_example_still_boots(tmp_path):
    """oslo.messaging falls back to an exchange it finds non-durable by itself."""
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__control_exchange="berth", DEFAULT__debug="false",
                      oslo_messaging_rabbit__amqp_durable_queues="false")
        try:
            fleet.start_schedulers(["transient-sched"])
            fleet.start_agent(AGENTS[0])
            fleet.wait_hosts_up(AGENTS[:1])
            assert "exchange berth (not durable): filters" in fleet.log("transient-sched")
            for durable in ("true", "false"):
                result = run_example(fleet, durable=durable)
                assert result.returncode == 0, result.stderr
                assert result.stdout.split()[1:] == ["ACTIVE", AGENTS[0]]
        finally:
            fleet.close()


def test_a_scheduler_meeting_an_exchange_a_client_declared_otherwise_says_what_to_do(tmp_path):
    import kombu

    with temporary_database() as url, temporary_vhost() as transport_url:
        # What an oslo.messaging client at its defaults leaves behind when it runs first.
        with kombu.Connection(transport_url.replace("rabbit://", "amqp://", 1)) as conn:
            kombu.Exchange("berth", type="topic", durable=False)(conn.channel()).declare()
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__control_exchange="berth", DEFAULT__debug="false")
        try:
            fleet.start_scheduler("stuck-sched")
            fleet.wait(lambda: "inequivalent arg 'durable'" in fleet.log("stuck-sched"), 60, "the refusal")
            line = next(line for line in fleet.log("stuck-sched").splitlines() if "inequivalent arg" in line)
            assert " ERROR " in line
            assert "amqp_durable_queues is not true like this service's; make the settings agree, " \
                   "then delete it" in line
        finally:
            fleet.close()
