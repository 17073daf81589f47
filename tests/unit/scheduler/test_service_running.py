import gc
import os
import signal
import threading
import weakref

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.db import api as db_api
from scheduler.db.api import Database
from scheduler.process import running
from scheduler.service import SchedulerService
from scheduler.transaction.outbox import Outbox
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.scheduler.manager_world import report
from tests.unit.scheduler.service_parts import transport_and_database


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


class Node:
    pass


class SignalledService:
    """Asks to be stopped as soon as it started; records what happened."""

    def __init__(self):
        self.events = []

    def start(self):
        self.events.append("start")
        os.kill(os.getpid(), signal.SIGTERM)

    def stop(self):
        self.events.append(("stop", gc.get_freeze_count() > 0, gc.get_threshold()[0]))


def test_a_service_runs_until_signalled_then_stops_with_start_up_objects_out_of_collections(restored_gc):
    service = SignalledService()
    running.run_until_signalled([service])
    assert service.events == ["start", ("stop", True, running.YOUNG_COLLECTION_EVERY)]


def test_cycles_made_after_start_up_are_still_collected(restored_gc):
    running.settle_garbage_collector()
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.collect()
    assert gone() is None


@pytest.fixture
def service(conf):
    """A SchedulerService on memory:// and SQLite, not started."""
    transport, database = transport_and_database(conf)
    yield SchedulerService(conf, transport, database)
    transport.cleanup()
    database.dispose()


def test_a_failing_periodic_task_keeps_none_of_the_others_from_running(conf, service, caplog):
    ran = []

    def broken():
        raise RuntimeError("saving reports is broken")

    service.save_reports = broken
    service.parts.build_expiry.expire = lambda: ran.append("build expiry")
    service._reload_aggregates = lambda: ran.append("aggregates reload")
    service.run_periodic_tasks()
    service.run_periodic_tasks()
    assert ran == ["build expiry", "aggregates reload"] * 2
    heartbeats = service.database.list_services()
    assert [(s["host"], s["binary"]) for s in heartbeats] == [(conf.host, "berth-scheduler")]
    assert caplog.text.count("Periodic task saving host reports failed") == 2


def test_one_report_the_database_refuses_leaves_the_others_saved(service, caplog):
    for host in ("h1", "h2", "h3"):
        service.parts.reports.put(host, HostReport.from_wire(report(host, 1024), host))
    refused = service.parts.reports.drain()
    refused["h2"] = refused["h2"]._replace(reported_at="yesterday")  # no time a database column holds
    service.parts.reports.put_back(refused)
    service.save_reports()
    assert [node["host"] for node in service.database.list_compute_nodes()] == ["h1", "h3"]
    assert "Cannot save the report of host h2, left out" in caplog.text


def test_a_read_only_method_that_meets_a_database_error_breaks_the_batch_not_the_others(conf):
    database = Database.from_conf(conf)
    database.sync()
    transport = rpc.get_transport(conf)
    go, done = threading.Event(), []

    class Endpoint:
        def hold(self, context):
            go.wait(10)

        def create(self, context, uuid):
            database.create_server_group(uuid, "g", "affinity")
            done.append(uuid)

        @rpc.read_only
        def peek(self, context, uuid):  # says it writes nothing, and writes
            database.create_server_group(uuid, "g", "affinity")

    server = rpc.get_rpc_server(transport, rpc.Target("t", server="s"), [Endpoint()], batch_size=8,
                                unit_of_work=lambda: UnitOfWork(database, Outbox()))
    server.start()
    client = rpc.RPCClient(transport, rpc.Target("t"))
    try:
        client.cast({}, "hold")
        client.cast({}, "create", uuid="00000000-0000-4000-8000-000000000001")
        client.cast({}, "peek", uuid="00000000-0000-4000-8000-000000000001")  # a duplicate: refused
        client.cast({}, "create", uuid="00000000-0000-4000-8000-000000000002")
        go.set()
        for _ in range(200):
            if len(database.list_server_groups()) == 2 and server.dead_letters.count == 1:
                break
            threading.Event().wait(0.05)
        groups = sorted(g["uuid"] for g in database.list_server_groups())
    finally:
        server.stop()
        server.wait()
        transport.cleanup()
        database.dispose()
    assert groups == ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"]
    assert server.dead_letters.count == 1


def _refused_connection():
    import psycopg2
    from sqlalchemy import exc as sa_exc

    return sa_exc.OperationalError("connect", {}, psycopg2.OperationalError(
        'connection to server at "db1" (10.0.0.5), port 5432 failed: Connection refused'))


def test_a_database_that_cannot_be_reached_is_no_messages_fault(conf, monkeypatch):
    """Connecting (at the first statement: a batch that runs none needs no database), a statement
    or the commit: each a passing failure, to hold the batch for."""
    database = Database.from_conf(conf)
    database.sync()

    def refuse(*args, **kwargs):
        raise _refused_connection()

    monkeypatch.setattr(database.engine, "connect", refuse)
    with UnitOfWork(database, Outbox()) as work, work.step("report_resources", read_only=True):
        pass
    for method, read_only in (("create_server_group", False), ("list_instances", True)):
        with pytest.raises(rpc.RetryLater, match="the database is unavailable: connection to server at"):
            with UnitOfWork(database, Outbox()) as work, work.step(method, read_only=read_only):
                database.list_instances()
    monkeypatch.undo()
    with pytest.raises(rpc.RetryLater) as raised:
        with UnitOfWork(database, Outbox()) as work, work.step("create_server_group"):
            raise _refused_connection()
    assert not raised.value.soon
    database.dispose()


def test_reports_the_database_could_not_take_are_saved_once_it_is_back(service, monkeypatch, caplog):
    service.parts.reports.put("h1", HostReport.from_wire(report("h1", 1024), "h1"))
    real = service.database.save_compute_nodes

    def away(rows):
        raise db_api.DatabaseUnavailable("database sqlite:// unavailable after 3 attempt(s): locked")

    monkeypatch.setattr(service.database, "save_compute_nodes", away)
    service.run_periodic_tasks()
    service.run_periodic_tasks()
    assert caplog.text.count("Periodic task saving host reports: database sqlite:// unavailable") == 1
    assert "Traceback" not in caplog.text
    service.parts.reports.put("h2", HostReport.from_wire(report("h2", 2048), "h2"))
    monkeypatch.setattr(service.database, "save_compute_nodes", real)
    service.save_reports()
    assert [node["host"] for node in service.database.list_compute_nodes()] == ["h1", "h2"]
