"""The database layer against a real PostgreSQL.

Needs the server at 127.0.0.1:5432 (user postgres, trust authentication, a
database named ``test``); BERTH_TEST_PG_HOST / BERTH_TEST_PG_PORT /
BERTH_TEST_PG_USER point elsewhere. Each run works in a temporary database of
its own and drops it at the end. An unreachable server fails the tests: it
does not skip them.
"""

import os
import threading
import uuid

import psycopg2
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from scheduler import states
from scheduler.db import api as db_api
from scheduler.db import models, schema

pytestmark = pytest.mark.functional

HOST = os.environ.get("BERTH_TEST_PG_HOST", "127.0.0.1")
PORT = int(os.environ.get("BERTH_TEST_PG_PORT", "5432"))
USER = os.environ.get("BERTH_TEST_PG_USER", "postgres")


def _admin_connection():
    try:
        connection = psycopg2.connect(host=HOST, port=PORT, user=USER, dbname="test", connect_timeout=5)
    except psycopg2.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is unreachable at {HOST}:{PORT} (user {USER}, database 'test'): "
            f"{str(exc).strip()}. The functional tests need a running server.",
            pytrace=False,
        )
    connection.autocommit = True
    return connection


@pytest.fixture(scope="module")
def pg_url():
    name = f"berth_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_connection()
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg2://{USER}@{HOST}:{PORT}/{name}"
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="module")
def database(pg_url):
    database = db_api.Database(pg_url, max_retries=3, retry_interval=0.2)
    yield database
    database.dispose()


@pytest.fixture
def clean(database):
    database.sync()
    yield database
    with database.engine.begin() as connection:
        for table in reversed(models.Base.metadata.sorted_tables):
            connection.execute(table.delete())


def _in_threads(count, target):
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def run(index):
        barrier.wait()
        try:
            results[index] = target(index)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    return results


def test_concurrent_sync_on_a_new_database(pg_url, database):
    assert database.version() is None
    databases = [db_api.Database(pg_url, max_retries=0) for _ in range(4)]
    try:
        results = _in_threads(len(databases), lambda i: databases[i].sync())
    finally:
        for each in databases:
            each.dispose()
    assert results == [schema.head()] * len(databases)
    assert database.version() == schema.head()
    assert database.sync() == schema.head()  # and once more: a no-op
    tables = set(sa.inspect(database.engine).get_table_names())
    assert tables == set(models.Base.metadata.tables) | {"alembic_version"}


def test_migrations_create_exactly_the_models(database):
    database.sync()
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, models.Base.metadata) == []


def test_new_instances_keep_every_value_as_given(clean):
    awkward = "50% off, %s and %(name)s, 'quoted' \\ back, \u00e9t\u00e9 \u2603"
    record = {
        "uuid": "awkward", "project_id": awkward, "host": "h1", "node": "h1", "state": states.ERROR,
        "flavor_name": awkward, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 1, "vcpus": 2,
        "request_spec": {"name": awkward, "nested": [1, None, {"x": 1.5}], "empty": {}},
        "filter_properties": None, "attempts": 3, "fault_reason": awkward, "fault_details": "",
        "created_at": "2024-01-01T00:00:00.25Z", "scheduled_at": "2024-01-01T00:00:01Z",
    }
    assert clean.create_instances([record, {"uuid": "plain"}]) == ["awkward", "plain"]
    row = clean.get_instance("awkward")
    assert {key: row[key] for key in record} == dict(
        record, created_at="2024-01-01T00:00:00.250000Z", scheduled_at="2024-01-01T00:00:01.000000Z")
    assert row["updated_at"] == row["created_at"]
    plain = clean.get_instance("plain")
    assert (plain["state"], plain["host"], plain["request_spec"], plain["attempts"]) == (
        states.SCHEDULING, None, None, 0)


def test_instances(clean):
    db = clean
    records = [
        {"uuid": "u1", "memory_mb": 512, "vcpus": 1, "request_spec": {"a": [1, 2]}, "host": "h1"},
        {"uuid": "u2", "state": states.DELETED},
    ]
    assert db.create_instances(records) == ["u1", "u2"]
    assert db.create_instances(records + [{"uuid": "u3"}]) == ["u3"]
    row = db.get_instance("u1")
    assert row["request_spec"] == {"a": [1, 2]}
    assert row["created_at"].endswith("Z")

    row = db.update_instance(
        "u1",
        {"state": states.SCHEDULED, "scheduled_at": "2024-01-01T00:00:00.25Z"},
        expected_states=[states.SCHEDULING],
    )
    assert row["state"] == states.SCHEDULED
    assert row["scheduled_at"] == "2024-01-01T00:00:00.250000Z"
    assert db.update_instance("u1", {"state": states.ERROR}, [states.SCHEDULING]) is None
    db.update_instances([("u1", {"attempts": 2}), ("u3", {"host": "h1"}), ("x", {})])
    assert db.get_instance("u1")["attempts"] == 2 and db.get_instance("u3")["host"] == "h1"
    assert db.get_instance("x") is None
    db.update_instances([(u, {"node": "n1"}) for u in ("u1", "u2", "u3", "x")])  # one executemany
    assert {i["uuid"]: i["node"] for i in db.list_instances(include_deleted=True)} == {
        "u1": "n1", "u2": "n1", "u3": "n1"}

    assert [r["uuid"] for r in db.list_instances()] == ["u3", "u1"]
    assert [r["uuid"] for r in db.list_instances(include_deleted=True)] == ["u3", "u2", "u1"]
    assert [r["uuid"] for r in db.list_instances(host="h1", limit=1)] == ["u3"]
    assert [r["uuid"] for r in db.list_instances(states=[states.SCHEDULED])] == ["u1"]
    counts = db.count_instances_by_state()
    assert (counts[states.SCHEDULING], counts[states.SCHEDULED], counts[states.DELETED]) == (1, 1, 1)


