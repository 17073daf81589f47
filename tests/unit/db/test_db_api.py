import logging
import os
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import exc as sa_exc

from scheduler import conf as berth_conf
from scheduler import states
from scheduler.db import api as db_api


def _instance(uuid, **values):
    record = {
        "uuid": uuid,
        "project_id": "p1",
        "flavor_name": "m1.small",
        "memory_mb": 512,
        "root_gb": 1,
        "ephemeral_gb": 0,
        "vcpus": 1,
        "request_spec": {"num_instances": 1, "image": {"id": "img"}},
        "filter_properties": {"retry": {"num_attempts": 1, "hosts": []}},
    }
    record.update(values)
    return record


def _is_iso_z(value):
    assert isinstance(value, str) and value.endswith("Z"), value
    datetime.fromisoformat(value[:-1] + "+00:00")
    return True


# -- instances -----------------------------------------------------------


def test_create_and_get_instance(database):
    assert database.create_instances([_instance("u1")]) == ["u1"]
    row = database.get_instance("u1")
    assert row["uuid"] == "u1"
    assert row["state"] == states.SCHEDULING
    assert row["attempts"] == 0
    assert row["request_spec"] == {"num_instances": 1, "image": {"id": "img"}}
    assert row["filter_properties"]["retry"]["num_attempts"] == 1
    assert row["host"] is None and row["fault_reason"] is None
    assert _is_iso_z(row["created_at"]) and _is_iso_z(row["updated_at"])
    assert row["scheduled_at"] is None
    assert database.get_instance("missing") is None


def test_create_is_idempotent(database):
    assert database.create_instances([_instance("u1"), _instance("u2")]) == ["u1", "u2"]
    database.update_instance("u1", {"state": states.SCHEDULED, "host": "h1"})
    # Redelivered request, with one new instance and a duplicate inside the batch.
    inserted = database.create_instances([_instance("u1"), _instance("u3"), _instance("u3", memory_mb=1)])
    assert inserted == ["u3"]
    assert database.get_instance("u1")["state"] == states.SCHEDULED
    assert database.get_instance("u1")["host"] == "h1"
    assert database.get_instance("u3")["memory_mb"] == 512
    assert database.create_instances([]) == []


def test_create_rejects_bad_records(database):
    with pytest.raises(ValueError, match="uuid"):
        database.create_instances([{"memory_mb": 1}])
    with pytest.raises(ValueError, match="not instance columns: bogus"):
        database.create_instances([_instance("u1", bogus=1)])
    with pytest.raises(ValueError, match="unknown instance state"):
        database.create_instances([_instance("u1", state="RUNNING")])
    assert database.list_instances() == []


def test_compare_and_set(database):
    database.create_instances([_instance("u1")])
    before = database.get_instance("u1")
    row = database.update_instance(
        "u1",
        {"state": states.SCHEDULED, "host": "h1", "node": "h1", "scheduled_at": "2024-05-06T07:08:09Z"},
        expected_states=[states.SCHEDULING],
    )
    assert row["state"] == states.SCHEDULED and row["host"] == "h1"
    assert row["scheduled_at"] == "2024-05-06T07:08:09.000000Z"
    assert row["updated_at"] >= before["updated_at"]
    # Wrong state: refused, nothing changes.
    assert database.update_instance("u1", {"state": states.ERROR}, expected_states=states.SCHEDULING) is None
    assert database.get_instance("u1")["state"] == states.SCHEDULED
    assert database.update_instance("u1", {"host": "h2"}, expected_states=[]) is None
    # No expectation: unconditional.
    assert database.update_instance("u1", {"attempts": 2})["attempts"] == 2
    assert database.update_instance("missing", {"attempts": 2}) is None


def test_update_rejects_bad_values(database):
    database.create_instances([_instance("u1")])
    with pytest.raises(ValueError):
        database.update_instance("u1", {"uuid": "other"})
    with pytest.raises(ValueError):
        database.update_instance("u1", {"state": "NOPE"})
    with pytest.raises(ValueError):
        database.update_instance("u1", {"launched_at": "yesterday"})


