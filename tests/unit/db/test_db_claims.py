"""Units of work and compare-and-set claims on hosts."""

import datetime

import pytest
from sqlalchemy import exc as sa_exc

from scheduler.db import api as db_api

U1 = "11111111-1111-4111-8111-111111111111"
U2 = "22222222-2222-4222-8222-222222222222"


def test_a_claim_succeeds_only_on_the_generation_last_seen(database):
    assert database.host_generations(["h1"]) == {"h1": 0}
    assert database.claim_hosts({"h1": 0}) == ({"h1"}, set(), set())
    # Someone placed on h1 since generation 0:
    assert database.claim_hosts({"h1": 0}) == (set(), {"h1"}, set())
    assert database.host_generations(["h1", "h2"]) == {"h1": 1, "h2": 0}
    assert database.claim_hosts({"h1": 1}) == ({"h1"}, set(), set())
    assert database.host_generations(["h1"]) == {"h1": 2}


def test_a_unit_of_work_commits_everything_at_the_end(database):
    with database.unit_of_work():
        database.create_instances([{"uuid": U1, "state": "SCHEDULING"}])
        assert database.claim_hosts({"h1": 0})[0] == {"h1"}
    assert database.get_instance(U1)["state"] == "SCHEDULING"
    assert database.host_generations(["h1"]) == {"h1": 1}


def test_a_unit_of_work_that_raises_leaves_nothing(database):
    with pytest.raises(RuntimeError), database.unit_of_work():
        database.create_instances([{"uuid": U1, "state": "SCHEDULING"}])
        database.claim_hosts({"h1": 0})
        raise RuntimeError("the broker went away")
    assert database.get_instance(U1) is None
    assert database.host_generations(["h1"]) == {"h1": 0}


def test_a_unit_of_work_that_runs_no_statement_needs_no_database():
    # A batch of agents' reports alone: taken while the database is away, and costing it nothing.
    away = db_api.Database("postgresql+psycopg2://berth@127.0.0.1:1/berth", max_retries=0)
    try:
        with away.unit_of_work():
            pass
        with pytest.raises(sa_exc.OperationalError, match="Connection refused"), away.unit_of_work():
            away.get_instance(U1)
    finally:
        away.dispose()


def test_a_failed_step_undoes_only_itself(database):
    with database.unit_of_work():
        with database.step():
            database.create_instances([{"uuid": U1, "state": "SCHEDULING"}])
        with pytest.raises(ValueError), database.step():
            database.create_instances([{"uuid": U2, "state": "SCHEDULING"}])
            raise ValueError("bad message")
    assert database.get_instance(U1) is not None
    assert database.get_instance(U2) is None


def test_instances_placed_on_a_host_and_not_claimed_yet_are_found(database):
    database.create_instances([{"uuid": U1, "state": "SCHEDULED", "host": "h1", "memory_mb": 512},
                         {"uuid": U2, "state": "BUILDING", "host": "h1", "memory_mb": 512}])
    assert [i["uuid"] for i in database.instances_placed_since(hosts=["h1"])] == [U1]


def test_an_instance_moving_is_found_on_its_destination_at_its_new_size(database):
    database.create_instances([
        {"uuid": U1, "state": "MIGRATING", "host": "h1", "move_host": "h2", "memory_mb": 2048},
        {"uuid": U2, "state": "SCHEDULED", "host": "h2", "memory_mb": 512}])
    found = {(i["uuid"], i["host"], i["memory_mb"]) for i in database.instances_placed_since(hosts=["h2"])}
    assert found == {(U1, "h2", 2048), (U2, "h2", 512)}
    assert database.instances_placed_since(hosts=["h1"]) == []  # its source: its agent reports it
    assert {i["host"] for i in database.instances_placed_since()} == {"h2"}


def test_instances_claimed_recently_are_found_too(database):
    U3, U4 = "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
    noon = datetime.datetime(2026, 11, 30, 12, 0, 0)
    later, earlier = noon + datetime.timedelta(seconds=5), noon - datetime.timedelta(seconds=5)
    database.create_instances([
        {"uuid": U1, "state": "ACTIVE", "host": "h1", "updated_at": later},
        {"uuid": U2, "state": "BUILDING", "host": "h1", "updated_at": later},
        {"uuid": U3, "state": "ACTIVE", "host": "h1", "updated_at": earlier},  # long settled
        {"uuid": U4, "state": "ACTIVE", "host": "h2", "updated_at": later},
        {"uuid": "55555555-5555-4555-8555-555555555555", "state": "DELETED", "host": "h1",
         "updated_at": later},
    ])
    found = database.instances_placed_since(hosts=["h1", "h2"], since=noon)
    assert sorted(i["uuid"] for i in found) == [U1, U2, U4]
    assert database.instances_placed_since(hosts=["h1", "h2"]) == []


def test_hosts_are_claimed_together_each_on_its_own_generation(database):
    assert database.claim_hosts({"h1": 0}) == ({"h1"}, set(), set())
    claimed, conflicts, held = database.claim_hosts({"h1": 0, "h2": 0, "h3": 5})
    # h1 moved on (we hold generation 1 now); h3 has no row, yet we expected 5:
    # a row another transaction would hold is skipped, and looks the same.
    assert (claimed, conflicts, held) == ({"h2"}, {"h1"}, {"h3"})
    assert database.host_generations(["h1", "h2", "h3"]) == {"h1": 1, "h2": 1, "h3": 0}
    assert database.claim_hosts({}) == (set(), set(), set())


def test_instances_placed_on_several_hosts_are_read_at_once(database):
    U3 = "33333333-3333-4333-8333-333333333333"
    database.create_instances([{"uuid": U1, "state": "SCHEDULED", "host": "h1"},
                               {"uuid": U2, "state": "SCHEDULED", "host": "h2"},
                               {"uuid": U3, "state": "SCHEDULED", "host": "h3"}])
    assert sorted(i["uuid"] for i in database.instances_placed_since(hosts=["h1", "h2", "h9"])) == [U1, U2]
    assert database.instances_placed_since(hosts=[]) == []
    assert len(database.instances_placed_since()) == 3
