"""The end-to-end bench on the real RabbitMQ and PostgreSQL, small: every request ends ACTIVE."""

from benchmarks import e2e
from tests.fixtures import RABBIT_URL


def test_two_workers_place_every_paced_request_on_a_simulated_fleet():
    row = e2e.measure(RABBIT_URL, n_hosts=40, n_instances=400, timeout=120, workers=2, rate=200)
    assert (row["active"], row["errors"]) == (400, 0)
    assert row["workers"] == 2 and row["offered_per_s"] == 200
    assert 0 < row["median_ms"] <= row["p99_ms"]
    assert row["placements_per_s"] > 0 and row["overall_per_s"] > 0


def test_a_queue_version_is_given_to_the_runs_classic_queues_by_a_policy():
    import subprocess
    import urllib.parse

    import amqp

    with e2e._vhost(RABBIT_URL, queue_version=2) as url:
        parts = urllib.parse.urlsplit(url)
        vhost = urllib.parse.unquote(parts.path[1:])
        connection = amqp.Connection(f"{parts.hostname}:{parts.port or 5672}", userid=parts.username,
                                     password=parts.password, virtual_host=vhost)
        connection.connect()
        try:
            connection.channel().queue_declare("scheduler", durable=True, auto_delete=False)
        finally:
            connection.close()
        queues, policies = (subprocess.run(["rabbitmqctl", "-q", *command, "-p", vhost], check=True,
                                           capture_output=True, text=True).stdout.splitlines()
                            for command in (["list_queues", "name", "policy"], ["list_policies"]))
    assert "scheduler\tqueue-version" in queues
    [policy] = [line for line in policies if "\tqueue-version\t" in line]
    assert '{"queue-version":2}' in policy
