"""Scaling groups in the database (SQLite): groups, members, history, leases."""

import json
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from scheduler import states
from scheduler.db import api as db_api
from scheduler.db import archive
from scheduler.db.api import Conflict, NotFound
from scheduler.db.models import shadow_instances
from scheduler.db.scaling_syncs import SyncRecord

SPEC = {"min": 1, "max": 10, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}
TEMPLATE = {"flavor_name": "m1.small", "scheduler_hints": {}, "availability_zone": "az1",
            "server_group_uuid": None}
T0 = datetime(2026, 12, 1, 12, 0, 0)
LEASE = 30.0


def _group(database, uuid="g1", name="web", **values):
    return database.create_scaling_group(uuid, name, values.pop("spec", SPEC),
                                         values.pop("template", TEMPLATE), values.pop("desired", 1), **values)


def _member(uuid, **values):
    return {"uuid": uuid, "flavor_name": "m1.small", "memory_mb": 512, "vcpus": 1, **values}


def _at(seconds):
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def other(db_url, database):
    """A second scheduler process's view of the same database."""
    other = db_api.Database(db_url, max_retries=2, retry_interval=0.0)
    yield other
    other.dispose()


def _count(database, table):
    with database.engine.connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(sa.table(table))).scalar_one()


# -- the groups ----------------------------------------------------------------


def test_create_get_list_update(database):
    created = _group(database, project_id="p1")
    assert created == {
        "uuid": "g1", "name": "web", "project_id": "p1", "spec": SPEC, "template": TEMPLATE, "paused": False,
        "desired": 1, "status": None, "last_synced_at": None, "replace_after": None, "replace_failures": 0,
        "lease_owner": None, "lease_expires_at": None, "version": 0, "created_at": created["created_at"],
        "updated_at": created["created_at"], "deleted_at": None,
    }
    assert created["created_at"].endswith("Z")
    assert database.get_scaling_group("g1") == created == database.get_scaling_group_by_name("web")
    _group(database, "g2", "api", project_id="p2")
    assert [g["name"] for g in database.list_scaling_groups()] == ["api", "web"]
    assert [g["name"] for g in database.list_scaling_groups(project_id="p1")] == ["web"]

    updated = database.update_scaling_group("g1", {"paused": True, "spec": dict(SPEC, max=20),
                                                   "replace_after": _at(60), "replace_failures": 2})
    assert updated["paused"] is True and updated["spec"]["max"] == 20
    assert updated["replace_after"] == "2026-12-01T12:01:00.000000Z" and updated["replace_failures"] == 2
    assert updated["version"] == 1
    assert database.get_scaling_group("g1") == updated


def test_unknown_groups_and_bad_values_are_refused(database):
    _group(database)
    with pytest.raises(NotFound, match="no scaling group nope"):
        database.get_scaling_group("nope")
    with pytest.raises(NotFound, match="no scaling group named 'nope'"):
        database.get_scaling_group_by_name("nope")
    with pytest.raises(NotFound, match="no scaling group nope"):
        database.update_scaling_group("nope", {"desired": 2})
    with pytest.raises(ValueError, match="not scaling group columns one may write: lease_owner, version"):
        database.update_scaling_group("g1", {"version": 7, "lease_owner": "me"})
    with pytest.raises(ValueError, match="desired must be a whole number of at least 0, got -1"):
        database.update_scaling_group("g1", {"desired": -1})
    with pytest.raises(ValueError, match="spec must be a JSON object"):
        database.update_scaling_group("g1", {"spec": [1]})
    assert database.get_scaling_group("g1")["version"] == 0


def test_a_name_is_unique(database):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    with pytest.raises(Conflict, match="a scaling group named 'web' exists already"):
        _group(database, "g3", "web")
    with pytest.raises(Conflict, match="a scaling group named 'api' exists already"):
        database.update_scaling_group("g1", {"name": "api"})
    with pytest.raises(Conflict, match="a scaling group g1 exists already"):
        _group(database, "g1", "other")
    assert [(g["uuid"], g["name"]) for g in database.list_scaling_groups()] == [("g2", "api"), ("g1", "web")]
    assert database.update_scaling_group("g1", {"name": "web"})["name"] == "web"


