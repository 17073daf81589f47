"""The operators' RPC endpoint (scheduler.admin.grouping) over memory:// and SQLite."""

import uuid as uuidlib

import pytest

from berth_contract.request_spec import RequestSpec
from scheduler import rpc
from scheduler.admin.grouping import MAX_METADATA, MAX_SERVER_PER_HOST, AdminEndpoint, reload_aggregates
from scheduler.client import SchedulerClient
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.planning import lookups
from scheduler.service import assemble
from tests.unit.scheduler.service_parts import transport_and_database

HOSTS = ("h1", "h2", "h3")


def report(host, ram=8192):
    return {
        "host": host,
        "memory_mb": ram,
        "free_ram_mb": ram,
        "local_gb": 100,
        "free_disk_gb": 100,
        "vcpus": 8,
        "vcpus_used": 0,
        "instance_uuids": [],
        "running_vms": 0,
    }


@pytest.fixture
def world(conf):
    conf.set_override("host", "sched-1")
    transport, database = transport_and_database(conf)
    manager = assemble(conf, transport, database).manager
    admin = AdminEndpoint(conf, database, manager.host_manager)
    for host in HOSTS:
        manager.report_resources({}, host, report(host))
    yield admin, database, manager
    transport.cleanup()
    database.dispose()


@pytest.fixture
def client(conf, world):
    admin, _database, manager = world
    transport = rpc.get_transport(conf)
    server = rpc.get_rpc_server(transport, rpc.Target(topic="scheduler", server="sched-1"), [manager, admin])
    server.start()
    yield SchedulerClient(transport, timeout=10)
    server.stop()
    server.wait()


def snapshot(database):
    return database.list_aggregates(), database.list_server_groups()


def table_aggregates(manager):
    with manager.host_manager.lock:
        return {a.name: a for a in manager.host_manager.table.aggregates}


# -- aggregates --------------------------------------------------------------


def test_create_aggregate_with_a_zone_stores_it_and_reloads_the_host_table(world):
    admin, database, manager = world
    created = admin.create_aggregate({}, "az1agg", availability_zone="az1")
    assert created["name"] == "az1agg" and created["availability_zone"] == "az1"
    assert created["metadata"] == {"availability_zone": "az1"} and created["hosts"] == []
    assert table_aggregates(manager)["az1agg"].availability_zone == "az1"

    admin.aggregate_add_host({}, "az1agg", "h1")
    aggregate = table_aggregates(manager)["az1agg"]
    assert aggregate.hosts == frozenset({"h1"})
    with manager.host_manager.lock:
        row = manager.host_manager.table.index["h1"]
        assert [a.name for a in manager.host_manager.table.aggregate_index.of_row(row)] == ["az1agg"]


def test_names_are_stripped(world):
    admin, database, _ = world
    assert admin.create_aggregate({}, "  spaced  ")["name"] == "spaced"
    assert admin.show_aggregate({}, "spaced")["name"] == "spaced"


def test_host_membership_metadata_and_delete_follow_in_the_host_table(world):
    admin, database, manager = world
    admin.create_aggregate({}, "ssd")
    admin.aggregate_add_host({}, "ssd", "h2")
    admin.aggregate_add_host({}, "ssd", "h3")
    updated = admin.aggregate_set_metadata({}, "ssd", {"ssd": "true", "tier": "gold"})
    assert updated["metadata"] == {"ssd": "true", "tier": "gold"}
    assert table_aggregates(manager)["ssd"].metadata == {"ssd": "true", "tier": "gold"}

    updated = admin.aggregate_set_metadata({}, "ssd", {"tier": None, "availability_zone": "fast"})
    assert updated["metadata"] == {"ssd": "true", "availability_zone": "fast"}
    assert updated["availability_zone"] == "fast"
    assert table_aggregates(manager)["ssd"].availability_zone == "fast"
    updated = admin.aggregate_set_metadata({}, "ssd", {"availability_zone": None})
    assert updated["availability_zone"] is None and updated["metadata"] == {"ssd": "true"}
    assert table_aggregates(manager)["ssd"].availability_zone is None

    assert admin.aggregate_remove_host({}, "ssd", "h2")["hosts"] == ["h3"]
    assert table_aggregates(manager)["ssd"].hosts == frozenset({"h3"})
    assert [a["name"] for a in admin.list_aggregates({})] == ["ssd"]
    admin.aggregate_remove_host({}, "ssd", "h3")
    assert admin.delete_aggregate({}, "ssd") is None
    assert table_aggregates(manager) == {}
    assert admin.list_aggregates({}) == []