def test_update_instances_batch(database):
    database.create_instances([_instance(f"u{i}") for i in range(4)])
    database.update_instances(
        [
            ("u0", {"state": states.SCHEDULED, "host": "h1"}),
            ("u1", {"state": states.SCHEDULED, "host": "h2"}, [states.SCHEDULING]),
            ("u2", {"state": states.ACTIVE}, [states.BUILDING]),  # wrong state: skipped
            ("missing", {"state": states.ERROR}),
        ]
    )
    assert database.get_instance("u0")["host"] == "h1"
    assert database.get_instance("u1")["host"] == "h2"
    assert database.get_instance("u2")["state"] == states.SCHEDULING
    assert database.get_instance("missing") is None
    database.update_instances([])


def test_set_instance_states_applies_each_update_only_from_its_host_and_states(database):
    database.create_instances([_instance(f"u{i}", state=states.SCHEDULED, host="h1") for i in range(4)])
    applied = database.set_instance_states([
        ("u0", "h1", {"state": states.BUILDING}, [states.SCHEDULED]),
        ("u1", "h1", {"state": states.BUILDING}, [states.SCHEDULED]),
        ("u2", "h2", {"state": states.BUILDING}, [states.SCHEDULED]),  # not its host
        ("missing", "h1", {"state": states.BUILDING}, [states.SCHEDULED]),
        ("u0", "h1", {"state": states.ACTIVE}, [states.SCHEDULED, states.BUILDING]),
        ("u1", "h1", {"state": states.BUILDING}, [states.SCHEDULED]),  # not again
        ("u3", "h1", {"state": states.ERROR, "fault_reason": "disk full"}, [states.SCHEDULED]),
    ])
    assert applied == [True, True, False, False, True, False, True]
    found = database.get_instances(["u0", "u1", "u2", "u3", "missing"])
    assert {u: i["state"] for u, i in found.items()} == {
        "u0": states.ACTIVE, "u1": states.BUILDING, "u2": states.SCHEDULED, "u3": states.ERROR}
    assert found["u3"]["fault_reason"] == "disk full"
    assert database.set_instance_states([]) == []


def test_update_instances_is_one_transaction(database):
    database.create_instances([_instance("u0"), _instance("u1")])
    with pytest.raises(sa_exc.IntegrityError):
        database.update_instances(
            [("u0", {"host": "h1"}), ("u1", {"memory_mb": None})]  # NOT NULL violated
        )
    assert database.get_instance("u0")["host"] is None


def test_list_instances_filters(database):
    base = datetime(2024, 1, 1)
    database.create_instances(
        [
            _instance("old", host="h1", created_at=base),
            _instance("mid", host="h2", created_at=base + timedelta(minutes=1)),
            _instance("new", host="h1", created_at=base + timedelta(minutes=2)),
            _instance("gone", host="h1", state=states.DELETED, created_at=base),
        ]
    )
    database.update_instance("mid", {"state": states.ACTIVE})
    uuids = lambda rows: [r["uuid"] for r in rows]  # noqa: E731
    assert uuids(database.list_instances()) == ["new", "mid", "old"]
    # Same created_at: the newer id first.
    assert uuids(database.list_instances(include_deleted=True)) == ["new", "mid", "gone", "old"]
    assert uuids(database.list_instances(host="h1")) == ["new", "old"]
    assert uuids(database.list_instances(states=[states.ACTIVE])) == ["mid"]
    assert uuids(database.list_instances(states=states.DELETED)) == ["gone"]
    assert uuids(database.list_instances(limit=2)) == ["new", "mid"]
    assert database.list_instances(host="nowhere") == []
    assert database.list_instances()[0]["created_at"] == "2024-01-01T00:02:00.000000Z"
    # "mid" was updated just now; the others not since they were created.
    assert uuids(database.list_instances(updated_before=base + timedelta(minutes=5))) == ["new", "old"]


def test_count_instances_by_state(database):
    database.create_instances([_instance("a"), _instance("b"), _instance("c", state="ERROR")])
    counts = database.count_instances_by_state()
    assert counts[states.SCHEDULING] == 2
    assert counts[states.ERROR] == 1
    assert counts[states.ACTIVE] == 0
    assert set(counts) == set(states.ALL)


