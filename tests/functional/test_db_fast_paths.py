"""The dialect fast paths against a real PostgreSQL: on and off, the same rows.

Each side works in a temporary database of its own (tests/fixtures.py), through
psycopg2 as Berth's PostgreSQL extra installs it.
"""

import contextlib

import pytest
import sqlalchemy as sa

from scheduler import states
from scheduler.db import api as db_api
from scheduler.db import fastpaths
from scheduler.db.models import instances
from tests.functional.fleet import temporary_database

pytestmark = pytest.mark.functional

AWKWARD = "50% off, %s and %(name)s, 'quoted' \\ back, \"double\", \u00e9t\u00e9 \u2603, \t tab"

RECORDS = [
    {   # every column given
        "uuid": "every-column", "project_id": AWKWARD, "host": "h1", "node": "h1", "state": states.ACTIVE,
        "flavor_name": AWKWARD, "memory_mb": 2**31 - 1, "root_gb": 20, "ephemeral_gb": 1, "vcpus": 64,
        "request_spec": {"name": AWKWARD, "nested": [1, None, {"x": 1.5, "y": -0.0}], "empty": {},
                         "list": [], "true": True, "big": 2**53, "unicode": "\u2603"},
        "filter_properties": {"retry": {"num_attempts": 2, "hosts": [["h0", "h0"]]}},
        "attempts": 3, "fault_reason": AWKWARD, "fault_details": "", "display_name": AWKWARD,
        "created_at": "2024-01-01T00:00:00.250001Z", "updated_at": "2024-01-01T01:00:00+01:00",
        "scheduled_at": 1704067201.5, "launched_at": "2024-02-29T23:59:59.999999Z", "deleted_at": None,
    },
    {"uuid": "only-a-uuid"},  # every default, NULLs
    {"uuid": "json-null-and-scalars", "request_spec": None, "filter_properties": {"s": "%%", "n": None},
     "state": states.SCHEDULED, "created_at": "2024-01-01T00:00:00Z"},
    *({"uuid": f"bulk-{i:04d}", "host": f"h{i % 7}", "state": states.SCHEDULED, "memory_mb": i,
       "request_spec": {"i": i, "s": AWKWARD[: i % len(AWKWARD)]}, "created_at": "2024-01-01T00:00:00Z"}
      for i in range(600)),  # more than one batch's worth of rows in one statement
]


@contextlib.contextmanager
def _database(fast_paths):
    with temporary_database() as url:
        database = db_api.Database(url, max_retries=3, retry_interval=0.2, fast_paths=fast_paths)
        try:
            database.sync()
            yield database
        finally:
            database.dispose()


def _raw_rows(database):
    """Every stored column of every instance but the serial id, by uuid, as the database holds it."""
    with database.engine.connect() as connection:
        rows = connection.execute(sa.select(instances).order_by(instances.c.uuid)).mappings().all()
    return {row["uuid"]: {key: value for key, value in row.items() if key != "id"} for row in rows}


@pytest.fixture
def psycopg2_inserts(monkeypatch):
    """The batches that went through the psycopg2 fast path."""
    taken = []
    real = fastpaths.insert_new_instances_psycopg2

    def spy(connection, table, rows):
        taken.append(len(rows))
        return real(connection, table, rows)

    monkeypatch.setattr(fastpaths, "insert_new_instances_psycopg2", spy)
    return taken


def _write_and_read(fast_paths, taken):
    with _database(fast_paths) as database:
        assert database.fast_paths is fast_paths
        first = database.create_instances(RECORDS)
        # Redelivered, with one new record: only that one is inserted.
        again = database.create_instances(RECORDS[:2] + [{"uuid": "late", "host": "h1"}])
        assert bool(taken) is fast_paths
        taken.clear()
        # A batch of state changes: some on the host named, one not, one in another state.
        applied = database.set_instance_states(
            [(f"bulk-{i:04d}", f"h{i % 7}", {"state": states.BUILDING}, states.SCHEDULED) for i in range(20)]
            + [("bulk-0020", "not-its-host", {"state": states.BUILDING}, states.SCHEDULED),
               ("every-column", "h1", {"state": states.BUILDING}, states.SCHEDULED)]
        )
        raw = _raw_rows(database)
        api_rows = database.get_instances(list(raw))
    return first, again, applied, raw, api_rows


