"""A network partition between the scheduler and the broker, longer than service_down_time:
the hosts were alive all along, only the scheduler could not hear them. Once it hears again,
it places at once, on every host, without waiting for a fresh report from each."""

import time

from scheduler import states
from tests.fixtures import temporary_database, temporary_vhost
from tests.functional.fleet import Fleet, write_conf
from tests.functional.tcp_partition import Partition

HOSTS = [f"cut-{i}" for i in range(4)]
# Down after 4 reports missed: after the partition, the boots queued meanwhile are handled before
# the first fresh report (in the order they came), and on a loaded machine that takes seconds.
DOWN_TIME = 16
REPORT_INTERVAL = 4
PARTITION = 20  # seconds after the scheduler noticed it (8 s): longer than service_down_time


def test_a_scheduler_cut_off_from_its_broker_does_not_take_the_hosts_for_down(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        partition = Partition()
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      scheduler__service_down_time=str(DOWN_TIME),
                      compute_agent__report_interval=str(REPORT_INTERVAL),
                      oslo_messaging_rabbit__rabbit_retry_interval="0.5",
                      oslo_messaging_rabbit__rabbit_retry_backoff="0.5",
                      oslo_messaging_rabbit__rabbit_interval_max="1")
        try:
            conf = write_conf(tmp_path / "cut-s1.conf", {
                "DEFAULT": {"host": "cut-s1", "transport_url": partition.url(transport_url)},
                # The scheduler learns of the partition through missed heartbeats.
                "oslo_messaging_rabbit": {"heartbeat_timeout_threshold": 4},
            })
            fleet._spawn("cut-s1", "scheduler.cmd.scheduler", "--config-file", str(conf))
            for host in HOSTS:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=2048, fake_vcpus=64)
            fleet.wait_hosts_up(HOSTS)
            before = fleet.boot(requests=20)
            fleet.wait_states(before, (states.ACTIVE,), timeout=60)

            partition.cut()
            fleet.wait(lambda: " lost " in fleet.log("cut-s1"), 60, "the scheduler to notice the partition")
            during = fleet.boot(requests=60)  # queued on the broker: handled once the scheduler is back
            time.sleep(PARTITION)
            reconnected = fleet.log("cut-s1").count("reconnected to")
            partition.heal()
            fleet.wait(lambda: fleet.log("cut-s1").count("reconnected to") > reconnected, 60,
                       "the scheduler to reconnect")
            after = fleet.boot(requests=60)

            instances = fleet.wait_states(during + after, (states.ACTIVE, states.ERROR), timeout=120)
            refused = [i["fault_reason"] for i in instances.values() if i["state"] == states.ERROR]
            assert not refused, f"{len(refused)} of {len(instances)} refused, e.g. {refused[0]}"
            assert {i["attempts"] for i in instances.values()} == {1}
            print(f"\n{len(instances)} boots cast during and right after a {PARTITION} s partition: "
                  "all ACTIVE")
        finally:
            fleet.close()
            partition.close()