def test_a_host_known_only_from_the_database_may_be_added(world):
    """A host another scheduler has heard from (its report is stored) is known."""
    admin, database, _ = world
    admin.create_aggregate({}, "a")
    with pytest.raises(InvalidRequest, match="unknown host 'h9'"):
        admin.aggregate_add_host({}, "a", "h9")
    database.save_compute_nodes([report("h9")])
    assert admin.aggregate_add_host({}, "a", "h9")["hosts"] == ["h9"]


def test_reload_picks_up_changes_made_by_another_scheduler(world):
    admin, database, manager = world
    database.create_aggregate("elsewhere", "az2", {"availability_zone": "az2"})
    database.add_aggregate_host("elsewhere", "h3")
    assert "elsewhere" not in table_aggregates(manager)
    found = reload_aggregates(database, manager.host_manager)
    assert [a["name"] for a in found] == ["elsewhere"]
    assert table_aggregates(manager)["elsewhere"].hosts == frozenset({"h3"})


def test_a_periodic_reload_that_read_before_an_operators_change_does_not_undo_it(world):
    admin, database, manager = world

    class OvertakenRead:
        """The periodic reload's read, and an aggregate created and committed right after it."""

        def list_aggregates(self):
            rows = database.list_aggregates()
            admin.create_aggregate({}, "az1agg", availability_zone="az1")
            return rows

    assert reload_aggregates(OvertakenRead(), manager.host_manager) == []  # what it read: dropped
    assert table_aggregates(manager)["az1agg"].availability_zone == "az1"


def test_each_change_is_announced_to_the_other_schedulers_and_a_refusal_is_not(world):
    admin, database, manager = world
    announced = []
    admin._announce = lambda: announced.append(len(database.list_aggregates()))
    admin.create_aggregate({}, "a", availability_zone="az1")
    admin.aggregate_add_host({}, "a", "h1")
    admin.aggregate_set_metadata({}, "a", {"ssd": "true"})
    with pytest.raises(InvalidRequest):
        admin.aggregate_add_host({}, "a", "h1")
    with pytest.raises(InvalidRequest):
        admin.delete_aggregate({}, "a")
    admin.aggregate_remove_host({}, "a", "h1")
    admin.delete_aggregate({}, "a")
    assert announced == [1, 1, 1, 1, 0]


def test_an_announced_change_is_reloaded_unless_this_scheduler_made_it(world, conf):
    admin, database, manager = world
    database.create_aggregate("elsewhere", "az2", {"availability_zone": "az2"})
    database.add_aggregate_host("elsewhere", "h3")
    admin.aggregates_changed({}, by=conf.host)
    assert "elsewhere" not in table_aggregates(manager)
    admin.aggregates_changed({}, by="sched-2")
    assert table_aggregates(manager)["elsewhere"].hosts == frozenset({"h3"})
    zones = {h["host"]: (h["availability_zone"], h["aggregates"]) for h in manager.list_hosts({})}
    assert zones == {"h1": ("nova", []), "h2": ("nova", []), "h3": ("az2", ["elsewhere"])}


@pytest.fixture
def existing(world):
    admin, database, _ = world
    admin.create_aggregate({}, "existing", availability_zone="az1")
    admin.aggregate_add_host({}, "existing", "h1")
    admin.create_server_group({}, "g", "anti-affinity")
    return world