def test_instances_to_reconcile_are_those_held_on_the_hosts_and_those_named(database):
    database.create_instances([
        _instance("on-h1", host="h1", state="ACTIVE"),
        _instance("gone-h1", host="h1", state="DELETED"),
        _instance("named-h1", host="h1", state="ERROR"),
        _instance("named-h2", host="h2", state="ACTIVE", move_host="h1"),
        _instance("other-h2", host="h2", state="ACTIVE"),
    ])
    found = database.instances_to_reconcile(["h1"], ["named-h1", "named-h2", "on-h1", "unknown"])
    assert sorted(found) == ["named-h1", "named-h2", "on-h1"]
    assert {k: v for k, v in found["named-h2"].items() if k != "updated_at"} == {
        "uuid": "named-h2", "state": "ACTIVE", "host": "h2", "move_host": "h1"}
    assert isinstance(found["on-h1"]["updated_at"], datetime)
    assert found["on-h1"]["updated_at"].tzinfo is None


def test_timestamps_accept_aware_datetimes_and_epochs(database):
    cet = timezone(timedelta(hours=1))
    database.create_instances(
        [_instance("a", created_at=datetime(2024, 1, 1, 1, 0, tzinfo=cet)), _instance("b")]
    )
    assert database.get_instance("a")["created_at"] == "2024-01-01T00:00:00.000000Z"
    row = database.update_instance("b", {"launched_at": 0})
    assert row["launched_at"] == "1970-01-01T00:00:00.000000Z"


# -- compute nodes and services -----------------------------------------


def _report(host, **values):
    report = {
        "host": host,
        "nodename": host,
        "hypervisor_type": "fake",
        "memory_mb": 4096,
        "memory_mb_used": 512,
        "free_ram_mb": 3584,
        "local_gb": 100,
        "local_gb_used": 10.5,
        "free_disk_gb": 89.5,
        "vcpus": 8,
        "vcpus_used": 1.5,
        "running_vms": 1,
        "reported_at": "2024-03-04T05:06:07.123456Z",
    }
    report.update(values)
    return report


def test_save_compute_nodes_upserts_by_host(database):
    database.save_compute_nodes([_report("h1"), _report("h2")])
    database.save_compute_nodes([_report("h1", memory_mb_used=8192, free_ram_mb=-4096, free_disk_gb=-2.5)])
    nodes = database.list_compute_nodes()
    assert [n["host"] for n in nodes] == ["h1", "h2"]
    h1 = nodes[0]
    assert h1["free_ram_mb"] == -4096
    assert h1["free_disk_gb"] == -2.5
    assert h1["memory_mb_used"] == 8192
    assert h1["vcpus_used"] == 1.5
    assert h1["reported_at"] == "2024-03-04T05:06:07.123456Z"
    assert _is_iso_z(h1["updated_at"])


def test_save_compute_nodes_extra_keys_go_to_stats(database):
    database.save_compute_nodes(
        [_report("h1", numa_topology={"cells": 2}, pci_devices=[], stats={"io_ops": 3})]
    )
    (node,) = database.list_compute_nodes()
    assert node["stats"] == {"numa_topology": {"cells": 2}, "pci_devices": [], "io_ops": 3}
    assert "numa_topology" not in node


def test_save_compute_nodes_last_report_in_a_batch_wins(database):
    database.save_compute_nodes([_report("h1", running_vms=1), _report("h1", running_vms=2)])
    (node,) = database.list_compute_nodes()
    assert node["running_vms"] == 2
    database.save_compute_nodes([])
    with pytest.raises(ValueError):
        database.save_compute_nodes([{"memory_mb": 1}])


