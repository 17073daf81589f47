"""Three scheduler processes with ``[scheduler] report_ingestion = shared`` on the real RabbitMQ
and PostgreSQL: they share the agents' reports (one queue, three consumers) and every one of them
still sees every host as its agent last reported it; boots go ACTIVE."""

import collections
import contextlib

from scheduler.client import REPORTS_TOPIC
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

SCHEDULERS = ("shared-s1", "shared-s2", "shared-s3")
AGENTS = ("shared-a", "shared-b", "shared-c", "shared-d")


def views(fleet):
    """{scheduler: {host: its view}} of every scheduler, each asked on its own queue."""
    return {name: {h["host"]: h for h in fleet.scheduler_client(name).call({}, "list_hosts")}
            for name in SCHEDULERS}


@contextlib.contextmanager
def shared_fleet(tmp_path):
    """(Fleet, its transport URL): the three schedulers in shared ingestion and the agents,
    started on a vhost and a database of their own."""
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      scheduler__report_ingestion="shared")
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=1024, fake_vcpus=64)
            yield fleet, transport_url
        finally:
            fleet.close()


def wait_all_up(fleet):
    fleet.wait(lambda: all(set(AGENTS) <= {h for h, v in seen.items() if v["state"] == "up"}
                           for seen in views(fleet).values()),
               60, "every scheduler to see every host up", last_seen=lambda: views(fleet))


def latest(fleet):
    """{scheduler: {host: reported_at of the latest report it holds}}."""
    return {n: {h: v["reported_at"] for h, v in seen.items()} for n, seen in views(fleet).items()}


def test_three_schedulers_share_the_reports_and_each_sees_every_host_current(tmp_path):
    with shared_fleet(tmp_path) as (fleet, transport_url):
        # One queue on the reports' exchange, which the three consume.
        fleet.wait(lambda: fleet.transport.consumers(REPORTS_TOPIC) == len(SCHEDULERS), 60,
                   "the three schedulers to consume the shared reports queue")
        # Transient, its reports dropped after 60 s and itself once unused: none pile up.
        listed = wire.rabbitmqctl("list_queues", "-p", wire.vhost_of(transport_url), "name", "durable",
                                  "arguments").stdout
        [line] = [line for line in listed.splitlines() if line.startswith(REPORTS_TOPIC + "\t")]
        assert "\tfalse\t" in line and '"x-message-ttl",60000' in line and '"x-expires",' in line, line
        wait_all_up(fleet)

        instances = fleet.wait_states(fleet.boot(count=2, requests=6), ("ACTIVE", "ERROR"), timeout=180)
        assert {i["state"] for i in instances.values()} == {"ACTIVE"}
        per_host = collections.Counter(i["host"] for i in instances.values())

        # The agents' next reports list the instances; every scheduler sees them, through the
        # reports it took itself and those the others passed on.
        def current():
            return all({h: seen[h]["running_vms"] for h in AGENTS} ==
                       {h: per_host.get(h, 0) for h in AGENTS} for seen in views(fleet).values())

        fleet.wait(current, 60, "every scheduler to see each host's instances",
                   last_seen=lambda: {n: {h: v["running_vms"] for h, v in seen.items()}
                                      for n, seen in views(fleet).items()})
        # Each report is taken by one of them: the others hold it only through its digest.
        # Every scheduler holds each host's latest report at once (between two reports).
        def same_latest():
            seen = views(fleet)
            return all(len({seen[n][h]["reported_at"] for n in SCHEDULERS}) == 1 for h in AGENTS)

        fleet.wait(same_latest, 30, "the three schedulers to hold the same latest report of each host",
                   interval=0.1, last_seen=lambda: {n: {h: v["reported_at"] for h, v in seen.items()}
                                                    for n, seen in views(fleet).items()})
        for name in SCHEDULERS:
            log = fleet.log(name)
            assert "Digest of reports refused" not in log
            assert "cannot be passed on" not in log


def test_shared_ingestion_survives_the_broker_closing_every_connection(tmp_path):
    """RabbitMQ closes every connection of the vhost (the schedulers' RPC servers, their digests
    in and out, the agents): each reconnects, and every scheduler again holds every host's latest
    report, through the reports it takes and the digests of the others; no host is said down."""
    with shared_fleet(tmp_path) as (fleet, transport_url):
        wait_all_up(fleet)
        before = latest(fleet)
        closed = wire.rabbitmqctl("close_all_connections", "--vhost", wire.vhost_of(transport_url),
                                  "closed by the shared ingestion test")
        assert closed.stdout.startswith("Closed"), closed.stdout
        fleet.wait(lambda: all(f"report-digests-{name}: reconnected" in fleet.log(name)
                               for name in SCHEDULERS),
                   60, "every scheduler's digests to reconnect")

        # Each host's report after the close, the same one in all three schedulers.
        def caught_up():
            seen = latest(fleet)
            return all(seen[n][h] > before[n][h] for n in SCHEDULERS for h in AGENTS) and all(
                len({seen[n][h] for n in SCHEDULERS}) == 1 for h in AGENTS)

        fleet.wait(caught_up, 60, "every scheduler to hold every host's latest report again",
                   interval=0.1, last_seen=lambda: latest(fleet))
        for name in SCHEDULERS:
            log = fleet.log(name)
            assert " is down: no report for " not in log
            assert "Digest of reports refused" not in log