BAD_AGGREGATE_CALLS = [
    ("create_aggregate", {"name": ""}, "aggregate name must be a non-empty string"),
    ("create_aggregate", {"name": "   "}, "aggregate name must be a non-empty string"),
    ("create_aggregate", {"name": "x" * 256}, "at most 255 characters"),
    ("create_aggregate", {"name": 7}, "aggregate name must be a non-empty string"),
    ("create_aggregate", {"name": "existing"}, "an aggregate named 'existing' exists already"),
    ("create_aggregate", {"name": "z", "availability_zone": ""}, "availability zone must be"),
    ("create_aggregate", {"name": "z", "availability_zone": ["az"]}, "availability zone must be"),
    ("show_aggregate", {"name": "nosuch"}, "no aggregate named 'nosuch'"),
    ("delete_aggregate", {"name": "nosuch"}, "no aggregate named 'nosuch'"),
    ("aggregate_add_host", {"name": "nosuch", "host": "h1"}, "no aggregate named 'nosuch'"),
    ("aggregate_add_host", {"name": "existing", "host": "h9"}, "unknown host 'h9'"),
    ("aggregate_add_host", {"name": "existing", "host": ""}, "host must be a non-empty string"),
    (
        "aggregate_add_host",
        {"name": "existing", "host": "h1"},
        "host 'h1' is in aggregate 'existing' already",
    ),
    ("aggregate_remove_host", {"name": "existing", "host": "h2"}, "host 'h2' is not in aggregate 'existing'"),
    ("aggregate_remove_host", {"name": "nosuch", "host": "h1"}, "no aggregate named 'nosuch'"),
    ("aggregate_set_metadata", {"name": "nosuch", "metadata": {"k": "v"}}, "no aggregate named 'nosuch'"),
    ("aggregate_set_metadata", {"name": "existing", "metadata": {}}, "metadata must be 1 to 100"),
    ("aggregate_set_metadata", {"name": "existing", "metadata": "k=v"}, "metadata must be 1 to 100"),
    ("aggregate_set_metadata", {"name": "existing", "metadata": {"bad key": "v"}}, "metadata key 'bad key'"),
    ("aggregate_set_metadata", {"name": "existing", "metadata": {"k": 5}}, "metadata k: the value must be"),
    ("aggregate_set_metadata", {"name": "existing", "metadata": {"k": "v" * 256}}, "at most 255"),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {f"k{i}": "v" for i in range(MAX_METADATA + 1)}},
        "1 to 100",
    ),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {"availability_zone": " "}},
        "availability zone must be",
    ),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {"ram_allocation_ratio": "abc"}},
        "metadata ram_allocation_ratio='abc': AggregateRamFilter reads it as a number; "
        "give a number greater than 0, e.g. ram_allocation_ratio=1.5",
    ),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {"ok": "1", "cpu_allocation_ratio": "0"}},
        "metadata cpu_allocation_ratio='0': AggregateCoreFilter reads it as a number; give a number greater",
    ),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {"disk_allocation_ratio": "nan"}},
        "AggregateDiskFilter reads it as a number",
    ),
    (
        "aggregate_set_metadata",
        {"name": "existing", "metadata": {"ram_weight_multiplier": "heavy"}},
        "metadata ram_weight_multiplier='heavy': RAMWeigher reads it as a number; give a number, e.g.",
    ),
    ("delete_aggregate", {"name": "existing"}, "aggregate 'existing' still holds host(s) h1: remove them"),
]


def test_numeric_metadata_within_bounds_is_taken(existing):
    admin, _, manager = existing
    metadata = {"ram_allocation_ratio": "1.0", "ram_weight_multiplier": "-2", "io_ops_weight_multiplier": "0"}
    assert admin.aggregate_set_metadata({}, "existing", metadata)["metadata"] == {
        "availability_zone": "az1", **metadata,
    }
    assert admin.aggregate_set_metadata({}, "existing", {"ram_allocation_ratio": None})