# Times the database's clock gave: when records came without them, and state changes.
CLOCK_TIMED = {"only-a-uuid": ("created_at", "updated_at"), "late": ("created_at", "updated_at"),
               **{f"bulk-{i:04d}": ("updated_at",) for i in range(20)}}


def _without_clock_times(rows):
    return {uuid: {key: value for key, value in row.items()
                   if key != "id" and key not in CLOCK_TIMED.get(uuid, ())}
            for uuid, row in rows.items()}


def test_instances_are_stored_the_same_with_the_fast_paths_on_and_off(psycopg2_inserts):
    fast = _write_and_read(True, psycopg2_inserts)
    portable = _write_and_read(False, psycopg2_inserts)
    first, again, applied, raw, api_rows = fast
    assert first == [record["uuid"] for record in RECORDS]
    assert again == ["late"]
    assert applied == [True] * 20 + [False, False]
    assert (first, again, applied) == portable[:3]
    assert _without_clock_times(raw) == _without_clock_times(portable[3])
    assert _without_clock_times(api_rows) == _without_clock_times(portable[4])
    assert len(raw) == len(RECORDS) + 1
    every = api_rows["every-column"]
    assert {key: every[key] for key in RECORDS[0] if not key.endswith("_at")} == {
        key: value for key, value in RECORDS[0].items() if not key.endswith("_at")}
    assert (every["created_at"], every["updated_at"], every["scheduled_at"], every["launched_at"],
            every["deleted_at"]) == ("2024-01-01T00:00:00.250001Z", "2024-01-01T00:00:00.000000Z",
                                     "2024-01-01T00:00:01.500000Z", "2024-02-29T23:59:59.999999Z", None)
    plain = api_rows["only-a-uuid"]
    assert (plain["state"], plain["host"], plain["request_spec"], plain["attempts"],
            plain["fault_reason"]) == (states.SCHEDULING, None, None, 0, None)
    assert api_rows["json-null-and-scalars"]["filter_properties"] == {"s": "%%", "n": None}
    assert api_rows["bulk-0000"]["state"] == states.BUILDING
    assert api_rows["bulk-0020"]["state"] == states.SCHEDULED


def _record_history(fast_paths):
    """Three groups' syncs recorded at two times, the first pruned by the second: the
    history rows as the database holds them, by group name."""
    from datetime import datetime, timedelta

    from scheduler.db.models import scaling_group_events, scaling_group_recommendations, scaling_groups
    from scheduler.db.scaling_syncs import SyncRecord

    spec = {"min": 1, "max": 10, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}
    template = {"flavor_name": "m1.tiny"}
    at = datetime(2026, 12, 1, 12, 0, 0)
    with _database(fast_paths) as database:
        groups = [database.create_scaling_group(f"g-{n}", f"g{n}", spec, template, 2) for n in range(3)]
        first = [SyncRecord(g["uuid"], 0, {"desired": 2 + n}, [2, 2 + n],
                            (n, f"{AWKWARD} #{n}") if n else None) for n, g in enumerate(groups)]
        assert database.record_scaling_syncs(at, first) == {g["uuid"] for g in groups}
        later = at + timedelta(seconds=30)
        second = [SyncRecord(g["uuid"], 1, {"desired": 3}, [3], (1, None), None,
                             at + timedelta(seconds=1) if n == 2 else None) for n, g in enumerate(groups)]
        assert database.record_scaling_syncs(later, second) == {g["uuid"] for g in groups}
        history = {}
        with database.engine.connect() as connection:
            for table, columns in ((scaling_group_recommendations, ("recorded_at", "replicas")),
                                   (scaling_group_events, ("recorded_at", "change", "reason"))):
                rows = connection.execute(
                    sa.select(scaling_groups.c.name, *(table.c[c] for c in columns))
                    .join(scaling_groups, scaling_groups.c.id == table.c.group_id)
                    .order_by(scaling_groups.c.name, table.c.id)).all()
                history[table.name] = [tuple(row) for row in rows]
    return history