def test_update_if_is_a_compare_and_set(database):
    group = _group(database)
    written = database.update_scaling_group_if("g1", group["version"], {"desired": 3})
    assert written["desired"] == 3 and written["version"] == group["version"] + 1
    assert database.update_scaling_group_if("g1", group["version"], {"desired": 9}) is None
    database.update_scaling_group("g1", {"paused": True})  # an operator's change meanwhile
    assert database.update_scaling_group_if("g1", written["version"], {"desired": 9}) is None
    assert database.get_scaling_group("g1")["desired"] == 3
    assert database.update_scaling_group_if("nope", 0, {"desired": 9}) is None


# -- members -------------------------------------------------------------------


def test_members_are_the_instances_of_the_group(database):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    database.create_instances([
        _member("m1", scaling_group_uuid="g1", created_at=_at(1)),
        _member("m2", scaling_group_uuid="g1", created_at=_at(2), state=states.ACTIVE),
        _member("other", scaling_group_uuid="g2"),
        _member("loose"),
    ])
    assert [m["uuid"] for m in database.list_scaling_group_members("g1")] == ["m1", "m2"]
    assert database.get_instance("loose")["scaling_group_uuid"] is None

    database.update_instance("m1", {"state": states.DELETED})  # deleted by hand
    assert [m["uuid"] for m in database.list_scaling_group_members("g1")] == ["m2"]
    every = database.list_scaling_group_members("g1", include_deleted=True)
    assert [m["uuid"] for m in every] == ["m1", "m2"]


def test_an_archived_member_keeps_its_group(database):
    _group(database)
    database.create_instances([_member("m1", scaling_group_uuid="g1", state=states.DELETED,
                                       deleted_at=_at(0))])
    moved, _ = archive.archive(database, _at(1))
    assert moved["instances"] == 1
    with database.engine.connect() as connection:
        assert connection.execute(sa.select(shadow_instances.c.scaling_group_uuid)).scalars().all() == ["g1"]


# -- syncs and history ---------------------------------------------------------


def test_a_sync_records_its_history_and_old_history_is_pruned(database):
    group = _group(database, "g1", "web")
    _group(database, "g2", "api")
    first = database.record_scaling_sync("g1", group["version"], _at(0), {"desired": 3, "status": {"x": 1}},
                                         recommendations=[1, 3], scale_event=(2, "cpu 90% of 50%"))
    assert first["desired"] == 3 and first["status"] == {"x": 1}
    assert first["last_synced_at"] == "2026-12-01T12:00:00.000000Z"
    second = database.record_scaling_sync("g1", first["version"], _at(60), recommendations=[2])
    assert second["desired"] == 3 and second["last_synced_at"] == "2026-12-01T12:01:00.000000Z"
    database.record_scaling_sync("g2", 0, _at(0), recommendations=[1], scale_event=(-1, "down"))

    assert database.scaling_group_history("g1") == {
        "recommendations": [
            {"recorded_at": "2026-12-01T12:00:00.000000Z", "replicas": 1},
            {"recorded_at": "2026-12-01T12:00:00.000000Z", "replicas": 3},
            {"recorded_at": "2026-12-01T12:01:00.000000Z", "replicas": 2},
        ],
        "scale_events": [
            {"recorded_at": "2026-12-01T12:00:00.000000Z", "change": 2, "reason": "cpu 90% of 50%"},
        ],
    }
    assert database.scaling_group_history("g1", since=_at(30)) == {
        "recommendations": [{"recorded_at": "2026-12-01T12:01:00.000000Z", "replicas": 2}],
        "scale_events": [],
    }

    assert database.prune_scaling_history(_at(30), "g1") == {
        "scaling_group_recommendations": 2, "scaling_group_events": 1}
    assert [r["replicas"] for r in database.scaling_group_history("g1")["recommendations"]] == [2]
    assert len(database.scaling_group_history("g2")["scale_events"]) == 1  # another group's: kept
    assert database.prune_scaling_history(_at(30)) == {
        "scaling_group_recommendations": 1, "scaling_group_events": 1}
    assert database.scaling_group_history("g2") == {"recommendations": [], "scale_events": []}
    with pytest.raises(ValueError, match="not by 0"):
        database.record_scaling_sync("g1", second["version"], _at(90), scale_event=(0, "none"))


