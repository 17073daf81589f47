"""The scheduling path end to end: a scheduler and ten agents as real processes,
on the real RabbitMQ and PostgreSQL."""

import collections
import random

import pytest

from berth_contract import flavors
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENTS = [f"agent-{i:02d}" for i in range(10)]
RESERVED_MB = 512
MIX = {"m1.tiny": 80, "m1.small": 60, "m1.medium": 40, "m1.large": 20}
# The mix takes 97% of the fleet's RAM: it fits with some overcommit, as many clouds run.
RAM_RATIO = 1.5


def agent_size(i):
    return {"fake_memory_mb": 32768 + 4096 * i, "fake_local_gb": 800 + 50 * i, "fake_vcpus": 8 + 2 * (i % 4)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(
            tmp, url, transport_url,
            compute_agent__fake_build_time=0.05, compute_agent__reserved_host_memory_mb=RESERVED_MB,
            filter_scheduler__ram_allocation_ratio=RAM_RATIO,
        )
        try:
            fleet.start_scheduler()
            fleet.wait(lambda: fleet.hosts() is not None, 60, "the scheduler to answer")
            for i, host in enumerate(AGENTS):
                fleet.start_agent(host, **agent_size(i))
            fleet.wait_hosts_up(AGENTS)
            yield fleet
        finally:
            fleet.close()


def boot(fleet, flavor, count, **hints):
    return fleet.boot(flavor, count, hints=hints)


def settled_reports(fleet, expected_counts):
    """Hosts once every agent has reported exactly the instances expected of it."""
    hosts = fleet.hosts()
    for host in AGENTS:
        h = hosts[host]
        if h["pending"] or h["running_vms"] != expected_counts.get(host, 0):
            return None
    return hosts


def test_200_mixed_instances_become_active_and_are_accounted_for(fleet):
    rng = random.Random(7)
    wanted = [name for name, n in MIX.items() for _ in range(n)]
    rng.shuffle(wanted)
    uuids, flavor_of = [], {}
    while wanted:
        count = min(rng.randint(1, 8), len(wanted))
        name = wanted[0]
        batch = [n for n in wanted if n == name][:count]
        for _ in batch:
            wanted.remove(name)
        new = boot(fleet, flavors.get(name), len(batch))
        uuids += new
        flavor_of.update(dict.fromkeys(new, flavors.FLAVORS[name]))
    assert len(uuids) == 200

    instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=240)
    errors = {u: i["fault_reason"] for u, i in instances.items() if i["state"] != "ACTIVE"}
    assert errors == {}

    per_host = collections.defaultdict(list)
    for u, i in instances.items():
        per_host[i["host"]].append(flavor_of[u])
    assert set(per_host) <= set(AGENTS)
    hosts = fleet.wait(
        lambda: settled_reports(fleet, {h: len(f) for h, f in per_host.items()}),
        60,
        "the agents to report their instances",
    )

    for i, host in enumerate(AGENTS):
        mine, h, size = per_host.get(host, []), hosts[host], agent_size(i)
        assert h["memory_mb"] == size["fake_memory_mb"]
        assert h["memory_mb_used"] == RESERVED_MB + sum(f["memory_mb"] for f in mine)
        assert h["local_gb_used"] == sum(f["root_gb"] + f["ephemeral_gb"] for f in mine)
        assert h["vcpus_used"] == sum(f["vcpus"] for f in mine)
        assert h["memory_mb_used"] <= h["memory_mb"] * RAM_RATIO
        assert h["local_gb_used"] <= h["local_gb"] * 1.0
        assert h["vcpus_used"] <= h["vcpus"] * 4.0  # the default cpu_allocation_ratio, Nova 34's
    # RAMWeigher spreads: every agent got work.
    assert len(per_host) == len(AGENTS)

    for u in uuids:
        fleet.client.delete_instance({}, u)
    fleet.wait_states(uuids, ("DELETED",), timeout=120)
    hosts = fleet.wait(lambda: settled_reports(fleet, {}), 60, "the agents to report empty")
    for host in AGENTS:
        assert hosts[host]["memory_mb_used"] == RESERVED_MB
        assert hosts[host]["local_gb_used"] == 0
        assert hosts[host]["vcpus_used"] == 0


def test_a_request_that_fits_nowhere_ends_in_error_naming_the_filters(fleet):
    [u] = boot(fleet, {"memory_mb": 4 * 1024 * 1024, "root_gb": 1, "vcpus": 1}, 1)
    instance = fleet.wait_states([u], ("ERROR", "ACTIVE"))[u]
    assert instance["state"] == "ERROR"
    assert instance["host"] is None
    assert "No valid host was found" in instance["fault_reason"]
    assert "10 hosts considered; RamFilter removed 10" in instance["fault_reason"]

    shown = fleet.cli("show", u)
    assert shown.returncode == 0, shown.stderr
    assert "ERROR" in shown.stdout and "RamFilter removed 10" in shown.stdout


def test_cli_boots_waits_lists_and_deletes(fleet):
    booted = fleet.cli("boot", "--flavor", "m1.small", "--count", "3", "--wait")
    assert booted.returncode == 0, booted.stderr
    rows = [line.split() for line in booted.stdout.splitlines()[1:]]
    assert len(rows) == 3 and all(row[1] == "ACTIVE" and row[2] in AGENTS for row in rows)

    hosts = fleet.cli("hosts")
    assert hosts.returncode == 0, hosts.stderr
    assert all(agent in hosts.stdout for agent in AGENTS)
    assert "FREE RAM MB" in hosts.stdout

    listed = fleet.cli("instances", "--state", "ACTIVE")
    assert listed.returncode == 0, listed.stderr
    assert all(row[0] in listed.stdout for row in rows), listed.stdout
    on_host = fleet.cli("instances", "--host", rows[0][2])
    assert rows[0][0] in on_host.stdout
    assert all(line.split()[2] == rows[0][2] for line in on_host.stdout.splitlines()[1:])

    deleted = fleet.cli("delete", "--wait", *[row[0] for row in rows])
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.count("DELETED") == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["boot", "--flavor", "m9.huge"], "no flavor named 'm9.huge'"),
        (["boot", "--flavor-ram", "0", "--flavor-vcpus", "1"], "must be at least 1"),
        (["boot", "--flavor-ram", "512"], "give --flavor NAME, or --flavor-ram and --flavor-vcpus"),
        (["show", "not-a-uuid"], "No instance named not-a-uuid"),
        (["show", "00000000-0000-4000-8000-000000000000"], "No instance"),
    ],
)
def test_cli_rejects_bad_input_with_a_clear_error(fleet, args, message):
    result = fleet.cli(*args)
    assert result.returncode != 0
    assert message in result.stderr
