"""Berth on a three-node RabbitMQ cluster with quorum queues: the node leading the
``scheduler`` queue is killed in the middle of a burst and started again.

Two schedulers and ten agents are given all three nodes in transport_url. While the
node is down every process finds a running node and consumes its queues again, the
burst goes on, and in the end every request is ACTIVE, built once, on one host, and
the hosts' figures add up to what was built.
"""

import collections
import re
import threading
import time

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from scheduler.db.api import Database
from tests.functional.fleet import Fleet, temporary_database
from tests.functional.test_faults import outcome, placed, wait_placed

SCHEDULERS = ("cluster-s1", "cluster-s2")
AGENTS = tuple(f"cluster-a{i}" for i in range(10))
REQUESTS = 200  # of one instance each
TINY = flavors.get("m1.tiny")


def start(tmp_path, database_url, transport_url):
    fleet = Fleet(
        tmp_path, database_url, transport_url,
        DEFAULT__debug="false",
        oslo_messaging_rabbit__rabbit_quorum_queue="true",
        oslo_messaging_rabbit__rabbit_retry_interval=0.5,
        oslo_messaging_rabbit__rabbit_retry_backoff=1.0,
        oslo_messaging_rabbit__rabbit_interval_max=2,
    )
    fleet.start_schedulers(SCHEDULERS)
    for host in AGENTS:
        fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=2048, fake_vcpus=64)
    fleet.wait_hosts_up(AGENTS)
    return fleet


class Burst(threading.Thread):
    """Casts REQUESTS single-instance builds as ``berth server create`` does, spread over
    ``seconds``, so that a node can stop while it goes on."""

    def __init__(self, fleet, seconds):
        super().__init__(name="burst", daemon=True)
        self.fleet, self.pause = fleet, seconds / REQUESTS
        self.uuids, self.error = [], None

    def run(self):
        try:
            for _ in range(REQUESTS):
                spec, props = build_request(TINY, 1)
                self.fleet.client.run_instance({}, spec, props)
                self.uuids += spec["instance_uuids"]
                time.sleep(self.pause)
        except Exception as exc:  # reported by the test
            self.error = exc


WANTED = {"scheduler": len(SCHEDULERS), "scheduler_agents": len(SCHEDULERS),
          **{f"scheduler.{s}": 1 for s in SCHEDULERS},
          **{f"compute.{a}": 1 for a in AGENTS}}


def every_queue_consumed(cluster, vhost, node):
    """The vhost's queues, once each shared queue has its consumers and each process its
    fanout queue again, as ``node`` lists them. (An AMQP client's passive declare would
    also count the consumers of the connections lost with a node that is down, which a
    quorum queue keeps while that node is away.)"""
    queues = cluster.queues(vhost, node)
    fanouts = collections.Counter(name.split("_fanout_")[0] for name, queue in queues.items()
                                  if "_fanout_" in name and queue["consumers"])
    if any(queues.get(name, {}).get("consumers") != count for name, count in WANTED.items()):
        return None
    if fanouts != {"scheduler": len(SCHEDULERS), "scheduler_agents": len(SCHEDULERS),
                   "compute": len(AGENTS)}:
        return None
    return queues


def consumers(cluster, vhost, node):
    return {name: queue["consumers"] for name, queue in cluster.queues(vhost, node).items()}


def reconnect_times(fleet):
    """How long each process that lost its connection took to consume again, as it logged it."""
    found = [float(m) for name in (*SCHEDULERS, *AGENTS)
             for m in re.findall(r"reconnected to \S+ after ([0-9.]+) s", fleet.log(name))]
    return sorted(found)


def logged_per_instance(fleet, pattern, uuids):
    """{times logged: instances}: how often the agents logged ``pattern`` for each instance."""
    logs = "".join(fleet.log(a) for a in AGENTS)
    return collections.Counter(logs.count(pattern.format(uuid=u)) for u in uuids)


def usage(hosts):
    return {h: (v["memory_mb_used"], v["local_gb_used"], v["vcpus_used"], v["running_vms"], v["pending"])
            for h, v in hosts.items() if h in AGENTS}