def test_new_members_are_created_once(database, other):
    group = _group(database, project_id="p1")
    claimed = database.claim_scaling_groups("a", _at(0), LEASE, 10)[0]
    written = database.record_scaling_sync(
        "g1", claimed["version"], _at(0), {"desired": 3}, recommendations=[1, 3], scale_event=(2, "up"),
        new_members=[_member("m2"), _member("m3", display_name="web-3")])
    assert written["desired"] == 3 and written["version"] == claimed["version"] + 1 > group["version"]
    members = database.list_scaling_group_members("g1")
    assert [(m["uuid"], m["state"], m["scaling_group_uuid"], m["project_id"]) for m in members] == [
        ("m2", states.SCHEDULING, "g1", "p1"), ("m3", states.SCHEDULING, "g1", "p1")]
    assert members[1]["display_name"] == "web-3"

    # The same sync again (a retry, or a controller that read the group before): nothing.
    again = database.record_scaling_sync("g1", claimed["version"], _at(0), {"desired": 3},
                                         recommendations=[3], scale_event=(2, "up"),
                                         new_members=[_member("m4"), _member("m5")])
    assert again is None
    assert len(database.list_scaling_group_members("g1")) == 2
    assert len(database.scaling_group_history("g1")["scale_events"]) == 1

    # A controller taking over after the lease expired finds the members to build.
    [taken] = other.claim_scaling_groups("b", _at(LEASE), LEASE, 10)
    assert taken["desired"] == 3
    assert [m["uuid"] for m in other.list_scaling_group_members("g1")
            if m["state"] == states.SCHEDULING] == ["m2", "m3"]


def test_a_sync_that_fails_writes_nothing(database):
    group = _group(database)
    database.create_instances([_member("taken")])
    with pytest.raises(Conflict, match="instance.s. taken exist already"):
        database.record_scaling_sync("g1", group["version"], _at(0), {"desired": 3}, recommendations=[3],
                                     scale_event=(2, "up"), new_members=[_member("new"), _member("taken")])
    with pytest.raises(ValueError, match="a new member is SCHEDULING, not ACTIVE"):
        database.record_scaling_sync("g1", group["version"], _at(0), {"desired": 2},
                                     new_members=[_member("new", state=states.ACTIVE)])
    assert database.get_scaling_group("g1") == group
    assert database.scaling_group_history("g1") == {"recommendations": [], "scale_events": []}
    assert database.get_instance("new") is None
    assert database.get_instance("taken")["scaling_group_uuid"] is None


def test_a_sync_composes_with_a_unit_of_work(database):
    group = _group(database)
    database.create_instances([_member("m1", scaling_group_uuid="g1", state=states.ACTIVE)])
    with pytest.raises(RuntimeError, match="cast failed"), database.unit_of_work():
        database.record_scaling_sync("g1", group["version"], _at(0), {"desired": 0}, scale_event=(-1, "down"))
        database.update_instances_if([("m1", {"state": states.DELETING}, {"state": states.ACTIVE})])
        raise RuntimeError("cast failed")
    assert database.get_scaling_group("g1") == group
    assert database.get_instance("m1")["state"] == states.ACTIVE
    assert _count(database, "scaling_group_events") == 0


# -- leases --------------------------------------------------------------------


