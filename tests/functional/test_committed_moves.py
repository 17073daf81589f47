"""A command that follows a committed move reaches its agent whatever fails between the commit
and the cast: a scheduler killed right after committing a move, and resizes in place confirmed by
``resize_confirm_window`` while RabbitMQ is stopped. Real processes on the real RabbitMQ and
PostgreSQL (RabbitMQ on a node of the test's own for the broker's stop)."""

import threading
import time

import pytest

from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional_cluster.rabbit_cluster import private_node

pytestmark = pytest.mark.functional

RESERVED = 512  # [compute_agent] reserved_host_memory_mb's default


def boot_on(fleet, host, memory_mb):
    request_spec, filter_properties = build_request({"memory_mb": memory_mb, "root_gb": 1, "vcpus": 1}, 1)
    filter_properties["force_hosts"] = [host]
    fleet.client.run_instance({}, request_spec, filter_properties)
    [uuid] = request_spec["instance_uuids"]
    return uuid


def test_a_move_whose_scheduler_dies_right_after_its_commit_completes_and_the_call_answers_it(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url)
        try:
            fleet.start_scheduler("dies", module="tests.functional.move_crashing_scheduler")
            for host in ("h1", "h2"):
                fleet.start_agent(host)
            fleet.wait_hosts_up(["h1", "h2"])
            uuid = boot_on(fleet, "h1", 1024)
            fleet.wait_states([uuid], ("ACTIVE",))

            migrating = {}
            command = threading.Thread(target=lambda: migrating.update(
                result=fleet.cli("migrate", uuid, "-f", "value", "-c", "ID", "-c", "STATUS", "-c", "DEST")))
            command.start()
            assert fleet.processes.pop("dies").wait(60) == 9
            began = time.monotonic()
            fleet.start_scheduler("lives")  # the call it died on comes back to this one
            command.join(120)
            result = migrating["result"]
            assert result.returncode == 0, result.stdout + result.stderr
            migration_id, status, dest = result.stdout.split()
            assert (status, dest) == ("migrating", "h2")

            [moved] = fleet.wait_states([uuid], ("ACTIVE",), timeout=60).values()
            fleet.wait(lambda: fleet.instances([uuid])[uuid]["host"] == "h2", 30, "the move to end")
            took = time.monotonic() - began
            [migration] = fleet.client.list_migrations({}, instance_uuid=uuid)
            assert (migration["id"], migration["status"]) == (int(migration_id), "completed")
            assert "asked for again; answered with it" in fleet.log("lives")
            print(f"\nmigration {migration_id} completed {took:.1f} s after the second scheduler started")
        finally:
            fleet.close()


def hosts_used(fleet):
    return {name: host["memory_mb_used"] for name, host in fleet.hosts().items()}


@pytest.fixture
def private_rabbitmq(tmp_path_factory):
    """A RabbitMQ node of this test's own (port 5711): stopping it disturbs no other test."""
    with private_node(tmp_path_factory.mktemp("rabbit-node"), 5711, "berth-c") as node:
        yield node


def test_resizes_in_place_confirmed_while_the_broker_is_stopped_end_on_their_agents(tmp_path,
                                                                                      private_rabbitmq):
    """The confirm's end_resize cannot be sent; once RabbitMQ is back, the agents' reports show the
    resizes still open and the scheduler tells them again: they end at the new (smaller) size, and a
    further resize in place works."""
    [node] = private_rabbitmq.nodes
    with temporary_database() as url, private_rabbitmq.temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, scheduler__resize_confirm_window=30,
                      scheduler__service_down_time=10,
                      oslo_messaging_rabbit__rabbit_retry_interval=0.5,
                      oslo_messaging_rabbit__rabbit_retry_backoff=1.0,
                      oslo_messaging_rabbit__rabbit_interval_max=2)
        try:
            fleet.start_schedulers(["s1"])
            for host in ("h1", "h2"):
                fleet.start_agent(host)
            fleet.wait_hosts_up(["h1", "h2"])
            uuids = {host: boot_on(fleet, host, 2048) for host in ("h1", "h2")}
            fleet.wait_states(list(uuids.values()), ("ACTIVE",))
            for uuid in uuids.values():  # shrink the memory in place: the agents hold the larger meanwhile
                resized = fleet.cli("resize", uuid, "--flavor-ram", "1024", "--flavor-vcpus", "2")
                assert resized.returncode == 0, resized.stderr
            fleet.wait_states(list(uuids.values()), ("VERIFY_RESIZE",), timeout=60)

            private_rabbitmq.stop_app(node)
            try:  # the window passes: the scheduler confirms both, and cannot tell the agents
                fleet.wait(lambda: fleet.log("s1").count("confirmed by itself after") == 2
                           and ("MessageDeliveryFailure" in fleet.log("s1")
                                or "could not be told now" in fleet.log("s1")), 90,
                           "the scheduler to confirm both and fail to tell their agents")
            finally:
                private_rabbitmq.start_app(node)
            back = time.monotonic()
            rows = fleet.wait_states(list(uuids.values()), ("ACTIVE",), timeout=60)
            assert {row["memory_mb"] for row in rows.values()} == {1024}

            ended = fleet.wait(lambda: hosts_used(fleet) == {"h1": RESERVED + 1024, "h2": RESERVED + 1024}
                               and hosts_used(fleet), 90, "the agents to hold the new size alone",
                               last_seen=lambda: hosts_used(fleet))
            took = time.monotonic() - back
            assert "open, which was confirmed at" in fleet.log("s1")  # told again, having read their reports
            for uuid in uuids.values():
                again = fleet.cli("resize", uuid, "--flavor-ram", "1536", "--flavor-vcpus", "2")
                assert again.returncode == 0, again.stderr
            rows = fleet.wait_states(list(uuids.values()), ("VERIFY_RESIZE",), timeout=60)
            assert {row["memory_mb"] for row in rows.values()} == {1536}
            print(f"\nboth agents held the confirmed size alone {took:.1f} s after the broker was back: "
                  f"{ended}")
        finally:
            fleet.close()