def test_the_zone_of_hosts_holding_instances_does_not_change(existing):
    admin, database, manager = existing
    [uuid] = placed_instances(database, ["h1"])
    with pytest.raises(InvalidRequest) as raised:
        admin.aggregate_set_metadata({}, "existing", {"availability_zone": "az2"})
    assert str(raised.value) == (
        "cannot change the availability zone of aggregate 'existing' from az1 to az2: its hosts hold "
        "1 instance(s) placed in the old zone: h1 (1)"
    )
    with pytest.raises(InvalidRequest, match="from az1 to none"):
        admin.aggregate_set_metadata({}, "existing", {"availability_zone": None})
    assert table_aggregates(manager)["existing"].availability_zone == "az1"
    # The same zone again, other metadata, or once the instance is gone: taken.
    admin.aggregate_set_metadata({}, "existing", {"availability_zone": "az1", "ssd": "true"})
    database.update_instance(uuid, {"state": "DELETED"})
    moved = admin.aggregate_set_metadata({}, "existing", {"availability_zone": "az2"})
    assert moved["availability_zone"] == "az2"
    assert table_aggregates(manager)["existing"].availability_zone == "az2"


@pytest.mark.parametrize(("method", "kwargs", "message"), BAD_AGGREGATE_CALLS)
def test_bad_aggregate_calls_are_refused_and_change_nothing(existing, method, kwargs, message):
    admin, database, manager = existing
    before, in_table = snapshot(database), table_aggregates(manager)
    with pytest.raises(InvalidRequest) as raised:
        getattr(admin, method)({}, **kwargs)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert snapshot(database) == before
    assert table_aggregates(manager) == in_table


# -- server groups -------------------------------------------------------------


