"""Syncs recorded together on PostgreSQL, through the fast path (one UPDATE ... FROM
(VALUES ...)) and through the portable statements: the same groups afterwards. Skipped
when no PostgreSQL server is reachable (tests/fixtures.py's PG_ADMIN_DSN)."""

from datetime import datetime, timedelta

import pytest

from scheduler.db import api as db_api
from scheduler.db import fastpaths
from scheduler.db.scaling_syncs import SyncRecord
from tests.fixtures import temporary_database

SPEC = {"min": 1, "max": 10, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}
TEMPLATE = {"flavor_name": "m1.small", "scheduler_hints": {}, "availability_zone": "az1",
            "server_group_uuid": None}
T0 = datetime(2026, 12, 1, 12, 0, 0)


@pytest.fixture(params=[True, False], ids=["fast-paths", "portable"])
def pg_database(request):
    pytest.importorskip("psycopg2")
    try:
        context = temporary_database(prefix="berth_unit", connect_timeout=3)
        url = context.__enter__()
    except AssertionError as exc:
        pytest.skip(str(exc))
    database = db_api.Database(url, max_retries=2, retry_interval=0.0, fast_paths=request.param)
    try:
        database.sync()
        yield database
    finally:
        database.dispose()
        context.__exit__(None, None, None)


def test_the_fast_path_is_taken_only_when_on(pg_database):
    updater = fastpaths.versioned_updater(pg_database.engine.dialect, pg_database.fast_paths)
    assert (updater is not None) is pg_database.fast_paths


def test_syncs_recorded_together_write_each_group_at_its_version(pg_database):
    db = pg_database
    for uuid, name in (("g1", "web"), ("g2", "api"), ("g3", "db")):
        db.create_scaling_group(uuid, name, SPEC, TEMPLATE, 2, project_id="p1")
    claimed = {g["uuid"]: g for g in db.claim_scaling_groups("a", T0, 30.0, 10)}
    db.update_scaling_group("g2", {"paused": True})  # changed since the claim: not written
    status = {"synced_at": "2026-12-01T12:00:01.000000Z", "reason": "100% of 50%",
              "nested": {"list": [1, 2.5, None], "quote": "it's"}}
    written = db.record_scaling_syncs(T0 + timedelta(seconds=1), [
        SyncRecord("g1", claimed["g1"]["version"], {"desired": 3, "status": status, "replace_failures": 2,
                                                    "replace_after": T0 + timedelta(seconds=40)}, [3]),
        SyncRecord("g2", claimed["g2"]["version"], {"desired": 5, "status": status}, [5]),
        SyncRecord("g3", claimed["g3"]["version"],
                   {"desired": 1, "status": None, "replace_after": None}, [1]),
    ])
    assert written == {"g1", "g3"}
    g1, g2, g3 = (db.get_scaling_group(uuid) for uuid in ("g1", "g2", "g3"))
    assert (g1["desired"], g1["status"], g1["replace_failures"], g1["replace_after"], g1["version"],
            g1["last_synced_at"]) == (3, status, 2, "2026-12-01T12:00:40.000000Z",
                                      claimed["g1"]["version"] + 1, "2026-12-01T12:00:01.000000Z")
    assert (g2["desired"], g2["status"], g2["last_synced_at"]) == (2, None, None)
    assert (g3["desired"], g3["status"], g3["replace_after"], g3["version"]) == (
        1, None, None, claimed["g3"]["version"] + 1)
    assert db.scaling_group_history("g1")["recommendations"] == [
        {"recorded_at": "2026-12-01T12:00:01.000000Z", "replicas": 3}]


def test_a_chunks_reads_and_claims_find_only_their_groups(pg_database):
    db = pg_database
    for uuid, name in (("g1", "web"), ("g2", "api"), ("g3", "db")):
        db.create_scaling_group(uuid, name, SPEC, TEMPLATE, 1)
    db.create_instances([{"uuid": "m1", "flavor_name": "m1.small", "memory_mb": 512, "vcpus": 1,
                          "scaling_group_uuid": "g1", "state": "ACTIVE"},
                         {"uuid": "m3", "flavor_name": "m1.small", "memory_mb": 512, "vcpus": 1,
                          "scaling_group_uuid": "g3", "state": "ACTIVE"}])
    claimed = db.claim_scaling_groups("a", T0, 30.0, 2)
    assert [g["uuid"] for g in claimed] == ["g1", "g2"]
    assert db.claim_scaling_groups("b", T0, 30.0, 10)[0]["uuid"] == "g3"  # the one left
    db.record_scaling_syncs(T0, [SyncRecord(g["uuid"], g["version"], {"desired": 1}, [1]) for g in claimed])
    found = db.read_scaling_syncs(["g1", "g2"])
    assert sorted(found) == ["g1", "g2"]
    assert [m["uuid"] for m in found["g1"]["members"]] == ["m1"]
    assert found["g2"]["members"] == []
    assert [r["replicas"] for r in found["g1"]["recommendations"]] == [1]
