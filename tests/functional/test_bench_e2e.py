"""The end-to-end bench on the real RabbitMQ and PostgreSQL, small: every request ends ACTIVE."""

from benchmarks import e2e
from tests.fixtures import RABBIT_URL


def test_two_workers_place_every_paced_request_on_a_simulated_fleet():
    row = e2e.measure(RABBIT_URL, n_hosts=40, n_instances=400, timeout=120, workers=2, rate=200)
    assert (row["active"], row["errors"]) == (400, 0)
    assert row["workers"] == 2 and row["offered_per_s"] == 200
    assert 0 < row["median_ms"] <= row["p99_ms"]
    assert row["placements_per_s"] > 0 and row["overall_per_s"] > 0