def test_a_lease_is_held_until_it_expires_then_taken_over(database, other):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    held = database.claim_scaling_groups("a", _at(0), LEASE, 10)
    assert [(g["uuid"], g["lease_owner"], g["lease_expires_at"]) for g in held] == [
        ("g1", "a", "2026-12-01T12:00:30.000000Z"), ("g2", "a", "2026-12-01T12:00:30.000000Z")]
    assert other.claim_scaling_groups("b", _at(1), LEASE, 10) == []

    renewed = database.claim_scaling_groups("a", _at(20), LEASE, 10)
    assert [g["lease_expires_at"] for g in renewed] == ["2026-12-01T12:00:50.000000Z"] * 2
    assert [g["version"] for g in renewed] == [g["version"] + 1 for g in held]
    assert other.claim_scaling_groups("b", _at(49), LEASE, 10) == []

    # "a" stops renewing (it died, or hangs): "b" takes over when the lease expires.
    taken = other.claim_scaling_groups("b", _at(50), LEASE, 10)
    assert [(g["uuid"], g["lease_owner"]) for g in taken] == [("g1", "b"), ("g2", "b")]
    g1 = renewed[0]
    assert database.update_scaling_group_if("g1", g1["version"], {"desired": 5}) is None
    assert database.record_scaling_sync("g1", g1["version"], _at(51), {"desired": 5},
                                        new_members=[_member("late")]) is None
    assert database.get_instance("late") is None
    assert database.claim_scaling_groups("a", _at(51), LEASE, 10) == []
    assert other.update_scaling_group_if("g1", taken[0]["version"], {"desired": 2})["desired"] == 2


def test_an_owner_renews_its_own_groups_first(database, other):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    database.claim_scaling_groups("a", _at(0), LEASE, 10)
    assert database.release_scaling_groups("a", ["g1"]) == 1
    # g1 is free and older, but "a" renews g2 within its limit rather than take g1.
    assert [g["uuid"] for g in database.claim_scaling_groups("a", _at(10), LEASE, 1)] == ["g2"]
    assert [g["uuid"] for g in other.claim_scaling_groups("b", _at(10), LEASE, 10)] == ["g1"]


def test_released_groups_are_claimed_at_once(database, other):
    _group(database)
    [held] = database.claim_scaling_groups("a", _at(0), LEASE, 10)
    assert database.release_scaling_groups("b") == 0
    assert database.release_scaling_groups("a") == 1
    [taken] = other.claim_scaling_groups("b", _at(1), LEASE, 10)
    assert taken["lease_owner"] == "b" and taken["version"] == held["version"] + 2
    assert database.update_scaling_group_if("g1", held["version"], {"desired": 4}) is None


# -- deleting --------------------------------------------------------------------


def test_a_group_without_members_is_deleted_at_once(database):
    group = _group(database)
    database.record_scaling_sync("g1", group["version"], _at(0), recommendations=[1], scale_event=(1, "up"))
    database.create_instances([_member("gone", scaling_group_uuid="g1", state=states.DELETED)])
    assert database.delete_scaling_group("g1") is True
    with pytest.raises(NotFound):
        database.get_scaling_group("g1")
    assert _count(database, "scaling_group_recommendations") == _count(database, "scaling_group_events") == 0
    with pytest.raises(NotFound, match="no scaling group g1"):
        database.delete_scaling_group("g1")
    assert _group(database, "g9")["name"] == "web"  # the name is free again


def test_a_group_with_members_is_deleted_by_its_controller(database):
    _group(database)
    database.create_instances([_member("m1", scaling_group_uuid="g1", state=states.ACTIVE)])
    assert database.delete_scaling_group("g1") is False
    [deleting] = database.claim_scaling_groups("a", _at(0), LEASE, 10)
    assert deleting["deleted_at"] is not None
    assert [g["uuid"] for g in database.list_scaling_groups(include_deleting=False)] == []
    with pytest.raises(Conflict, match="named 'web' exists already .or is being deleted"):
        _group(database, "g2", "web")
    assert database.record_scaling_sync("g1", deleting["version"], _at(0),
                                        new_members=[_member("m2")]) is None
    assert database.get_instance("m2") is None

    assert database.remove_scaling_group_if("g1", deleting["version"]) is False  # m1 is live
    database.update_instance("m1", {"state": states.DELETED})
    assert database.remove_scaling_group_if("g1", deleting["version"] - 1) is False  # stale
    assert database.remove_scaling_group_if("g1", deleting["version"]) is True
    assert database.list_scaling_groups() == []


