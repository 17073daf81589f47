"""Two schedulers sharing a database never both fill the same room (generation claims)."""

import uuid as uuidlib

import pytest

from scheduler import rpc
from scheduler.service import assemble
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.scheduler.service_parts import transport_and_database


def report(host, ram):
    return {"host": host, "memory_mb": ram, "free_ram_mb": ram, "local_gb": 100, "free_disk_gb": 100,
            "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0}


def request(memory_mb):
    u = str(uuidlib.uuid4())
    return u, {"instance_uuids": [u], "num_instances": 1,
               "instance_type": {"memory_mb": memory_mb, "root_gb": 1, "vcpus": 1}}


class Recorder:
    def __init__(self):
        self.builds = []

    def run_instance(self, context, instance, request_spec, filter_properties):
        self.builds.append(instance["uuid"])

    def terminate_instance(self, context, instance_uuid):
        pass


@pytest.fixture
def two_schedulers(conf):
    transport, database = transport_and_database(conf)
    conf.set_override("ram_allocation_ratio", 1.0, "filter_scheduler")
    managers = [assemble(conf, transport, database) for _ in range(2)]
    for manager in managers:
        manager.manager.report_resources({}, "big", report("big", 8192))
        manager.manager.report_resources({}, "small", report("small", 6144))
    yield managers, database
    transport.cleanup()
    database.dispose()


def test_the_second_scheduler_sees_the_first_ones_claim_and_goes_elsewhere(two_schedulers):
    (first, second), database = two_schedulers
    u1, spec1 = request(6000)
    u2, spec2 = request(6000)
    first.manager.run_instance(rpc.Context({}), spec1, {})
    second.manager.run_instance(rpc.Context({}), spec2, {})  # its view of "big" is stale
    assert database.get_instance(u1)["host"] == "big"
    assert database.get_instance(u2)["host"] == "small"
    assert database.host_generations(["big", "small"]) == {"big": 1, "small": 1}
    # The second scheduler learned the first one's placement on "big".
    assert second.host_manager.get("big").free_ram_mb == 8192 - 6000


def test_a_conflict_alone_places_again_at_once_without_waiting(two_schedulers, monkeypatch):
    (first, second), database = two_schedulers
    waits = []
    monkeypatch.setattr(second.claims, "_sleep", waits.append)
    u1, spec1 = request(6000)
    u2, spec2 = request(6000)
    first.manager.run_instance(rpc.Context({}), spec1, {})
    second.manager.run_instance(rpc.Context({}), spec2, {})  # conflicts on "big": learns, places on "small"
    assert database.get_instance(u2)["host"] == "small"
    assert waits == []  # waiting is for hosts another worker holds right now, not for conflicts


def test_a_conflict_that_leaves_no_room_is_no_valid_host(two_schedulers):
    (first, second), database = two_schedulers
    for manager in (first, second):
        manager.manager.report_resources({}, "small", report("small", 100))
    u1, spec1 = request(6000)
    u2, spec2 = request(6000)
    first.manager.run_instance(rpc.Context({}), spec1, {})
    second.manager.run_instance(rpc.Context({}), spec2, {})
    assert database.get_instance(u1)["state"] == "SCHEDULED"
    record = database.get_instance(u2)
    assert record["state"] == "ERROR" and "RamFilter removed 2" in record["fault_reason"]


def test_builds_wait_for_the_commit_and_a_failed_batch_sends_none(conf, two_schedulers):
    (manager, _), database = two_schedulers
    agent = Recorder()
    manager.compute.run_instance = lambda ctxt, host, instance, *a: agent.run_instance(ctxt, instance, *a)
    u1, spec1 = request(1000)
    with pytest.raises(RuntimeError), UnitOfWork(database, manager.outbox, manager.undo):
        manager.manager.run_instance(rpc.Context({}), spec1, {})
        assert agent.builds == []  # held until the commit
        assert manager.host_manager.get("big").free_ram_mb == 8192 - 1000
        raise RuntimeError("the batch failed before committing")
    assert agent.builds == [] and database.get_instance(u1) is None
    assert manager.host_manager.get("big").free_ram_mb == 8192  # given back at once
    u2, spec2 = request(1000)
    with UnitOfWork(database, manager.outbox, manager.undo):
        manager.manager.run_instance(rpc.Context({}), spec2, {})
        assert agent.builds == []
    assert agent.builds == [u2] and database.get_instance(u2)["state"] == "SCHEDULED"


def test_a_redelivered_request_sends_the_build_again_but_places_nothing(two_schedulers):
    (manager, _), database = two_schedulers
    agent = Recorder()
    manager.compute.run_instance = lambda ctxt, host, instance, *a: agent.run_instance(ctxt, instance, *a)
    u1, spec = request(1000)
    manager.manager.run_instance(rpc.Context({}), spec, {})
    free = manager.host_manager.get("big").free_ram_mb
    manager.manager.run_instance(rpc.Context({}, redelivered=True), spec, {})
    assert agent.builds == [u1, u1]
    assert manager.host_manager.get("big").free_ram_mb == free
    assert database.host_generations(["big"]) == {"big": 1}


def test_a_request_whose_step_rolls_back_gives_its_room_back_at_once(conf, two_schedulers, monkeypatch):
    """Rows of a batch are written together; one that the database refuses fails the
    batch form, each request is run again alone, and the culprit's placement,
    undone with its step, leaves nothing consumed behind; an invalid request keeps
    the ERROR row that says why."""
    from sqlalchemy import exc as sa_exc

    (manager, _), database = two_schedulers
    create = database.create_instances

    def refuse_the_poison(records):
        if any(r.get("project_id") == "poison" for r in records):
            raise sa_exc.DataError("INSERT", {}, ValueError("the database refuses this row"))
        return create(records)

    monkeypatch.setattr(database, "create_instances", refuse_the_poison)
    poison_uuid, poison = request(6000)
    poison["instance_properties"] = {"project_id": "poison"}
    good = [request(1000) for _ in range(2)]
    bad_uuid, bad = request(1000)
    bad["instance_type"]["memory_mb"] = "lots"
    server = rpc.get_rpc_server(manager.compute._client.transport, rpc.Target("scheduler", server="s"),
                                [manager.manager], batch_size=8)
    batch = [(object(), (rpc.Context({}), "run_instance", {"request_spec": spec, "filter_properties": {}}))
             for spec in (good[0][1], poison, bad, good[1][1])]
    with UnitOfWork(database, manager.outbox, manager.undo) as work:  # as the server runs a batch
        outcomes = server._run(work, "run_instance", server.dispatcher.batch_form("run_instance"), batch)
    assert [type(exc).__name__ if exc else None for *_, exc in outcomes] == [
        None, "DataError", "InvalidRequest", None]
    assert database.get_instance(poison_uuid) is None
    # A refused request's ERROR row, written by its step, stays: the step did not fail.
    refused = database.get_instance(bad_uuid)
    assert refused["state"] == "ERROR" and "memory_mb: must be an integer" in refused["fault_reason"]
    placed = sum(1 for u, _ in good if database.get_instance(u)["state"] == "SCHEDULED")
    room = manager.host_manager.get("big").free_ram_mb + manager.host_manager.get("small").free_ram_mb
    assert (placed, room) == (2, 8192 + 6144 - 2000)


def test_an_instance_its_host_reported_already_is_not_counted_twice(two_schedulers):
    (first, second), database = two_schedulers
    u1, spec1 = request(6000)
    first.manager.run_instance(rpc.Context({}), spec1, {})
    assert database.get_instance(u1)["state"] == "SCHEDULED"  # the agent's update is still queued...
    claimed = dict(report("big", 8192), free_ram_mb=8192 - 6000, instance_uuids=[u1], running_vms=1)
    for manager in (first, second):  # ...but its report, listing the instance, arrived
        manager.manager.report_resources({}, "big", claimed)
        manager.manager.report_resources({}, "small", dict(report("small", 6144), free_ram_mb=1000))
    u2, spec2 = request(2000)
    second.manager.run_instance(rpc.Context({}), spec2, {})  # conflicts on "big" and learns u1
    assert database.get_instance(u2)["host"] == "big"
    assert second.host_manager.get("big").free_ram_mb == 8192 - 6000 - 2000
