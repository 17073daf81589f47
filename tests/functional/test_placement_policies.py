"""Server groups, aggregates and availability zones end to end: a scheduler and
three agents as real processes on the real RabbitMQ and PostgreSQL, driven
through the ``berth`` command line."""

import collections
import json
import uuid as uuidlib

import pytest

from scheduler.client import SchedulerClient
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENTS = ["agent-a", "agent-b", "agent-c"]
FILTERS = (
    "AvailabilityZoneFilter,ComputeFilter,RetryFilter,RamFilter,DiskFilter,CoreFilter,"
    "ServerGroupAffinityFilter,ServerGroupAntiAffinityFilter,SameHostFilter,DifferentHostFilter"
)
AGENT_SIZE = {"fake_memory_mb": 16384, "fake_local_gb": 200, "fake_vcpus": 8}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("placement")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(
            tmp,
            url,
            transport_url,
            compute_agent__fake_build_time=0.02,
            filter_scheduler__enabled_filters=FILTERS,
        )
        try:
            fleet.start_scheduler()
            # A short timeout: a call sent before the scheduler's queue exists is lost.
            quick = SchedulerClient(fleet.transport, timeout=2)
            fleet.wait(lambda: quick.list_hosts({}) is not None, 60, "the scheduler to answer")
            for host in AGENTS:
                fleet.start_agent(host, **AGENT_SIZE)
            fleet.wait_hosts_up(AGENTS)
            yield fleet
        finally:
            fleet.close()


def ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


def boot(fleet, *args, count=1, expect="ACTIVE"):
    """``berth server create --wait``: {uuid: host} of the instances, all in state ``expect``."""
    result = fleet.cli("boot", "--flavor", "m1.tiny", "--count", str(count), "--wait", *args)
    assert result.returncode == (0 if expect == "ACTIVE" else 1), result.stderr + result.stdout
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert len(rows) == count and all(row[1] == expect for row in rows), result.stdout
    return {row[0]: row[2] for row in rows}


def delete(fleet, uuids):
    if uuids:
        ok(fleet.cli("delete", "--wait", *uuids))


def create_group(fleet, policy, *extra):
    out = ok(
        fleet.cli("server-group", "create", "--policy", policy, *extra, f"{policy}-{uuidlib.uuid4().hex[:6]}",
                  "-f", "value", "-c", "uuid")
    )
    return str(uuidlib.UUID(out.strip()))  # a uuid and nothing else


def drop_aggregate(fleet, name):
    """Remove the aggregate's hosts, then the aggregate (one holding hosts is not deleted)."""
    for host in fleet.client.admin_call({}, "show_aggregate", name=name)["hosts"]:
        ok(fleet.cli("aggregate", "remove-host", name, host))
    ok(fleet.cli("aggregate", "delete", name))


def fault(fleet, instance_uuid):
    return fleet.instances([instance_uuid])[instance_uuid]["fault_reason"]


def test_anti_affinity_spreads_members_and_refuses_one_more_than_the_hosts(fleet):
    group = create_group(fleet, "anti-affinity")
    placed = boot(fleet, "--hint", f"group={group}", count=len(AGENTS))
    assert sorted(placed.values()) == AGENTS

    [(extra, host)] = boot(fleet, "--hint", f"group={group}", expect="ERROR").items()
    assert host == "-"
    reason = fault(fleet, extra)
    assert "No valid host was found" in reason
    assert f"{len(AGENTS)} hosts considered" in reason
    assert f"ServerGroupAntiAffinityFilter removed {len(AGENTS)}" in reason

    # Nothing else is affected: the members stay where they are, others still boot.
    now = fleet.instances(list(placed))
    assert {u: (i["state"], i["host"]) for u, i in now.items()} == {
        u: ("ACTIVE", h) for u, h in placed.items()
    }
    unrelated = boot(fleet)
    shown = ok(fleet.cli("server-group", "show", group))
    assert all(u in shown for u in placed)
    delete(fleet, list(placed) + list(unrelated))


def test_anti_affinity_in_one_request_larger_than_the_fleet_fails_whole_and_says_so_once(fleet):
    group = create_group(fleet, "anti-affinity")
    count = len(AGENTS) + 1
    before = set(fleet.instances())  # the module's fleet holds the earlier tests' instances
    result = fleet.cli("boot", "--flavor", "m1.tiny", "--count", str(count), "--wait",
                       "--hint", f"group={group}")
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    [line] = [text for text in result.stderr.splitlines() if text.startswith("berth")]
    assert line.startswith(f"berth: none of the {count} instances booted: No valid host was found for "
                           f"instance {count} of {count}: "), line
    assert "ServerGroupAntiAffinityFilter removed" in line
    assert line.endswith(f"(none booted: {len(AGENTS)} of {count} fit, and a request is placed whole or "
                         "not at all)")
    new = [i for u, i in fleet.instances().items() if u not in before]
    assert len(new) == count and all(i["state"] == "ERROR" and i["host"] is None for i in new)
    assert all(h["pending"] == 0 for h in fleet.hosts().values())


