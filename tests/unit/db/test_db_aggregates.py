"""Host aggregates and server groups in the database (SQLite)."""

import uuid as uuidlib

import pytest

from scheduler import states
from scheduler.db.api import Conflict, NotFound


def _instance(uuid, **values):
    record = {
        "uuid": uuid,
        "project_id": "p1",
        "memory_mb": 512,
        "root_gb": 1,
        "ephemeral_gb": 0,
        "vcpus": 1,
        "request_spec": {},
        "filter_properties": {},
    }
    record.update(values)
    return record


def _uuid():
    return str(uuidlib.uuid4())


# -- aggregates ----------------------------------------------------------------


def test_create_list_show_delete_aggregate(database):
    assert database.list_aggregates() == []
    created = database.create_aggregate("az1agg", "az1", {"availability_zone": "az1"})
    assert created["name"] == "az1agg"
    assert created["availability_zone"] == "az1"
    assert created["metadata"] == {"availability_zone": "az1"}
    assert created["hosts"] == []
    assert created["created_at"].endswith("Z") and created["updated_at"].endswith("Z")
    database.create_aggregate("b-plain")
    assert [a["name"] for a in database.list_aggregates()] == ["az1agg", "b-plain"]
    assert database.get_aggregate("b-plain")["availability_zone"] is None
    assert database.get_aggregate("b-plain")["metadata"] == {}

    database.delete_aggregate("az1agg")
    assert [a["name"] for a in database.list_aggregates()] == ["b-plain"]
    with pytest.raises(NotFound, match="no aggregate named 'az1agg'"):
        database.get_aggregate("az1agg")


def test_a_duplicate_aggregate_name_is_a_conflict(database):
    database.create_aggregate("a", None, {"k": "v"})
    with pytest.raises(Conflict, match="an aggregate named 'a' exists already"):
        database.create_aggregate("a", "az9", {})
    [only] = database.list_aggregates()
    assert only["metadata"] == {"k": "v"} and only["availability_zone"] is None


def test_add_and_remove_hosts(database):
    database.create_aggregate("a")
    database.create_aggregate("b")
    database.add_aggregate_host("a", "h2")
    assert database.add_aggregate_host("a", "h1")["hosts"] == ["h1", "h2"]  # sorted
    database.add_aggregate_host("b", "h1")  # a host may be in several aggregates
    with pytest.raises(Conflict, match="host 'h1' is in aggregate 'a' already"):
        database.add_aggregate_host("a", "h1")
    assert database.get_aggregate("a")["hosts"] == ["h1", "h2"]

    assert database.remove_aggregate_host("a", "h1")["hosts"] == ["h2"]
    assert database.get_aggregate("b")["hosts"] == ["h1"]
    with pytest.raises(NotFound, match="host 'h1' is not in aggregate 'a'"):
        database.remove_aggregate_host("a", "h1")


def test_an_aggregate_holding_hosts_is_not_deleted(database):
    database.create_aggregate("a")
    database.add_aggregate_host("a", "h2")
    database.add_aggregate_host("a", "h1")
    with pytest.raises(Conflict, match=r"aggregate 'a' still holds host\(s\) h1, h2: remove them first"):
        database.delete_aggregate("a")
    assert database.get_aggregate("a")["hosts"] == ["h1", "h2"]
    database.remove_aggregate_host("a", "h1")
    database.remove_aggregate_host("a", "h2")
    database.delete_aggregate("a")
    assert database.list_aggregates() == []


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.delete_aggregate("nosuch"),
        lambda db: db.add_aggregate_host("nosuch", "h1"),
        lambda db: db.remove_aggregate_host("nosuch", "h1"),
        lambda db: db.update_aggregate("nosuch", {"k": "v"}),
        lambda db: db.get_aggregate("nosuch"),
    ],
)
def test_an_unknown_aggregate_is_not_found_and_nothing_changes(database, call):
    database.create_aggregate("a", None, {"k": "v"})
    database.add_aggregate_host("a", "h1")
    before = database.list_aggregates()
    with pytest.raises(NotFound, match="no aggregate named 'nosuch'"):
        call(database)
    assert database.list_aggregates() == before


def test_metadata_updates_merge_and_none_removes(database):
    database.create_aggregate("a", None, {"k1": "v1", "k2": "v2"})
    updated = database.update_aggregate("a", {"k2": "new", "k3": "v3"})
    assert updated["metadata"] == {"k1": "v1", "k2": "new", "k3": "v3"}
    updated = database.update_aggregate("a", {"k1": None, "absent": None})
    assert updated["metadata"] == {"k2": "new", "k3": "v3"}
    assert updated["availability_zone"] is None  # untouched without set_zone