def test_compare_and_set_has_one_winner(clean):
    clean.create_instances([{"uuid": "race"}])
    results = _in_threads(
        6,
        lambda i: clean.update_instance(
            "race", {"state": states.SCHEDULED, "host": f"h{i}"}, [states.SCHEDULING]
        ),
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert clean.get_instance("race")["host"] == winners[0]["host"]


def test_concurrent_creates_insert_each_instance_once(clean):
    uuids = [f"u{i}" for i in range(20)]
    results = _in_threads(4, lambda i: clean.create_instances([{"uuid": u} for u in uuids]))
    inserted = [u for result in results for u in result]
    assert sorted(inserted) == sorted(uuids)
    assert len(clean.list_instances()) == 20


def test_compute_nodes_upsert(clean):
    report = {
        "host": "h1",
        "memory_mb": 2048,
        "free_ram_mb": 1024,
        "free_disk_gb": 10.5,
        "vcpus_used": 0.5,
        "numa": {"cells": 1},
    }
    clean.save_compute_nodes([report, {"host": "h2", "memory_mb": 1}])
    clean.save_compute_nodes([dict(report, free_ram_mb=-512, free_disk_gb=-1.25, extra="x")])
    nodes = clean.list_compute_nodes()
    assert [n["host"] for n in nodes] == ["h1", "h2"]
    assert nodes[0]["free_ram_mb"] == -512
    assert nodes[0]["free_disk_gb"] == -1.25
    assert nodes[0]["vcpus_used"] == 0.5
    assert nodes[0]["stats"] == {"numa": {"cells": 1}, "extra": "x"}
    # Several schedulers saving at once still leave one row per host.
    _in_threads(4, lambda i: clean.save_compute_nodes([dict(report, running_vms=i)]))
    assert len(clean.list_compute_nodes()) == 2


def test_services(clean):
    clean.service_heartbeat("h1", "berth-compute-agent", "compute", at="2024-01-01T00:00:00Z")
    clean.service_heartbeat("h1", "berth-compute-agent", "compute")
    clean.service_heartbeat("s1", "berth-scheduler", "scheduler")
    services = clean.list_services(binary="berth-compute-agent")
    assert len(services) == 1
    assert services[0]["last_seen_at"] > "2024-01-01T00:00:00.000000Z"
    assert services[0]["disabled"] is False
    assert len(clean.list_services()) == 2


def test_hosts_held_by_another_transaction_are_skipped_not_waited_for(clean, pg_url):
    db = clean
    assert db.claim_hosts({"h1": 0, "h2": 0}) == ({"h1", "h2"}, set(), set())
    other = db_api.Database(pg_url, max_retries=0)
    try:
        with other.unit_of_work():
            assert other.claim_hosts({"h1": 1}) == ({"h1"}, set(), set())  # h1 locked until this ends
            assert db.claim_hosts({"h1": 1, "h2": 1, "h3": 0}) == ({"h2", "h3"}, set(), {"h1"})
        assert db.claim_hosts({"h1": 1}) == (set(), {"h1"}, set())  # the other one moved it on
    finally:
        other.dispose()
    assert db.host_generations(["h1", "h2", "h3"]) == {"h1": 2, "h2": 2, "h3": 1}


def test_instance_states_from_many_agents_in_one_statement(clean):
    db = clean
    db.create_instances([{"uuid": f"u{i}", "state": states.SCHEDULED, "host": f"h{i % 3}"} for i in range(9)])
    applied = db.set_instance_states(
        [(f"u{i}", f"h{i % 3}", {"state": states.ACTIVE}, [states.SCHEDULED, states.BUILDING])
         for i in range(8)]
        + [("u8", "h0", {"state": states.ACTIVE}, [states.SCHEDULED])]  # u8 is on h2
    )
    assert applied == [True] * 8 + [False]
    assert sorted(i["uuid"] for i in db.list_instances(states=[states.ACTIVE])) == [f"u{i}" for i in range(8)]