def test_max_server_per_host_lets_anti_affinity_stack(fleet):
    group = create_group(fleet, "anti-affinity", "--max-server-per-host", "2")
    placed = boot(fleet, "--hint", f"group={group}", count=2 * len(AGENTS))
    assert collections.Counter(placed.values()) == dict.fromkeys(AGENTS, 2)
    delete(fleet, list(placed))


def test_affinity_packs_every_member_on_one_host(fleet):
    group = create_group(fleet, "affinity")
    first = boot(fleet, "--hint", f"group={group}", count=3)
    assert len(set(first.values())) == 1
    # Later members follow the first, though the RAMWeigher would spread them.
    later = boot(fleet, "--hint", f"group={group}", count=2)
    assert set(later.values()) == set(first.values())
    delete(fleet, list(first) + list(later))


def test_same_host_and_different_host_hints(fleet):
    [(anchor, anchor_host)] = boot(fleet).items()
    same = boot(fleet, "--hint", f"same_host={anchor}", count=2)
    assert set(same.values()) == {anchor_host}
    different = boot(fleet, "--hint", f"different_host={anchor}", count=2)
    assert anchor_host not in different.values()
    delete(fleet, [anchor, *same, *different])


def test_an_availability_zone_lands_only_on_its_hosts(fleet):
    out = ok(fleet.cli("aggregate", "create", "az1agg", "--zone", "az1"))
    assert "az1agg" in out and "az1" in out
    for host in AGENTS[:2]:
        ok(fleet.cli("aggregate", "add-host", "az1agg", host))
    listed = ok(fleet.cli("aggregate", "list"))
    assert f"{AGENTS[0]},{AGENTS[1]}" in listed
    try:
        in_az1 = boot(fleet, "--availability-zone", "az1", count=6)
        assert set(in_az1.values()) == set(AGENTS[:2])  # both, as the RAMWeigher spreads
        by_hint = boot(fleet, "--hint", "availability_zone=az1", count=2)
        assert set(by_hint.values()) <= set(AGENTS[:2])
        # Hosts in no zoned aggregate are in the default zone, "nova".
        in_nova = boot(fleet, "--availability-zone", "nova", count=2)
        assert set(in_nova.values()) == {AGENTS[2]}

        [(nowhere, _)] = boot(fleet, "--availability-zone", "az9", expect="ERROR").items()
        assert "3 hosts considered; AvailabilityZoneFilter removed 3" in fault(fleet, nowhere)
        delete(fleet, [*in_az1, *by_hint, *in_nova])
    finally:
        drop_aggregate(fleet, "az1agg")


def test_no_valid_host_names_each_filter_that_removed_hosts(fleet):
    ok(fleet.cli("aggregate", "create", "small-zone", "--zone", "az2"))
    ok(fleet.cli("aggregate", "add-host", "small-zone", AGENTS[0]))
    try:
        result = fleet.cli(
            "boot", "--flavor-ram", "100000", "--flavor-vcpus", "1", "--availability-zone", "nova", "--wait"
        )
        assert result.returncode == 1
        [row] = [line.split() for line in result.stdout.splitlines()[1:]]
        reason = fault(fleet, row[0])
        assert (
            "3 hosts considered; AvailabilityZoneFilter removed 1, RamFilter removed 2; none left" in reason
        )
        shown = ok(fleet.cli("show", row[0]))
        assert "AvailabilityZoneFilter removed 1, RamFilter removed 2" in shown
    finally:
        drop_aggregate(fleet, "small-zone")


def test_the_zone_of_hosts_holding_instances_is_not_changed(fleet):
    ok(fleet.cli("aggregate", "create", "held", "--zone", "az5"))
    ok(fleet.cli("aggregate", "add-host", "held", AGENTS[1]))
    try:
        placed = boot(fleet, "--availability-zone", "az5")
        result = fleet.cli("aggregate", "set-metadata", "held", "availability_zone=az6")
        assert result.returncode == 1
        assert result.stderr.strip() == (
            "berth: cannot change the availability zone of aggregate 'held' from az5 to az6: its hosts "
            f"hold 1 instance(s) placed in the old zone: {AGENTS[1]} (1)"
        )
        assert fleet.client.admin_call({}, "show_aggregate", name="held")["availability_zone"] == "az5"
        delete(fleet, list(placed))
        out = ok(fleet.cli("aggregate", "set-metadata", "held", "availability_zone=az6"))
        assert "az6" in out
    finally:
        drop_aggregate(fleet, "held")