# -- the controller's syncs in bulk ----------------------------------------------


def test_syncs_recorded_together_keep_each_groups_compare_and_set(database):
    _group(database, "g1", "web", project_id="p1")
    _group(database, "g2", "api")
    _group(database, "g3", "db")
    claimed = {g["uuid"]: g for g in database.claim_scaling_groups("a", _at(0), LEASE, 10)}
    database.update_scaling_group("g2", {"paused": True})  # an operator's change since the claim
    database.delete_scaling_group("g3")  # being deleted (it had no member: gone)
    written = database.record_scaling_syncs(_at(1), [
        SyncRecord("g1", claimed["g1"]["version"], {"desired": 2, "status": {"x": 1}}, [1, 2], (1, "up"),
                   [_member("m1", display_name="web-2")]),
        SyncRecord("g2", claimed["g2"]["version"], {"desired": 5}, [5], (4, "up"), [_member("m2")]),
        SyncRecord("g3", claimed["g3"]["version"], {"desired": 5}, [5]),
    ])
    assert written == {"g1"}
    g1 = database.get_scaling_group("g1")
    assert (g1["desired"], g1["status"], g1["version"]) == (2, {"x": 1}, claimed["g1"]["version"] + 1)
    assert g1["last_synced_at"] == "2026-12-01T12:00:01.000000Z"
    assert [(m["uuid"], m["state"], m["project_id"], m["display_name"])
            for m in database.list_scaling_group_members("g1")] == [("m1", states.SCHEDULING, "p1", "web-2")]
    assert database.scaling_group_history("g1") == {
        "recommendations": [{"recorded_at": "2026-12-01T12:00:01.000000Z", "replicas": 1},
                            {"recorded_at": "2026-12-01T12:00:01.000000Z", "replicas": 2}],
        "scale_events": [{"recorded_at": "2026-12-01T12:00:01.000000Z", "change": 1, "reason": "up"}]}
    g2 = database.get_scaling_group("g2")
    assert (g2["desired"], g2["last_synced_at"]) == (1, None)
    assert database.scaling_group_history("g2") == {"recommendations": [], "scale_events": []}
    assert database.get_instance("m2") is None


def test_a_group_being_deleted_gets_no_member_from_a_sync_recorded_together(database):
    _group(database)
    database.create_instances([_member("m1", scaling_group_uuid="g1", state=states.ACTIVE)])
    database.delete_scaling_group("g1")
    [deleting] = database.claim_scaling_groups("a", _at(0), LEASE, 10)
    assert database.record_scaling_syncs(_at(0), [
        SyncRecord("g1", deleting["version"], {"desired": 2}, new_members=[_member("m2")])]) == set()
    assert database.get_instance("m2") is None


def test_syncs_recorded_together_write_nothing_if_a_new_member_exists(database):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    database.create_instances([_member("taken")])
    with pytest.raises(Conflict, match="instance.s. taken exist already"):
        database.record_scaling_syncs(_at(0), [
            SyncRecord("g1", 0, {"desired": 2}, [2], new_members=[_member("new")]),
            SyncRecord("g2", 0, {"desired": 2}, [2], new_members=[_member("taken")])])
    with pytest.raises(ValueError, match="desired must be a whole number"):
        database.record_scaling_syncs(_at(0), [SyncRecord("g1", 0, {"desired": -1})])
    assert [g["version"] for g in database.list_scaling_groups()] == [0, 0]
    assert database.get_instance("new") is None
    assert _count(database, "scaling_group_recommendations") == 0