def test_scaling_history_is_recorded_and_pruned_the_same_with_the_fast_paths_on_and_off():
    fast = _record_history(True)
    assert fast == _record_history(False)
    from datetime import datetime

    at, later = datetime(2026, 12, 1, 12, 0, 0), datetime(2026, 12, 1, 12, 0, 30)
    assert fast["scaling_group_recommendations"] == [
        ("g0", at, 2), ("g0", at, 2), ("g0", later, 3),
        ("g1", at, 2), ("g1", at, 3), ("g1", later, 3),
        ("g2", later, 3),  # its first sync's pruned
    ]
    assert fast["scaling_group_events"] == [
        ("g0", later, 1, None),
        ("g1", at, 1, f"{AWKWARD} #1"), ("g1", later, 1, None),
        ("g2", at, 2, f"{AWKWARD} #2"), ("g2", later, 1, None),  # events are kept an hour
    ]


PRINTABLE = AWKWARD.replace("\t", "")  # a member's name holds no control character


def _member_uuid(n):
    return f"00000000-0000-4000-8000-{n:012d}"


def _read_members(fast_paths):
    """Two groups' members, written as the controller and the scheduler write them,
    read back as a sync reads them."""
    from scheduler.scaling import members as group_members

    spec = {"min": 1, "max": 10, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}
    with _database(fast_paths) as database:
        groups = [database.create_scaling_group(f"m-{n}", f"m{n}", spec, {"flavor_name": "m1.tiny"}, 2)
                  for n in range(2)]
        rows = []
        for n, (state, launched) in enumerate([(states.ACTIVE, "2026-11-30T12:00:00.1Z"),
                                                (states.ACTIVE, "2026-11-30T12:00:00.123456Z"),
                                                (states.BUILDING, None), (states.DELETED, None),
                                                (states.ERROR, None), (states.SCHEDULING, None)]):
            group = groups[n % 2]
            row = group_members.member_row(group, _member_uuid(n), f"{PRINTABLE} {n}",
                                           {f["name"]: f for f in database.list_flavors()})
            row.update(state=state, launched_at=launched, host=None if launched is None else f"h{n}",
                       scaling_group_uuid=group["uuid"], created_at="2026-11-30T11:00:00Z")
            rows.append(row)
        database.create_instances(rows)
        found = database.read_scaling_syncs([g["uuid"] for g in groups] + ["no-such-group"])
    return {uuid: value["members"] for uuid, value in found.items()}


def test_scaling_members_are_read_the_same_with_the_fast_paths_on_and_off():
    from datetime import datetime

    fast = _read_members(True)
    assert fast == _read_members(False)
    assert fast["no-such-group"] == []
    first, second = (fast[f"m-{n}"] for n in range(2))
    assert [m["uuid"] for m in first] == [_member_uuid(n) for n in (0, 2, 4)]  # created together: by id
    assert [m["uuid"] for m in second] == [_member_uuid(n) for n in (1, 5)]  # DELETED left out
    assert first[0]["launched_at"] == datetime(2026, 11, 30, 12, 0, 0, 100000)
    assert second[0]["launched_at"] == datetime(2026, 11, 30, 12, 0, 0, 123456)
    assert first[1]["launched_at"] is None and isinstance(first[1]["updated_at"], datetime)
    assert first[0]["display_name"] == f"{PRINTABLE} 0"


#: Samples whose values JSON must carry exactly: a tenth, a tiny and a huge one, a whole one.
SAMPLES = {"cpu": 0.1, "memory": 2048.0, "rps": 1e-7, "queue": 123456789.123, "big": 1.7976931348623157e308}


def _read_samples(fast_paths):
    """Samples of three instances, one of them stale, read as a sync reads them."""
    from datetime import timedelta

    with _database(fast_paths) as database:
        database.create_instances([{"uuid": _member_uuid(n), "state": states.ACTIVE} for n in range(3)])
        now = database.now()
        rows = [{"instance_uuid": _member_uuid(n), "name": name, "value": value, "source": "pushed",
                 "sampled_at": now - timedelta(seconds=600 if n == 2 else 1)}
                for n in range(3) for name, value in SAMPLES.items()]
        rows.append({"instance_uuid": _member_uuid(1), "name": "fresh-only", "value": -3.5,
                     "source": "pushed"})
        database.save_instance_metrics(rows)
        since = now - timedelta(seconds=60)
        asked = [_member_uuid(n) for n in range(4)] + [_member_uuid(0)]  # one unknown, one twice
        return database.latest_instance_metrics(asked, since), database.latest_instance_metrics([], since)