def test_aggregate_metadata_and_host_changes_show_in_the_listing(fleet):
    ok(fleet.cli("aggregate", "create", "meta"))
    try:
        ok(fleet.cli("aggregate", "add-host", "meta", AGENTS[2]))
        out = ok(fleet.cli("aggregate", "set-metadata", "meta", "ssd=true", "tier=gold", "-f", "json"))
        assert json.loads(out)["metadata"] == {"ssd": "true", "tier": "gold"}
        out = ok(fleet.cli("aggregate", "set-metadata", "meta", "tier", "-f", "json"))
        assert json.loads(out)["metadata"] == {"ssd": "true"}
        out = ok(fleet.cli("aggregate", "remove-host", "meta", AGENTS[2], "-f", "json"))
        assert json.loads(out)["hosts"] == []
        shown = ok(fleet.cli("aggregate", "show", "meta"))
        assert "meta" in shown and "ssd=true" in shown
    finally:
        ok(fleet.cli("aggregate", "delete", "meta"))


def _state(fleet):
    return (
        fleet.client.admin_call({}, "list_aggregates"),
        fleet.client.admin_call({}, "list_server_groups"),
        len(fleet.instances()),
    )


MISSING = "00000000-0000-4000-8000-000000000000"
BAD_INPUT = [
    # (command, exit status, what the error line says)
    (["server-group", "create", "--policy", "bogus", "g"], 2, "invalid choice: 'bogus'"),
    (
        ["server-group", "create", "--policy", "affinity", "--max-server-per-host", "2", "g"],
        1,
        "rule 'max_server_per_host' does not apply to policy affinity",
    ),
    (
        ["server-group", "create", "--policy", "anti-affinity", "--max-server-per-host", "0", "g"],
        2,
        "must be at least 1",
    ),
    (["server-group", "show", MISSING], 1, f"no server group {MISSING}"),
    (["server-group", "delete", "not-a-uuid"], 1, "No server group named not-a-uuid"),
    (["aggregate", "add-host", "nosuch", AGENTS[0]], 1, "no aggregate named 'nosuch'"),
    (["aggregate", "add-host", "existing", "no-such-host"], 1, "unknown host 'no-such-host'"),
    (["aggregate", "remove-host", "existing", AGENTS[1]], 1, "is not in aggregate 'existing'"),
    (["aggregate", "set-metadata", "nosuch", "k=v"], 1, "no aggregate named 'nosuch'"),
    (["aggregate", "set-metadata", "existing", "=v"], 2, "metadata is key=value"),
    (["aggregate", "set-metadata", "existing", "bad key=v"], 1, "metadata key 'bad key'"),
    (["aggregate", "delete", "nosuch"], 1, "no aggregate named 'nosuch'"),
    (["aggregate", "delete", "existing"], 1, f"aggregate 'existing' still holds host(s) {AGENTS[0]}: remove"),
    (
        ["aggregate", "set-metadata", "existing", "ram_allocation_ratio=abc"],
        1,
        "metadata ram_allocation_ratio='abc': AggregateRamFilter reads it as a number; give a number "
        "greater than 0, e.g. ram_allocation_ratio=1.5",
    ),
    (["aggregate", "show", "nosuch"], 1, "no aggregate named 'nosuch'"),
    (["aggregate", "create", "existing"], 1, "an aggregate named 'existing' exists already"),
    (["aggregate", "create", "z", "--zone", " "], 1, "availability zone must be a non-empty string"),
    (["boot", "--flavor", "m1.tiny", "--hint", f"group={MISSING}"], 1, f"no server group {MISSING}"),
    (["boot", "--flavor", "m1.tiny", "--hint", "group=nosuch"], 1, "No server group named nosuch"),
    (["boot", "--flavor", "m1.tiny", "--hint", "group"], 2, "a hint is key=value"),
]


@pytest.fixture(scope="module")
def existing_aggregate(fleet):
    ok(fleet.cli("aggregate", "create", "existing"))
    ok(fleet.cli("aggregate", "add-host", "existing", AGENTS[0]))
    yield "existing"
    drop_aggregate(fleet, "existing")


@pytest.mark.parametrize(("args", "status", "message"), BAD_INPUT, ids=lambda v: None)
def test_bad_admin_input_is_one_clear_line_and_changes_nothing(
    fleet, existing_aggregate, args, status, message
):
    before = _state(fleet)
    result = fleet.cli(*args)
    assert result.returncode == status, result.stdout + result.stderr
    assert result.stdout == ""
    # One line says what is wrong (argparse's usage lines come before its error line).
    errors = result.stderr.strip().splitlines() if status == 1 else result.stderr.strip().splitlines()[-1:]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert errors[0].startswith("berth")
    assert _state(fleet) == before