def test_service_heartbeat(database):
    database.service_heartbeat("s1", "berth-scheduler", "scheduler")
    database.service_heartbeat("h1", "berth-compute-agent", "compute", at="2024-01-01T00:00:00Z")
    database.service_heartbeat("h1", "berth-compute-agent", "compute", at="2024-01-01T00:01:00Z")
    services = database.list_services()
    assert [(s["host"], s["binary"]) for s in services] == [
        ("h1", "berth-compute-agent"),
        ("s1", "berth-scheduler"),
    ]
    agent = services[0]
    assert agent["last_seen_at"] == "2024-01-01T00:01:00.000000Z"
    assert agent["disabled"] is False and agent["disabled_reason"] is None
    assert _is_iso_z(agent["created_at"])
    assert [s["host"] for s in database.list_services(binary="berth-scheduler")] == ["s1"]


# -- construction, retries ----------------------------------------------


def test_from_conf_creates_the_sqlite_directory(tmp_path):
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("state_path", str(tmp_path / "deep" / "state"))
    database = db_api.Database.from_conf(conf)
    try:
        assert database.url.database == str(tmp_path / "deep" / "state" / "berth.sqlite")
        assert os.path.isdir(tmp_path / "deep" / "state")
        assert database.max_retries == 10 and database.retry_interval == 1.0
        assert database.sync() == "0014"
    finally:
        database.dispose()


def test_in_memory_sqlite_works():
    database = db_api.Database("sqlite://")
    database.sync()
    assert database.create_instances([_instance("u1")]) == ["u1"]
    assert database.get_instance("u1")["uuid"] == "u1"
    database.dispose()


@pytest.mark.parametrize("url", ["not a url", "nosuchdialect://x/y"])
def test_bad_url_is_a_value_error(url):
    with pytest.raises(ValueError, match="invalid database URL"):
        db_api.Database(url)



def _locked():
    return sa_exc.OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))


def test_transient_errors_are_retried(database, monkeypatch, caplog):
    calls = []
    real = db_api.Database.get_instance.__wrapped__

    def flaky(self, uuid):
        calls.append(uuid)
        if len(calls) < 3:
            raise _locked()
        return real(self, uuid)

    monkeypatch.setattr(db_api.Database, "get_instance", db_api._retry(flaky))
    with caplog.at_level(logging.WARNING, "scheduler.db.engine"):
        assert database.get_instance("u1") is None
    assert len(calls) == 3
    # A database away fails every query: one line says so, not one per attempt.
    assert [r.getMessage() for r in caplog.records if "retry" in r.getMessage()] == [
        f"Database {database.masked_url}: flaky failed (OperationalError: database is locked); "
        "retry 1 of 2 in 0.0s"]


def test_retries_run_out(database, monkeypatch):
    def locked(self):
        raise _locked()

    monkeypatch.setattr(db_api.Database, "list_compute_nodes", db_api._retry(locked))
    with pytest.raises(db_api.DatabaseUnavailable, match="after 3 attempt"):
        database.list_compute_nodes()


def test_permanent_errors_are_not_retried(database, monkeypatch):
    calls = []

    def broken(self):
        calls.append(1)
        raise sa_exc.OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))

    monkeypatch.setattr(db_api.Database, "list_services", db_api._retry(broken))
    with pytest.raises(sa_exc.OperationalError):
        database.list_services()
    assert calls == [1]


def test_unreachable_server_is_retried_without_leaking_the_password(caplog):
    # Nothing listens on port 1: connection refused at once.
    database = db_api.Database(
        "postgresql://berth:s3cret@127.0.0.1:1/berth", max_retries=1, retry_interval=0.0
    )
    with caplog.at_level(logging.WARNING, "scheduler.db.engine"):
        with pytest.raises(db_api.DatabaseUnavailable) as raised:
            database.version()
    assert "s3cret" not in str(raised.value)
    assert "***" in str(raised.value)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "s3cret" not in warnings[0] and "***" in warnings[0]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5)),
        ("2024-01-02T04:04:05+01:00", datetime(2024, 1, 2, 3, 4, 5)),
        ("2024-01-02T03:04:05.5", datetime(2024, 1, 2, 3, 4, 5, 500000)),
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), datetime(2024, 1, 2, 3, 4, 5)),
        (None, None),
    ],
)
def test_to_db_time(value, expected):
    assert db_api.to_db_time(value) == expected