@pytest.mark.parametrize("policy", ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
def test_create_server_group_for_each_policy(world, policy):
    admin, database, _ = world
    group = admin.create_server_group(rpc.Context({"project_id": "p1"}), "web", policy)
    assert str(uuidlib.UUID(group["uuid"])) == group["uuid"]
    assert (group["name"], group["policy"], group["rules"], group["members"]) == ("web", policy, {}, [])
    assert group["project_id"] == "p1"
    assert admin.show_server_group({}, group["uuid"]) == group
    assert admin.list_server_groups({}) == [group]
    admin.delete_server_group({}, group["uuid"])
    assert admin.list_server_groups({}) == []


def test_anti_affinity_takes_max_server_per_host(world):
    admin, _, _ = world
    group = admin.create_server_group({}, "web", "anti-affinity", {"max_server_per_host": 3})
    assert group["rules"] == {"max_server_per_host": 3}
    # a plain dict context (no project) is accepted too
    assert group["project_id"] is None


def test_the_same_group_name_twice_makes_two_groups(world):
    """As in Nova, a server group is known by its uuid; names need not be unique."""
    admin, _, _ = world
    first = admin.create_server_group({}, "web", "affinity")
    second = admin.create_server_group({}, "web", "affinity")
    assert first["uuid"] != second["uuid"]


MISSING = "00000000-0000-4000-8000-000000000000"
BAD_GROUP_CALLS = [
    ("create_server_group", {"name": "g", "policy": "bogus"}, "unknown policy 'bogus': use one of affinity"),
    ("create_server_group", {"name": "g", "policy": None}, "unknown policy 'None'"),
    ("create_server_group", {"name": "", "policy": "affinity"}, "server group name must be"),
    (
        "create_server_group",
        {"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}},
        "rule 'max_server_per_host' does not apply to policy affinity (it takes no rules)",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": {"other": 1}},
        "rule 'other' does not apply to policy anti-affinity (it takes max_server_per_host)",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": [1]},
        "rules must be an object",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 0}},
        "max_server_per_host must be a whole number from 1 to 1000",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": MAX_SERVER_PER_HOST + 1}},
        "from 1 to 1000",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": True}},
        "max_server_per_host must be a whole number",
    ),
    (
        "create_server_group",
        {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": "2"}},
        "max_server_per_host must be a whole number",
    ),
    ("show_server_group", {"group_uuid": MISSING}, f"no server group {MISSING}"),
    ("show_server_group", {"group_uuid": "web"}, "server group: must be a UUID, got 'web'"),
    ("delete_server_group", {"group_uuid": MISSING}, f"no server group {MISSING}"),
    ("delete_server_group", {"group_uuid": None}, "server group: must be a UUID, got None"),
]


@pytest.mark.parametrize(("method", "kwargs", "message"), BAD_GROUP_CALLS)
def test_bad_server_group_calls_are_refused_and_change_nothing(existing, method, kwargs, message):
    admin, database, _ = existing
    before = snapshot(database)
    with pytest.raises(InvalidRequest) as raised:
        getattr(admin, method)({}, **kwargs)
    assert message in str(raised.value)
    assert snapshot(database) == before


# -- over RPC ------------------------------------------------------------------


def test_the_cli_client_reaches_the_endpoint_and_gets_a_clear_refusal(world, client):
    admin, database, manager = world
    created = client.admin_call({}, "create_aggregate", name="az1agg", availability_zone="az1")
    assert created["availability_zone"] == "az1"
    client.admin_call({}, "aggregate_add_host", name="az1agg", host="h2")
    assert table_aggregates(manager)["az1agg"].hosts == frozenset({"h2"})

    with pytest.raises(rpc.RemoteError) as raised:
        client.admin_call({}, "aggregate_add_host", name="nosuch", host="h1")
    assert raised.value.exc_type == "InvalidRequest"
    assert raised.value.value == "no aggregate named 'nosuch'"

    group = client.admin_call({}, "create_server_group", name="g", policy="affinity", rules={})
    assert client.admin_call({}, "show_server_group", group_uuid=group["uuid"])["policy"] == "affinity"
    with pytest.raises(rpc.RemoteError) as raised:
        client.admin_call({}, "create_server_group", name="g", policy="sideways")
    assert raised.value.exc_type == "InvalidRequest" and "unknown policy 'sideways'" in raised.value.value
    assert len(database.list_server_groups()) == 1


# -- scheduler.planning.lookups.prepare_spec: the hints that name stored things -------------


def spec_with(hints=None, count=1, **properties):
    return RequestSpec.from_wire(
        {
            "num_instances": count,
            "instance_uuids": [str(uuidlib.uuid4()) for _ in range(count)],
            "instance_type": {"memory_mb": 512, "root_gb": 1, "vcpus": 1},
            "instance_properties": properties,
        },
        {"scheduler_hints": hints or {}},
    )


def placed_instances(database, hosts, state="ACTIVE"):
    """One instance on each of ``hosts`` (None: not placed yet); their uuids."""
    uuids = [str(uuidlib.uuid4()) for _ in hosts]
    database.create_instances(
        [
            {
                "uuid": u,
                "memory_mb": 512,
                "root_gb": 1,
                "ephemeral_gb": 0,
                "vcpus": 1,
                "request_spec": {},
                "filter_properties": {},
            }
            for u in uuids
        ]
    )
    for u, host in zip(uuids, hosts, strict=True):
        if host is not None:
            database.update_instance(u, {"state": state, "host": host})
    return uuids


def test_prepare_spec_without_hints_changes_nothing(world):
    _, database, _ = world
    spec = lookups.prepare_spec(database, spec_with())
    assert (spec.group, spec.same_host_hosts, spec.different_host_hosts, spec.availability_zone) == (
        None,
        None,
        None,
        None,
    )


def test_the_zone_hint_fills_in_a_missing_zone_only(world):
    _, database, _ = world
    assert lookups.prepare_spec(database, spec_with({"availability_zone": "az1"})).availability_zone == "az1"
    spec = spec_with({"availability_zone": "az1"}, availability_zone="az2")
    assert lookups.prepare_spec(database, spec).availability_zone == "az2"


def test_a_group_hint_resolves_policy_rules_and_the_hosts_of_placed_members(world):
    admin, database, _ = world
    group = admin.create_server_group({}, "web", "anti-affinity", {"max_server_per_host": 2})["uuid"]
    on_h1, on_h1_too, on_h2, unplaced, failed = placed_instances(database, ["h1", "h1", "h2", None, None])
    database.update_instance(failed, {"state": "ERROR", "host": "h3"})
    database.add_server_group_members(group, [on_h1, on_h1_too, on_h2, unplaced, failed])

    spec = lookups.prepare_spec(database, spec_with({"group": group}, count=2))
    assert spec.group["uuid"] == group and spec.group["name"] == "web"
    assert spec.group["policy"] == "anti-affinity"
    assert spec.group["rules"] == {"max_server_per_host": 2}
    assert spec.group["members"] == [on_h1, on_h1_too, on_h2, unplaced, failed]
    assert spec.group["placed"] == sorted([on_h1, on_h1_too, on_h2])
    assert spec.group["hosts"] == {"h1": 2, "h2": 1}
    # The request's instances are members now.
    assert database.get_server_group(group)["members"][-2:] == spec.instance_uuids


def test_a_group_hint_given_as_a_one_item_list_or_in_capitals_is_read(world):
    admin, database, _ = world
    group = admin.create_server_group({}, "web", "affinity")["uuid"]
    assert lookups.prepare_spec(database, spec_with({"group": [group]})).group["policy"] == "affinity"
    assert lookups.prepare_spec(database, spec_with({"group": group.upper()})).group["uuid"] == group


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "00000000-0000-4000-8000-000000000000",
            "Server group 00000000-0000-4000-8000-000000000000 does not exist (scheduler hint group)",
        ),
        ("web", "Invalid scheduler hint group: must be a UUID, got 'web'"),
        (5, "Invalid scheduler hint group: must be a server group UUID"),
        (["00000000-0000-4000-8000-000000000000"] * 2, "must be a server group UUID"),
    ],
)
def test_a_missing_or_malformed_group_is_an_invalid_hint_and_adds_no_member(world, value, message):
    admin, database, _ = world
    before = database.list_server_groups()
    with pytest.raises(lookups.InvalidHint) as raised:
        lookups.prepare_spec(database, spec_with({"group": value}))
    assert isinstance(raised.value, NoValidHost)  # the manager puts the instances in ERROR
    assert message in str(raised.value)
    assert database.list_server_groups() == before


