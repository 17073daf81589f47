"""Prometheus metrics of real processes, scraped over HTTP and read with prometheus_client's
parser: the figures move with the work done."""

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENTS = ["prom-1", "prom-2"]


def scrape(port):
    """{(name, sorted labels): value} served at /metrics, and the families' types."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    families = list(text_string_to_metric_families(text))
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    return values, {f.name: f.type for f in families}


@pytest.fixture
def fleet(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, compute_agent__fake_build_time=0.05,
                      scaling__sync_period="1", scaling__cpu_initialization_period="0",
                      scaling__initial_readiness_delay="0")
        try:
            fleet.start_scheduler()
            fleet.wait(lambda: fleet.hosts() is not None, 60, "the scheduler to answer")
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=8192, fake_local_gb=100, fake_vcpus=4)
            fleet.wait_hosts_up(AGENTS)
            yield fleet
        finally:
            fleet.close()


def boot(fleet, flavor, count):
    return fleet.boot(flavor, count)


def test_the_scheduler_and_the_agents_count_what_they_did(fleet):
    scheduler, agents = fleet.metrics_port("scheduler"), [fleet.metrics_port(host) for host in AGENTS]
    assert len({scheduler, *agents}) == 3  # each process a port of its own
    before, types = scrape(scheduler)
    assert types["berth_scheduler_placements"] == "counter"
    assert types["berth_scheduler_decision_seconds"] == "histogram"
    assert before[("berth_scheduler_hosts", (("state", "up"),))] == 2
    assert before[("berth_fleet_memory_bytes", ())] == 2 * 8192 * 1024 ** 2

    placed = boot(fleet, "m1.small", 3)  # 2048 MB each
    refused = boot(fleet, "m1.xlarge", 1)  # 16384 MB: no host has it
    fleet.wait_states(placed, {"ACTIVE"})
    fleet.wait_states(refused, {"ERROR"})

    after, _ = scrape(scheduler)

    def moved(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert moved("berth_scheduler_placements_total", outcome="placed") == 3
    assert moved("berth_scheduler_placements_total", outcome="no_valid_host") == 1
    assert moved("berth_scheduler_refusal_hosts_removed_total", filter="RamFilter") == 2
    assert moved("berth_scheduler_decision_seconds_count") >= 2
    assert moved("berth_scheduler_cast_to_scheduled_seconds_count") == 3  # each placed instance
    assert after[("berth_scheduler_cast_to_scheduled_seconds_bucket", (("le", "+Inf"),))] >= 3
    assert after[("berth_database_connections_total", ())] >= 1
    assert moved("berth_rpc_batch_messages_count", topic="scheduler") >= 1
    # What the scheduler placed is gone from the room it shows: 3 x 2048 MB.
    assert moved("berth_fleet_memory_free_bytes") == -3 * 2048 * 1024 ** 2
    assert after[("berth_scheduler_oldest_host_report_age_seconds", ())] < 60

    claimed = built = 0
    for port in agents:
        seen, _ = scrape(port)
        claimed += seen[("berth_agent_claims_total", (("outcome", "claimed"),))]
        built += seen[("berth_agent_builds_total", (("outcome", "active"),))]
        assert seen[("berth_agent_reports_total", ())] >= 1
    assert (claimed, built) == (3, 3)


def test_a_scaling_group_shows_its_members_and_its_metric_against_the_target(fleet):
    port = fleet.metrics_port("scheduler")
    done = fleet.cli("scaling-group", "create", "web", "--flavor", "m1.tiny", "--min", "2", "--max", "4",
                     "--cpu", "50")
    assert done.returncode == 0, done.stderr
    fleet.cli("fake-load", "set", "--cpu", "0.1", "--all")
    group = (("group", "web"),)
    cpu = (("group", "web"), ("metric", "cpu"), ("target_type", "utilization"))

    def shown():
        values, _ = scrape(port)
        # Each member's first sample may predate the load set on its host: wait for both samples.
        if values.get(("berth_scaling_group_members", group)) == 2 and values.get(
                ("berth_scaling_group_metric_current", cpu)) == 10:
            return values
        return None

    values = fleet.wait(shown, 60, "web's 2 members and its cpu read at 10%",
                        last_seen=lambda: scrape(port)[0])
    assert values[("berth_scaling_group_desired_members", group)] == 2
    assert values[("berth_scaling_group_metric_target", cpu)] == 50
    assert values[("berth_scaling_group_syncs_total", (("outcome", "synced"),))] >= 1