def test_members_samples_are_read_the_same_with_the_fast_paths_on_and_off():
    fast = _read_samples(True)
    assert fast == _read_samples(False)
    samples, none = fast
    # The third instance's samples are stale, the fourth has none: both left out.
    assert samples == {_member_uuid(0): SAMPLES, _member_uuid(1): {**SAMPLES, "fresh-only": -3.5}}
    assert none == {}


def _node_record(i, **changes):
    record = {"host": f"node-{i:05d}", "nodename": AWKWARD if i == 0 else f"node-{i:05d}",
              "hypervisor_type": "kvm", "memory_mb": 262144, "memory_mb_used": 1024 * i,
              "free_ram_mb": 262144 - 1024 * i, "local_gb": 4000, "local_gb_used": 0.5 * i,
              "free_disk_gb": 4000 - 0.5 * i, "vcpus": 64, "vcpus_used": 0.1 + 0.2 if i == 1 else i / 3,
              "running_vms": i % 5, "reported_at": "2026-12-05T12:00:00.123456Z",
              "stats": {"num_instances": i % 5, "note": AWKWARD, "ratio": -0.0},
              "cpu_arch": "x86_64", "supported_instances": [["x86_64", "kvm", "hvm"]]}
    record.update(changes)
    return record


def _save_nodes_and_read(fast_paths, taken):
    """Hosts' reports saved twice (the second time some changed, one new, more rows than one
    statement takes), services beating and disabled: the rows as the database holds them."""
    with _database(fast_paths) as database:
        database.save_compute_nodes([_node_record(i) for i in range(1500)])
        database.save_compute_nodes(
            [_node_record(i, free_ram_mb=-512, vcpus_used=64.5, stats={"moved": True})
             for i in range(0, 1500, 7)] + [_node_record(9999, hypervisor_type=None, reported_at=None)])
        database.service_heartbeat("node-00001", "berth-compute", "compute", at="2026-12-05T12:00:00Z",
                                   version="1.2.3")
        database.service_heartbeat("node-00001", "berth-compute", "compute", at="2026-12-05T12:00:10Z",
                                   version="1.2.4")
        database.set_service_disabled("node-00001", "berth-compute", "compute", True, reason=AWKWARD)
        assert bool(taken) is fast_paths
        nodes = {row["host"]: {key: value for key, value in row.items() if key not in ("id", "updated_at")}
                 for row in database.list_compute_nodes()}
        services = [{key: value for key, value in row.items() if key not in ("id", "created_at")}
                    for row in database.list_services()]
    return nodes, services


def test_hosts_reports_and_services_are_saved_the_same_with_the_fast_paths_on_and_off(monkeypatch):
    taken = []
    real = fastpaths.upsert_psycopg2

    def spy(connection, table, rows, keys):
        taken.append((table.name, len(rows)))
        return real(connection, table, rows, keys)

    monkeypatch.setattr(fastpaths, "upsert_psycopg2", spy)
    fast = _save_nodes_and_read(True, taken)
    assert ("compute_nodes", 1500) in taken and ("services", 1) in taken
    taken.clear()
    portable = _save_nodes_and_read(False, taken)
    assert fast == portable
    nodes, services = fast
    assert len(nodes) == 1501
    assert nodes["node-00000"]["nodename"] == AWKWARD
    assert nodes["node-00007"]["free_ram_mb"] == -512 and nodes["node-00007"]["vcpus_used"] == 64.5
    assert nodes["node-00007"]["stats"]["moved"] is True
    assert nodes["node-00001"]["vcpus_used"] == 0.1 + 0.2
    assert nodes["node-00002"]["stats"]["note"] == AWKWARD
    assert nodes["node-09999"]["hypervisor_type"] is None
    assert [(s["host"], s["version"], s["disabled"], s["disabled_reason"]) for s in services] == [
        ("node-00001", "1.2.4", True, AWKWARD)]
