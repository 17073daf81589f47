"""The migrations table's queries (SQLite): created with an id and times, compared-and-set by
status, the move under way of an instance, and listings newest first by host, status, instance."""

from datetime import timedelta

import pytest

from scheduler.db import moves
from scheduler.db.engine import to_iso

U1 = "00000000-0000-4000-8000-000000000001"
U2 = "00000000-0000-4000-8000-000000000002"


def _move(database, uuid=U1, kind=moves.MIGRATION, source="h1", dest="h2", **extra):
    return database.create_migration({"instance_uuid": uuid, "kind": kind, "source_host": source,
                                      "dest_host": dest, **extra})


def test_a_created_migration_comes_back_with_its_id_and_times(database):
    before = database.now()
    created = _move(database, kind=moves.RESIZE, new_flavor={"memory_mb": 1024, "vcpus": 2},
                    old_flavor={"memory_mb": 512, "vcpus": 1})
    assert isinstance(created["id"], int)
    assert created["status"] == moves.MIGRATING  # the default
    assert created["created_at"] == created["updated_at"] >= to_iso(before)
    assert created["created_at"].endswith("Z") and created["finished_at"] is None
    assert created["new_flavor"] == {"memory_mb": 1024, "vcpus": 2}
    assert database.get_migration(created["id"]) == created
    assert database.get_migration(created["id"] + 1) is None


@pytest.mark.parametrize(("record", "message"), [
    ({"kind": "migration"}, "a migration needs an instance_uuid"),
    ({"instance_uuid": U1}, "a migration needs a kind"),
    ({"instance_uuid": U1, "kind": "teleport"}, "migration kind must be one of resize, migration, "
                                                "live-migration, evacuation, got 'teleport'"),
    ({"instance_uuid": U1, "kind": "resize", "status": "done"}, "migration status must be one of"),
    ({"instance_uuid": U1, "kind": "resize", "colour": "red"}, "not migration columns: colour"),
])
def test_a_bad_record_is_refused_naming_the_field_and_nothing_is_saved(database, record, message):
    with pytest.raises(ValueError, match=message):
        database.create_migration(record)
    assert database.list_migrations() == []


def test_update_is_a_compare_and_set_on_the_status(database):
    created = _move(database)
    assert database.update_migration(created["id"], {"status": moves.ERROR},
                                     expected_status=moves.FINISHED) is None
    assert database.get_migration(created["id"]) == created  # nothing changed

    done = database.update_migration(created["id"], {"status": moves.COMPLETED, "dest_node": "h2"},
                                     expected_status=(moves.MIGRATING, moves.FINISHED))
    assert done["status"] == moves.COMPLETED and done["dest_node"] == "h2"
    assert done["updated_at"] >= created["updated_at"]
    assert done["finished_at"] == done["updated_at"]  # an ended move is stamped
    # A second ending (a late, redelivered update) finds it ended already.
    assert database.update_migration(created["id"], {"status": moves.ERROR},
                                     expected_status=moves.MIGRATING) is None
    assert database.get_migration(created["id"])["status"] == moves.COMPLETED
    assert database.update_migration(created["id"] + 1, {"status": moves.ERROR}) is None


def test_update_checks_what_it_writes(database):
    created = _move(database)
    with pytest.raises(ValueError, match="migration status must be one of"):
        database.update_migration(created["id"], {"status": "gone"})
    with pytest.raises(ValueError, match="not migration columns: instance_uuid"):
        database.update_migration(created["id"], {"instance_uuid": U2})
    assert database.get_migration(created["id"]) == created


def test_a_resize_waiting_for_confirmation_is_not_finished_yet(database):
    created = _move(database, kind=moves.RESIZE)
    waiting = database.update_migration(created["id"], {"status": moves.FINISHED}, moves.MIGRATING)
    assert waiting["finished_at"] is None
    assert database.active_migration(U1) == waiting
    reason = database.update_migration(created["id"], {"status": moves.ERROR, "reason": "disk full"})
    assert reason["reason"] == "disk full" and reason["finished_at"] is not None


def test_active_migration_is_the_move_under_way(database):
    assert database.active_migration(U1) is None
    old = _move(database)
    database.update_migration(old["id"], {"status": moves.ERROR, "reason": "no room"})
    assert database.active_migration(U1) is None
    new = _move(database, source="h1", dest="h3")
    _move(database, uuid=U2)
    assert database.active_migration(U1)["id"] == new["id"]


def test_listings_newest_first_by_host_status_and_instance(database):
    first = _move(database, U1, source="h1", dest="h2",
                  created_at=database.now() - timedelta(minutes=5))
    second = _move(database, U2, kind=moves.EVACUATION, source="h2", dest="h3")
    third = _move(database, U1, kind=moves.LIVE_MIGRATION, source="h2", dest="h4")
    database.update_migration(first["id"], {"status": moves.COMPLETED})

    def ids(**filters):
        return [m["id"] for m in database.list_migrations(**filters)]

    assert ids() == [third["id"], second["id"], first["id"]]
    assert ids(host="h2") == [third["id"], second["id"], first["id"]]  # as source or destination
    assert ids(host="h3") == [second["id"]]
    assert ids(host="h9") == []
    assert ids(status=moves.COMPLETED) == [first["id"]]
    assert ids(instance_uuid=U1) == [third["id"], first["id"]]
    assert ids(instance_uuid=U1, status=moves.MIGRATING, host="h4") == [third["id"]]
    assert ids(limit=2) == [third["id"], second["id"]]


def test_the_statuses_and_kinds_are_nova_s():
    assert moves.STATUSES == ("migrating", "finished", "confirmed", "reverted", "completed", "error")
    assert moves.KINDS == ("resize", "migration", "live-migration", "evacuation")
    assert set(moves.ACTIVE_STATUSES) | set(moves.ENDED_STATUSES) == set(moves.STATUSES)