def test_syncs_recorded_together_prune_only_their_own_old_history(database):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    for uuid in ("g1", "g2"):
        database.record_scaling_sync(uuid, 0, _at(0), recommendations=[3], scale_event=(2, "up"))
    written = database.record_scaling_syncs(_at(60), [SyncRecord("g1", 1, {}, [4], prune_before=_at(30))])
    assert written == {"g1"}
    assert database.scaling_group_history("g1") == {
        "recommendations": [{"recorded_at": "2026-12-01T12:01:00.000000Z", "replicas": 4}],
        # Scale events stay an hour, for show, whatever the windows read.
        "scale_events": [{"recorded_at": "2026-12-01T12:00:00.000000Z", "change": 2, "reason": "up"}]}
    assert len(database.scaling_group_history("g2")["recommendations"]) == 1
    database.record_scaling_syncs(_at(3601), [SyncRecord("g1", 2, {}, [4], prune_before=_at(3590))])
    assert database.scaling_group_history("g1")["scale_events"] == []
    assert len(database.scaling_group_history("g2")["scale_events"]) == 1


def test_a_syncs_reads_in_bulk(database):
    _group(database, "g1", "web")
    _group(database, "g2", "api")
    database.create_instances([
        _member("m2", scaling_group_uuid="g1", created_at=_at(2), state=states.ACTIVE, host="h1"),
        _member("m1", scaling_group_uuid="g1", created_at=_at(1)),
        _member("gone", scaling_group_uuid="g1", created_at=_at(0), state=states.DELETED),
        _member("other", scaling_group_uuid="g2"),
    ])
    version = 0
    for second, replicas in ((0, 3), (15, 5), (30, 3), (45, 4)):
        version = database.record_scaling_sync("g1", version, _at(second), recommendations=[replicas],
                                               scale_event=(1, f"at {second}") if second == 15 else None
                                               )["version"]
    found = database.read_scaling_syncs(["g1", "g2", "nope"])
    g1 = found["g1"]
    assert [(m["uuid"], m["state"], m["host"]) for m in g1["members"]] == [
        ("m1", states.SCHEDULING, None), ("m2", states.ACTIVE, "h1")]
    assert g1["members"][0]["updated_at"] == _at(1)  # never updated: its creation
    # The youngest record of each count: a window's lowest and highest are all it reads.
    assert sorted((r["replicas"], r["recorded_at"]) for r in g1["recommendations"]) == [
        (3, _at(30)), (4, _at(45)), (5, _at(15))]
    assert g1["oldest_recommendation"] == _at(0)
    assert g1["scale_events"] == [{"recorded_at": _at(15), "change": 1, "reason": "at 15"}]
    assert [m["uuid"] for m in found["g2"]["members"]] == ["other"]
    assert found["nope"] == {"members": [], "recommendations": [], "oldest_recommendation": None,
                             "scale_events": []}


def test_members_change_state_in_bulk_only_from_the_states_expected(database):
    database.create_instances([_member("a", state=states.ACTIVE), _member("b", state=states.ERROR),
                               _member("c", state=states.DELETED)])
    assert database.set_members_state_if(["a", "b", "c", "nope"], states.DELETING,
                                         (states.ACTIVE, states.ERROR)) == {"a", "b"}
    assert [database.get_instance(u)["state"] for u in "abc"] == [states.DELETING, states.DELETING,
                                                                   states.DELETED]


def test_a_controllers_claim_carries_spec_and_template_as_text(database):
    _group(database)
    database.update_scaling_group("g1", {"status": {"x": 1}})
    [group] = database.claim_scaling_groups("a", _at(0), LEASE, 10, json_text=True)
    assert json.loads(group["spec"]) == SPEC and json.loads(group["template"]) == TEMPLATE
    assert "status" not in group and group["lease_expires_at"] == _at(LEASE)
