"""Who may speak for a host: each agent has its own RabbitMQ user, and the scheduler
accepts a host's reports and updates only from that host's user."""

import uuid

import kombu
import pytest

from scheduler import rpc
from scheduler.client import SchedulerClient
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost, write_conf

HOSTS = ("auth-a", "auth-b")


def _url(transport_url, user, password):
    scheme, rest = transport_url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest.split('@', 1)[1]}"


def _forged_report(host):
    return {
        "host": host,
        "nodename": host,
        "memory_mb": 999_999,
        "free_ram_mb": 999_999,
        "local_gb": 99_999,
        "free_disk_gb": 99_999,
        "vcpus": 999,
        "vcpus_used": 0,
        "instance_uuids": [],
        "running_vms": 0,
    }


@pytest.fixture
def agent_users(tmp_path):
    tag = uuid.uuid4().hex[:8]
    users = {host: (f"berth-{host}-{tag}", uuid.uuid4().hex) for host in HOSTS}
    try:
        yield users
    finally:
        for user, _ in users.values():
            wire.rabbitmqctl("delete_user", user, check=False)


def test_a_report_for_host_a_from_agent_bs_user_is_rejected(tmp_path, agent_users):
    with temporary_database() as url, temporary_vhost() as transport_url:
        vhost = wire.vhost_of(transport_url)
        for user, password in agent_users.values():
            wire.rabbitmqctl("add_user", user, password)
            wire.rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        mapping = ",".join(f"{host}:{user}" for host, (user, _) in agent_users.items())
        fleet = Fleet(
            tmp_path, url, transport_url, scheduler__agent_users=mapping, scheduler__require_agent_auth="true"
        )
        forger = None
        try:
            fleet.start_scheduler()
            fleet.wait(lambda: fleet.hosts() is not None, 60, "the scheduler to answer")
            urls = {h: _url(transport_url, *agent_users[h]) for h in HOSTS}
            for i, host in enumerate(HOSTS):
                conf = write_conf(
                    tmp_path / f"{host}.conf",
                    {
                        "DEFAULT": {"host": host, "transport_url": urls[host]},
                        "compute_agent": {"fake_memory_mb": 8192 * (i + 1)},
                    },
                )
                fleet._spawn(host, "compute_agent.cmd.agent", "--config-file", str(conf))
            # Their own reports are accepted: both hosts are up with their real sizes.
            hosts = fleet.wait_hosts_up(HOSTS) and fleet.hosts()
            assert hosts["auth-a"]["memory_mb"] == 8192

            # Agent B's broker user reports for host A; so does the guest user.
            forger = rpc.get_transport(fleet.conf, urls["auth-b"])
            SchedulerClient(forger).report_resources({}, "auth-a", _forged_report("auth-a"))
            SchedulerClient(fleet.transport).report_resources({}, "auth-a", _forged_report("auth-a"))
            user_b = agent_users["auth-b"][0]
            fleet.wait(
                lambda: f"sent by broker user '{user_b}'" in fleet.log("scheduler"),
                30,
                "the scheduler to log the rejection",
            )
            fleet.wait(
                lambda: "sent by broker user 'guest'" in fleet.log("scheduler"),
                30,
                "the scheduler to log the guest's rejection",
            )
            assert fleet.hosts()["auth-a"]["memory_mb"] == 8192  # host A's state unchanged
            rejected = [
                m
                for m in wire.dead_letters(fleet, 10)
                if m.headers["x-berth-reason"].startswith("NotAuthorized")
            ]
            assert len(rejected) == 2
            assert rejected[0].headers["x-berth-method"] == "report_resources"

            # Nor can B's connection claim to be A: RabbitMQ checks user_id itself.
            with kombu.Connection(
                urls["auth-b"].replace("rabbit://", "amqp://"), transport_options={"confirm_publish": True}
            ) as conn:
                with pytest.raises(Exception, match="user_id property set to|PRECONDITION"):
                    kombu.Producer(conn.channel()).publish(
                        wire.cast_body("report_resources", host="auth-a", resources=_forged_report("auth-a")),
                        exchange="scheduler_fanout",
                        routing_key="scheduler",
                        content_type="application/json",
                        content_encoding="utf-8",
                        user_id=agent_users["auth-a"][0],
                    )

            # The agents' own updates are accepted: a boot goes ACTIVE.
            instances = fleet.wait_states(fleet.boot(count=4), ("ACTIVE", "ERROR"))
            assert {i["state"] for i in instances.values()} == {"ACTIVE"}
            print(
                f"\nauth: forged reports rejected: {len(rejected)}; "
                f"host auth-a memory_mb still {fleet.hosts()['auth-a']['memory_mb']}; "
                f"{len(instances)} instances ACTIVE through the agents' own users"
            )
        finally:
            if forger is not None:
                forger.cleanup()
            fleet.close()
