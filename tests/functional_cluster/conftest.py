"""Fixtures of the cluster tests: services of their own, which each test starts and
stops as it needs (see doc/source/install/clusters.md)."""

import time

import pytest

import scheduler  # noqa: F401  (applies BERTH_CONCURRENCY before kombu & co. load)
from tests.functional_cluster.rabbit_cluster import RabbitCluster

_timings = {}


@pytest.fixture(scope="session")
def rabbit_cluster(tmp_path_factory):
    """Three RabbitMQ nodes clustered on this machine (ports 5701-5703), one per test
    session, stopped afterwards whatever the tests did."""
    cluster = RabbitCluster(tmp_path_factory.mktemp("rabbit-cluster"))
    try:
        cluster.start()
        _timings["booted"], _timings["started"] = cluster.booted_in, cluster.started_in
        yield cluster
    finally:
        began = time.monotonic()
        cluster.close()
        _timings["stopped"] = time.monotonic() - began


@pytest.fixture
def cluster_url(rabbit_cluster):
    """A fresh vhost on the cluster; the transport_url naming its three nodes."""
    with rabbit_cluster.temporary_vhost() as url:
        yield url


def pytest_terminal_summary(terminalreporter):
    if "started" in _timings:
        terminalreporter.write_line(
            f"RabbitMQ cluster of 3 nodes: started and clustered in {_timings['started']:.1f} s "
            f"(the nodes booted in {_timings['booted']:.1f} s), "
            f"stopped in {_timings.get('stopped', float('nan')):.1f} s")
