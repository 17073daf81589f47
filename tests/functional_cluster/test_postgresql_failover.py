"""A PostgreSQL primary stops as a crash would in the middle of a burst, and its streaming
standby is promoted: two schedulers whose [database] connection names both servers
(target_session_attrs=read-write) hold what they cannot commit, reach the new primary by
themselves and say so once each; every request ends ACTIVE, each built once, on one host.
And a write that reaches the standby before its promotion waits for it."""

import collections
import logging
import re
import threading
import time

from prometheus_client import REGISTRY

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from scheduler.db.api import Database
from tests.fixtures import temporary_vhost
from tests.functional import wire
from tests.functional.fleet import Fleet
from tests.functional.test_faults import outcome
from tests.functional_cluster.postgresql_pair import postgresql_pair, query

SCHEDULERS = ("failover-s1", "failover-s2")
AGENTS = tuple(f"failover-a{i}" for i in range(4))
REQUESTS = 200  # of one instance each
RATE = 40  # requests a second
CRASH_AT = 2.0  # seconds into the burst
PASSWORD = "s3cret-failover"  # trust auth never asks for it: only the logs can show it


def logged_per_instance(fleet, pattern, uuids):
    """How many times the agents logged ``pattern`` (with {uuid}) for each instance."""
    logs = "".join(fleet.log(a) for a in AGENTS)
    return collections.Counter(logs.count(pattern.format(uuid=u)) for u in uuids)


def test_the_standby_promoted_mid_burst_takes_over(tmp_path):
    began = time.monotonic()
    with postgresql_pair() as pair, temporary_vhost() as transport_url:
        old, new = (f"127.0.0.1:{c.port}" for c in (pair.primary, pair.standby))
        fleet = Fleet(
            tmp_path, f"{pair.url}&password={PASSWORD}", transport_url,
            DEFAULT__debug="false",
            database__max_retries="20",
            database__retry_interval="0.5",
            oslo_messaging_rabbit__rabbit_retry_interval="0.5",
        )
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=2048, fake_vcpus=128,
                                  fake_build_time=0.5)
            fleet.wait_hosts_up(AGENTS)

            failover = {}

            def fail_over():
                time.sleep(CRASH_AT)
                failover["crash"] = time.monotonic()
                pair.crash_primary()
                pair.promote_standby()
                failover["promoted"] = time.monotonic()

            thread = threading.Thread(target=fail_over)
            thread.start()
            uuids, start = [], time.monotonic()
            for n in range(REQUESTS):
                time.sleep(max(0.0, start + n / RATE - time.monotonic()))
                spec, props = build_request(flavors.get("m1.tiny"), 1)
                fleet.client.run_instance({}, spec, props)
                uuids += spec["instance_uuids"]
            thread.join()
            assert not pair.in_recovery(pair.standby)

            instances, errors = outcome(fleet, uuids, AGENTS)
            settled = time.monotonic() - failover["promoted"]
            assert errors == {}, f"{len(errors)} of {len(uuids)} in ERROR, e.g. {next(iter(errors.items()))}"
            assert sorted(instances) == sorted(uuids)
            assert {i["state"] for i in instances.values()} == {"ACTIVE"}
            # Built once each: one claim and one build on the agents, whatever the schedulers retried.
            assert logged_per_instance(fleet, "Claimed {uuid} on", uuids) == {1: len(uuids)}
            assert logged_per_instance(fleet, "Instance {uuid} is ACTIVE on", uuids) == {1: len(uuids)}
            assert wire.dead_letter_count(fleet) == 0, wire.dead_letters(fleet, 5)
            fleet.check_alive()

            reconnects = {}
            for name in SCHEDULERS:
                log = fleet.log(name)
                assert PASSWORD not in log
                reconnects[name] = re.findall(r"Database .*: connected to (\S+)(?: \(it was (\S+)\))? after "
                                              r"([\d.]+) s without a working connection", log)
            # Each scheduler says once that it reached the new primary, not once per query or retry.
            assert {n: [(s, w) for s, w, _ in r] for n, r in reconnects.items()} == {
                n: [(new, old)] for n in SCHEDULERS}, reconnects
            print(f"\n{len(uuids)} boots, primary crashed {CRASH_AT} s into the burst and the standby "
                  f"promoted {failover['promoted'] - failover['crash']:.1f} s later: all ACTIVE, each "
                  f"built once, {settled:.1f} s after the promotion; reconnects logged "
                  f"{ {n: float(r[0][2]) for n, r in reconnects.items()} } s after the loss; "
                  f"test took {time.monotonic() - began:.1f} s")
        finally:
            fleet.close()


def test_a_write_that_reaches_the_standby_waits_for_its_promotion(caplog):
    """Without target_session_attrs libpq takes the first server that answers: the standby,
    once the primary is gone. Its refusal (a read-only transaction) is retried on a new
    connection until the standby is promoted, and said over once."""
    began = time.monotonic()
    with postgresql_pair() as pair:
        primary = Database(f"postgresql+psycopg2://postgres@127.0.0.1:{pair.primary.port}/berth")
        primary.sync()
        primary.dispose()
        pair.wait_replayed()
        pair.crash_primary()
        standby = f"127.0.0.1:{pair.standby.port}"
        database = Database(pair.url.replace("&target_session_attrs=read-write", ""), max_retries=100,
                            retry_interval=0.2)
        promoted = threading.Timer(2.0, pair.promote_standby)
        try:
            assert sum(database.count_instances_by_state().values()) == 0  # a read: the standby answers
            opened, retried = (REGISTRY.get_sample_value(f"berth_database_{n}_total")
                               for n in ("connections", "retries"))
            promoted.start()
            with caplog.at_level(logging.INFO, "scheduler.db"):
                assert database.create_instances([{
                    "uuid": "failover-1", "project_id": "p1", "flavor_name": "m1.tiny", "memory_mb": 512,
                    "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1, "request_spec": {"num_instances": 1},
                    "filter_properties": {}}]) == ["failover-1"]
            promoted.join()
            opened, retried = (REGISTRY.get_sample_value(f"berth_database_{n}_total") - before
                               for n, before in (("connections", opened), ("retries", retried)))
            # The standby's connection was dropped at each refusal: every attempt connected anew.
            assert opened == retried >= 1
            assert database.get_instance("failover-1")["uuid"] == "failover-1"
            assert query(pair.standby, "SELECT pg_is_in_recovery()") == (False,)
        finally:
            promoted.cancel()
            database.dispose()
    said = [r.getMessage() for r in caplog.records if r.name.startswith("scheduler.db")]
    warned = [m for m in said if "create_instances failed" in m]
    assert len(warned) == 1 and "read-only transaction" in warned[0], said
    reached = [m for m in said if re.search(r": connected to \S+ after", m)]
    assert len(reached) == 1 and f"connected to {standby} after" in reached[0], said
    assert "(first failure: ReadOnlySqlTransaction: cannot execute INSERT in a read-only transaction)" \
        in reached[0]
    print(f"\nthe write to the standby went through once it was promoted, after {retried:.0f} attempts "
          f"on as many connections; logged once: "
          f"{reached[0].split(': ', 1)[1]}; test took {time.monotonic() - began:.1f} s")