def test_the_zone_changes_only_with_set_zone(database):
    database.create_aggregate("a", "az1", {"availability_zone": "az1"})
    assert (
        database.update_aggregate("a", {"k": "v"}, availability_zone="ignored")["availability_zone"] == "az1"
    )
    updated = database.update_aggregate(
        "a", {"availability_zone": "az2"}, availability_zone="az2", set_zone=True
    )
    assert updated["availability_zone"] == "az2" and updated["metadata"]["availability_zone"] == "az2"
    updated = database.update_aggregate(
        "a", {"availability_zone": None}, availability_zone=None, set_zone=True
    )
    assert updated["availability_zone"] is None and "availability_zone" not in updated["metadata"]


def test_host_changes_move_updated_at(database):
    created = database.create_aggregate("a")
    changed = database.add_aggregate_host("a", "h1")
    assert changed["updated_at"] >= created["updated_at"]
    assert changed["created_at"] == created["created_at"]


# -- server groups ------------------------------------------------------------


def test_create_list_show_delete_server_group(database):
    first, second = _uuid(), _uuid()
    group = database.create_server_group(first, "web", "anti-affinity", {"max_server_per_host": 2}, "p1")
    assert group == {
        "uuid": first,
        "name": "web",
        "policy": "anti-affinity",
        "rules": {"max_server_per_host": 2},
        "project_id": "p1",
        "members": [],
        "created_at": group["created_at"],
    }
    assert group["created_at"].endswith("Z")
    database.create_server_group(second, "web", "affinity")  # names need not be unique
    assert [g["uuid"] for g in database.list_server_groups()] == [first, second]
    assert database.get_server_group(second)["rules"] == {}
    assert database.get_server_group(second)["project_id"] is None

    database.delete_server_group(first)
    assert [g["uuid"] for g in database.list_server_groups()] == [second]
    with pytest.raises(NotFound, match=f"no server group {first}"):
        database.get_server_group(first)
    with pytest.raises(NotFound, match=f"no server group {first}"):
        database.delete_server_group(first)


def test_members_are_added_once_in_order(database):
    group = _uuid()
    database.create_server_group(group, "g", "affinity")
    a, b, c = _uuid(), _uuid(), _uuid()
    database.add_server_group_members(group, [a, b])
    database.add_server_group_members(group, [b, c, c])  # redelivered, and a duplicate
    assert database.get_server_group(group)["members"] == [a, b, c]
    [listed] = database.list_server_groups()
    assert listed["members"] == [a, b, c]
    database.add_server_group_members(group, [])
    assert database.get_server_group(group)["members"] == [a, b, c]


def test_members_of_an_unknown_group_are_not_found(database):
    missing = _uuid()
    with pytest.raises(NotFound, match=f"no server group {missing}"):
        database.add_server_group_members(missing, [_uuid()])


def test_deleting_a_group_drops_its_members_only(database):
    keep, drop = _uuid(), _uuid()
    database.create_server_group(keep, "keep", "affinity")
    database.create_server_group(drop, "drop", "affinity")
    member = _uuid()
    database.add_server_group_members(keep, [member])
    database.add_server_group_members(drop, [_uuid(), member])
    database.delete_server_group(drop)
    assert database.get_server_group(keep)["members"] == [member]


def test_hosts_of_instances_skips_unplaced_deleted_and_failed_ones_and_names_both_ends_of_a_move(database):
    placed, scheduling, deleted, failed, active, moving, resizing = (_uuid() for _ in range(7))
    database.create_instances([_instance(u) for u in (placed, scheduling, deleted, failed, active, moving,
                                                      resizing)])
    database.update_instance(placed, {"state": states.SCHEDULED, "host": "h1"})
    database.update_instance(active, {"state": states.ACTIVE, "host": "h2"})
    database.update_instance(deleted, {"state": states.DELETED, "host": "h3"})
    database.update_instance(failed, {"state": states.ERROR, "host": "h3"})
    database.update_instance(moving, {"state": states.MIGRATING, "host": "h1", "move_host": "h4"})
    database.update_instance(resizing, {"state": states.MIGRATING, "host": "h2", "move_host": "h2"})
    found = database.hosts_of_instances([placed, scheduling, deleted, failed, active, moving, resizing,
                                         _uuid()])
    assert found == {placed: ("h1",), active: ("h2",), moving: ("h1", "h4"), resizing: ("h2",)}
    assert database.hosts_of_instances([]) == {}
