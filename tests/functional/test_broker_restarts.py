"""RabbitMQ stopped for 10 s, and restarted whole, in the middle of a burst, with two
schedulers and ten agents: every process reconnects, declares its queues again and
consumes them, says so in its log, and every request ends ACTIVE.

The broker is a RabbitMQ node of this module's own (berth-restarts1@localhost on port 5751,
started beside the machine's as the cluster tests' nodes are): stopping it disturbs no other
test, so the module runs beside the others.

The build timeout stays at its default (600 s): an instance that ends ACTIVE here was
not rescued by a timeout, its messages all went through.
"""

import collections
import time

import pytest

from tests.fixtures import temporary_database
from tests.functional import wire
from tests.functional.fleet import Fleet
from tests.functional.test_faults import burst, outcome, placed, wait_placed
from tests.functional_cluster.rabbit_cluster import private_node

SCHEDULERS = ("restart-s1", "restart-s2")
AGENTS = tuple(f"restart-a{i}" for i in range(10))
REQUESTS = 400  # of 2 instances each


@pytest.fixture(scope="module")
def private_rabbitmq(tmp_path_factory):
    """A RabbitMQ node of this module's own, each test in a vhost of its own."""
    with private_node(tmp_path_factory.mktemp("rabbit-node"), 5751, "berth-restarts") as node:
        yield node


def start(tmp_path, url, transport_url):
    fleet = Fleet(
        tmp_path, url, transport_url,
        DEFAULT__debug="false",
        oslo_messaging_rabbit__rabbit_retry_interval=0.5,
        oslo_messaging_rabbit__rabbit_retry_backoff=1.0,
        oslo_messaging_rabbit__rabbit_interval_max=2,
    )
    fleet.start_schedulers(SCHEDULERS)
    for host in AGENTS:
        fleet.start_agent(host, fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256)
    fleet.wait_hosts_up(AGENTS)
    return fleet


def consumers(cluster, vhost):
    """{queue name: (consumers, messages)} of the fleet's vhost."""
    return {name: (q["consumers"], q["messages"]) for name, q in cluster.queues(vhost).items()}


def every_queue_consumed(cluster, vhost):
    """Whether each shared queue has its consumers again and each process its fanout queues (a
    scheduler's clients' server and its agents' server, which takes the reports, one each)."""
    queues = consumers(cluster, vhost)
    fanouts = collections.Counter(name.split("_fanout_")[0] for name in queues if "_fanout_" in name)
    wanted = {"scheduler": len(SCHEDULERS), "scheduler_agents": len(SCHEDULERS),
              **{f"scheduler.{s}": 1 for s in SCHEDULERS}, **{f"compute.{a}": 1 for a in AGENTS}}
    missing = {name: queues.get(name, (0, 0)) for name, count in wanted.items()
               if queues.get(name, (0, 0))[0] != count}
    if missing or fanouts != {"scheduler": len(SCHEDULERS), "scheduler_agents": len(SCHEDULERS),
                              "compute": len(AGENTS)}:
        return None
    return queues


def logged_per_instance(fleet, pattern, uuids):
    """How many times the agents logged ``pattern`` (with {uuid}) for each instance."""
    logs = "".join(fleet.log(a) for a in AGENTS)
    return collections.Counter(logs.count(pattern.format(uuid=u)) for u in uuids)


def hosts_agree(fleet, instances):
    """The scheduler's host figures, once they count exactly the ACTIVE instances on each host."""
    where = collections.Counter(i["host"] for i in instances.values())
    hosts = fleet.hosts()
    if all(hosts[a]["running_vms"] == where[a] and hosts[a]["pending"] == 0 for a in AGENTS):
        return hosts
    return None


def run_through_outage(tmp_path, cluster, outage, bundled):
    with temporary_database() as url, cluster.temporary_vhost() as transport_url:
        fleet = start(tmp_path, url, transport_url)
        from scheduler.db.api import Database

        database = Database(url)
        try:
            uuids = burst(fleet, REQUESTS, bundled=bundled)
            wait_placed(fleet, database, 60)
            active_at_stop = database.count_instances_by_state()["ACTIVE"]
            began = time.monotonic()
            outage()
            down_for = time.monotonic() - began
            at_restart = placed(database)
            queues = fleet.wait(lambda: every_queue_consumed(cluster, wire.vhost_of(transport_url)), 90,
                                "every queue to be consumed again")
            instances, errors = outcome(fleet, uuids, AGENTS)
            fleet.check_alive()
            reconnected = [n for n in (*SCHEDULERS, *AGENTS) if "reconnected to" in fleet.log(n)]
            cast = " cast in bundles" if bundled else ""
            print(f"\n{len(uuids)} instances{cast}, broker away {down_for:.1f} s with {at_restart} placed "
                  f"and {active_at_stop} ACTIVE: {len(instances) - len(errors)} ACTIVE, {len(errors)} ERROR; "
                  f"{len(queues)} queues consumed again; {len(reconnected)} processes logged their reconnect")

            # Every request was placed, built and made ACTIVE exactly once; nothing lost, nothing extra.
            assert len(uuids) == 2 * REQUESTS
            assert errors == {}
            assert sorted(instances) == sorted(uuids)
            assert {i["state"] for i in instances.values()} == {"ACTIVE"}
            counts = database.count_instances_by_state()
            assert counts["ACTIVE"] == sum(counts.values()) == len(uuids)
            assert logged_per_instance(fleet, "Claimed {uuid} on", uuids) == {1: len(uuids)}
            assert logged_per_instance(fleet, "Instance {uuid} is ACTIVE on", uuids) == {1: len(uuids)}
            # The scheduler's view of the hosts (what ``berth host list`` shows) counts each instance once.
            hosts = fleet.wait(lambda: hosts_agree(fleet, instances), 60, "the hosts' figures to agree")
            assert sum(hosts[a]["running_vms"] for a in AGENTS) == len(uuids)
            # Every process came back to the broker by itself.
            assert sorted(reconnected) == sorted((*SCHEDULERS, *AGENTS))
        finally:
            database.dispose()
            fleet.close()


#: Each request in a message of its own, and a hundred to a message (bundles, scheduler API 1.3).
CASTS = pytest.mark.parametrize("bundled", [False, True], ids=["alone", "bundled"])


@CASTS
def test_a_10_second_broker_stop_mid_burst(tmp_path, private_rabbitmq, bundled):
    cluster = private_rabbitmq
    [node] = cluster.nodes

    def outage():
        try:
            cluster.stop_app(node)
            time.sleep(10)
        finally:
            cluster.start_app(node)

    run_through_outage(tmp_path, cluster, outage, bundled)


@CASTS
def test_a_full_broker_restart_mid_burst(tmp_path, private_rabbitmq, bundled):
    cluster = private_rabbitmq
    [node] = cluster.nodes

    def outage():
        try:
            cluster.ctl(node, "stop")
            node.process.wait(60)
        finally:
            cluster.restart(node)

    run_through_outage(tmp_path, cluster, outage, bundled)