def test_same_host_and_different_host_name_the_hosts_of_those_instances(world):
    _, database, _ = world
    on_h1, on_h2, unplaced, deleted = placed_instances(database, ["h1", "h2", None, "h3"])
    database.update_instance(deleted, {"state": "DELETED"})
    spec = lookups.prepare_spec(database, spec_with({"same_host": [on_h2, on_h1], "different_host": on_h1}))
    assert spec.same_host_hosts == ["h1", "h2"]
    assert spec.different_host_hosts == ["h1"]
    # Instances on no host (or gone) give no host: same_host then admits none.
    spec = lookups.prepare_spec(database, spec_with({"same_host": [unplaced, deleted]}))
    assert spec.same_host_hosts == []


@pytest.mark.parametrize("hint", ["same_host", "different_host"])
def test_an_instance_hint_naming_no_instance_is_refused_not_ignored(world, hint):
    _, database, _ = world
    [known] = placed_instances(database, ["h1"])
    unknown = "00000000-0000-4000-8000-00000000abcd"
    with pytest.raises(lookups.InvalidHint) as raised:
        lookups.prepare_spec(database, spec_with({hint: [known, unknown]}))
    assert str(raised.value) == f"Instance {unknown} does not exist (scheduler hint {hint})"


@pytest.mark.parametrize(
    ("hints", "message"),
    [
        ({"same_host": "h1"}, "Invalid scheduler hint same_host: must be a UUID, got 'h1'"),
        (
            {"different_host": ["00000000-0000-4000-8000-000000000000", "x"]},
            "Invalid scheduler hint different_host: must be a UUID, got 'x'",
        ),
        ({"same_host": 3}, "Invalid scheduler hint same_host: must be an instance UUID or a list of them"),
    ],
)
def test_malformed_instance_hints_are_invalid(world, hints, message):
    _, database, _ = world
    with pytest.raises(lookups.InvalidHint) as raised:
        lookups.prepare_spec(database, spec_with(hints))
    assert message in str(raised.value)