def test_the_scheduler_queue_leader_killed_mid_burst(tmp_path, rabbit_cluster, cluster_url):
    vhost = cluster_url.rsplit("/", 1)[1]
    all_nodes = sorted(n.name for n in rabbit_cluster.nodes)
    with temporary_database() as database_url:
        fleet = start(tmp_path, database_url, cluster_url)
        database = Database(database_url)
        stopped = None
        try:
            # The shared queues and the dead-letter queue are quorum queues with a member on every node.
            queues = rabbit_cluster.queues(vhost)
            for name in (*WANTED, f"{fleet.exchange}.dead-letters"):
                assert queues[name]["type"] == "quorum", (name, queues[name])
                assert sorted(queues[name]["members"]) == all_nodes, (name, queues[name])
            idle = usage(fleet.hosts())
            leader = rabbit_cluster.leader(vhost, "scheduler")
            other = next(n for n in rabbit_cluster.nodes if n is not leader)

            burst = Burst(fleet, seconds=20)
            burst.start()
            wait_placed(fleet, database, 30)
            stopped = leader
            rabbit_cluster.kill(leader)
            began = time.monotonic()
            placed_at_stop, cast_at_stop = placed(database), len(burst.uuids)
            # With the node down, every process is back on the others and the queue has a new leader.
            fleet.wait(lambda: every_queue_consumed(rabbit_cluster, vhost, other), 120,
                       f"every queue to be consumed again while {leader.name} is down", interval=1,
                       last_seen=lambda: consumers(rabbit_cluster, vhost, other))
            consumed_again_in = time.monotonic() - began
            new_leader = rabbit_cluster.leader(vhost, "scheduler", other)
            assert new_leader is not leader
            placed_while_down = placed(database) - placed_at_stop
            rabbit_cluster.restart(leader)
            down_for = time.monotonic() - began
            stopped = None

            burst.join(120)
            assert not burst.is_alive() and burst.error is None, burst.error
            uuids = burst.uuids
            instances, errors = outcome(fleet, uuids, AGENTS)
            fleet.check_alive()
            reconnected = reconnect_times(fleet)
            took = reconnected or [float("nan")]
            print(f"\n{len(uuids)} instances; {new_leader.name} leads 'scheduler' once {leader.name} is "
                  f"killed ({cast_at_stop} cast, {placed_at_stop} placed then); {len(reconnected)} consumers "
                  f"reconnected, in {took[len(took) // 2]:.1f} s (median; {took[0]:.1f}-{took[-1]:.1f} s), "
                  f"every queue seen consumed {consumed_again_in:.1f} s after the kill; "
                  f"{placed_while_down} placed while the node was down ({down_for:.1f} s, its restart "
                  f"included); {len(instances) - len(errors)} ACTIVE")

            # Every request was placed, built and made ACTIVE exactly once, on one host.
            assert len(uuids) == REQUESTS
            assert errors == {}
            assert sorted(instances) == sorted(uuids)
            assert {i["state"] for i in instances.values()} == {"ACTIVE"}
            counts = database.count_instances_by_state()
            assert counts["ACTIVE"] == sum(counts.values()) == REQUESTS
            assert logged_per_instance(fleet, "Claimed {uuid} on", uuids) == {1: REQUESTS}
            assert logged_per_instance(fleet, "Instance {uuid} is ACTIVE on", uuids) == {1: REQUESTS}
            # The fleet's use adds up: each host holds its idle use plus one m1.tiny per instance on it.
            where = collections.Counter(i["host"] for i in instances.values())

            def expected():
                return {h: (m + where[h] * TINY["memory_mb"], d + where[h] * TINY["root_gb"],
                            c + where[h] * TINY["vcpus"], n + where[h], 0)
                        for h, (m, d, c, n, _) in idle.items()}

            fleet.wait(lambda: usage(fleet.hosts()) == expected(), 60, "the hosts' figures to add up",
                       last_seen=lambda: usage(fleet.hosts()))
            # The node that came back is an online member of the queue again.
            fleet.wait(lambda: sorted(rabbit_cluster.queues(vhost)["scheduler"]["online"]) == all_nodes, 60,
                       "the restarted node to be back in the queue")
        finally:
            if stopped is not None:
                rabbit_cluster.restart(stopped)
            database.dispose()
            fleet.close()