def test_a_request_naming_a_missing_group_is_refused_and_its_instance_says_why(world):
    _, database, manager = world
    missing = "00000000-0000-4000-8000-000000000000"
    spec = spec_with({"group": missing})
    request_spec, filter_properties = spec.to_wire()
    with pytest.raises(InvalidRequest, match=f"Server group {missing} does not exist"):
        manager.run_instance(rpc.Context({}), request_spec, filter_properties)  # dead-lettered
    record = database.get_instance(spec.instance_uuids[0])
    assert record["state"] == "ERROR" and record["host"] is None
    assert f"Server group {missing} does not exist" in record["fault_reason"]


def test_a_host_holding_instances_does_not_change_zone_by_joining_or_leaving(existing):
    admin, database, manager = existing  # "existing" (zone az1) holds h1
    admin.create_aggregate({}, "az2agg", availability_zone="az2")
    placed_instances(database, ["h1", "h2"])
    with pytest.raises(InvalidRequest) as raised:
        admin.aggregate_add_host({}, "az2agg", "h1")
    assert str(raised.value) == ("cannot add host 'h1' to aggregate 'az2agg': it holds 1 instance(s) placed "
                                 "in availability zone az1, which would then be in az1,az2")
    with pytest.raises(InvalidRequest) as raised:
        admin.aggregate_remove_host({}, "existing", "h1")
    assert str(raised.value).endswith("it holds 1 instance(s) placed in availability zone az1, which would "
                                      "then be in nova")
    with pytest.raises(InvalidRequest, match="cannot add host 'h2' to aggregate 'az2agg'.* zone nova, "):
        admin.aggregate_add_host({}, "az2agg", "h2")
    # Hosts without instances move freely, and an aggregate without a zone moves no host.
    assert admin.aggregate_add_host({}, "az2agg", "h3")["hosts"] == ["h3"]
    admin.create_aggregate({}, "plain")
    assert admin.aggregate_add_host({}, "plain", "h1")["hosts"] == ["h1"]
    assert admin.aggregate_remove_host({}, "plain", "h1")["hosts"] == []


def test_asking_for_an_instance_there_is_no_record_of_is_an_answer_not_a_warning(client, caplog):
    absent = "00000000-0000-4000-8000-00000000000f"
    with caplog.at_level("INFO"), pytest.raises(rpc.RemoteError, match="InstanceNotFound"):
        client.show_instance({}, absent)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "show_instance" in r.getMessage()]
    assert said and all(level == "INFO" and "refused" in text for level, text in said), said


def test_a_trait_requirement_is_set_only_where_a_filter_reads_it(conf, world):
    admin, database, _manager = world
    admin.create_aggregate({}, "gold")
    with pytest.raises(InvalidRequest) as refused:
        admin.aggregate_set_metadata({}, "gold", {"trait:CUSTOM_GOLD": "required"})
    assert str(refused.value) == ("metadata trait:CUSTOM_GOLD: is read by IsolatedAggregateFilter, which is "
                                  "not enabled: add it to [filter_scheduler] enabled_filters, or leave the "
                                  "key out")
    assert database.list_aggregates()[0]["metadata"] == {}
    conf.set_override("enabled_filters", [*conf.filter_scheduler.enabled_filters, "IsolatedAggregateFilter"],
                      "filter_scheduler")
    updated = admin.aggregate_set_metadata({}, "gold", {"trait:CUSTOM_GOLD": "required"})
    assert updated["metadata"] == {"trait:CUSTOM_GOLD": "required"}
    conf.clear_override("enabled_filters", "filter_scheduler")
    assert admin.aggregate_set_metadata({}, "gold", {"trait:CUSTOM_GOLD": None})["metadata"] == {}
