"""Three schedulers on memory:// and one database taking the agents' reports: with
``report_ingestion = shared`` each report is taken by one and reaches the others in a digest;
with ``each`` (the default) every scheduler takes every report itself."""

import collections
import logging
import threading
import time

import pytest

from scheduler.client import SchedulerClient
from scheduler.fleet import report_digests
from scheduler.fleet.report_owner import owner
from scheduler.rpc import topology
from scheduler.service import SchedulerService
from tests.unit.scheduler.manager_world import report
from tests.unit.scheduler.service_parts import transport_and_database
from tests.unit.scheduler.test_report_writers import NAMES, heartbeats, scheduler_conf

HOSTS = [f"h{i:02d}" for i in range(30)]
GUARD = 20  # against hangs only


def wait_for(condition, what):
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Recorded:
    """What each scheduler did with each report: taken through its RPC server (``handled``),
    applied to its host table (``applied``, (host, report_seq) each time), rows it saved."""

    def __init__(self):
        self.lock = threading.Lock()
        self.handled = collections.Counter()
        self.applied = collections.Counter()
        self.writes = []

    def applied_by(self, name):
        with self.lock:
            return {tuple(key): n for (who, *key), n in self.applied.items() if who == name}


def start_fleet(conf, mode, record):
    transport, database = transport_and_database(conf)
    services = {}
    for name in NAMES:
        own = scheduler_conf(conf, name)
        own.set_override("report_ingestion", mode, "scheduler")
        own.set_override("report_digest_interval", 0.05, "scheduler")
        service = SchedulerService(own, transport, database)
        manager, hosts = service.manager, service.parts.host_manager
        real_handle, real_apply = manager.report_resources, hosts.update_from_report

        def handle(context, host, resources, name=name, real=real_handle):
            with record.lock:
                record.handled[name, host, resources.get("report_seq")] += 1
            return real(context, host, resources)

        def apply(report, now=None, name=name, real=real_apply):
            taken = real(report, now)
            if taken:
                with record.lock:
                    record.applied[name, report.host, report.report_seq] += 1
            return taken

        handle.__dict__.update(real_handle.__dict__)  # its RPC declarations (callers, read_only)
        manager.report_resources = handle
        hosts.update_from_report = apply
        services[name] = service
    real_save = database.save_compute_nodes
    saving = threading.local()

    def counted_save(rows):
        rows = list(rows)
        real_save(rows)
        record.writes.extend((getattr(saving, "name", "?"), row["host"]) for row in rows)

    database.save_compute_nodes = counted_save
    for name, service in services.items():
        real = service.save_reports

        def save(real=real, name=name):
            saving.name = name
            real()

        service.save_reports = save
    for service in services.values():
        service.start()
    return transport, database, services


@pytest.fixture
def fleet(conf, request):
    """(transport, database, {name: started SchedulerService}, Recorded) in the mode of the test's
    parameter (``report_ingestion``)."""
    record = Recorded()
    transport, database, services = start_fleet(conf, request.param, record)
    yield transport, database, services, record
    for service in services.values():
        service.stop()
    transport.cleanup()
    database.dispose()


def send_round(transport, seq, ram, old_agents=False):
    """Every host reports (report number ``seq`` of its agent), as an agent of this release does;
    with ``old_agents`` as one that predates the reports' exchange (to scheduler_fanout)."""
    client = SchedulerClient(transport)
    for host in HOSTS:
        resources = dict(report(host, ram), report_seq=seq, started_at="2026-12-05T00:00:00")
        if old_agents:
            client._fanout.cast({}, "report_resources", host=host, resources=resources)
        else:
            client.report_resources({}, host, resources)


def every_scheduler_has(services, ram):
    return all(
        (view := service.parts.host_manager.get(host)) is not None and view.total_usable_ram_mb == ram
        for service in services.values() for host in HOSTS)


@pytest.mark.parametrize("fleet", [report_digests.SHARED], indirect=True)
def test_shared_a_report_cast_once_is_taken_by_one_and_reaches_every_host_table_once(fleet):
    transport, database, services, record = fleet
    send_round(transport, 1, 4096)
    wait_for(lambda: every_scheduler_has(services, 4096), "every scheduler to see every host")
    time.sleep(0.3)  # what would come twice (a digest to its own sender, ...) has come by now
    # Taken through the RPC path by one scheduler each (a fanout would have each take all)...
    assert collections.Counter(h for _, h, _ in record.handled.elements()) == dict.fromkeys(HOSTS, 1)
    # ...and applied once to each scheduler's table (through a digest but by the one that took it).
    for name in NAMES:
        assert record.applied_by(name) == {(host, 1): 1 for host in HOSTS}


@pytest.mark.parametrize("fleet", [report_digests.SHARED], indirect=True)
def test_shared_each_report_is_written_once_by_its_hosts_owner(fleet):
    transport, database, services, record = fleet
    heartbeats(database)
    send_round(transport, 1, 1024)
    wait_for(lambda: every_scheduler_has(services, 1024), "the first round")
    for service in services.values():
        service.save_reports()  # a host's first report: each writes it (its row is there)
    record.writes.clear()
    send_round(transport, 2, 2048)
    wait_for(lambda: every_scheduler_has(services, 2048), "the second round")
    for service in services.values():
        service.save_reports()
    assert sorted(record.writes) == sorted((owner(host, NAMES), host) for host in HOSTS)
    assert {node["memory_mb"] for node in database.list_compute_nodes()} == {2048}


@pytest.mark.parametrize("fleet", [report_digests.SHARED], indirect=True)
def test_shared_a_report_taken_again_or_a_late_digest_gives_back_nothing(fleet):
    transport, database, services, record = fleet
    send_round(transport, 2, 2048)
    wait_for(lambda: every_scheduler_has(services, 2048), "the newer reports")
    send_round(transport, 1, 1024)  # an older report of each host, delivered after the newer
    time.sleep(0.5)
    assert every_scheduler_has(services, 2048)
    for name in NAMES:
        assert record.applied_by(name) == {(host, 2): 1 for host in HOSTS}


@pytest.mark.parametrize("fleet", [report_digests.SHARED], indirect=True)
def test_shared_old_agents_reports_still_reach_every_scheduler_each_taking_them(fleet):
    transport, database, services, record = fleet
    send_round(transport, 1, 3072, old_agents=True)
    wait_for(lambda: every_scheduler_has(services, 3072), "every scheduler to see every host")
    time.sleep(0.3)
    assert record.handled == {(n, h, 1): 1 for n in NAMES for h in HOSTS}
    assert all(service.digests_out.sent == 0 for service in services.values())  # nothing passed on


@pytest.mark.parametrize("fleet", [report_digests.EACH], indirect=True)
def test_each_every_scheduler_takes_every_report_itself_and_sends_no_digest(fleet):
    transport, database, services, record = fleet
    send_round(transport, 1, 4096)
    # Taken by another server than an old agent's (the clients'): the next round once this one is.
    wait_for(lambda: every_scheduler_has(services, 4096), "every scheduler to see every host")
    send_round(transport, 2, 5120, old_agents=True)  # and an old agent's, as before
    wait_for(lambda: every_scheduler_has(services, 5120), "every scheduler to see every host")
    time.sleep(0.3)
    assert record.handled == {(n, h, seq): 1 for n in NAMES for h in HOSTS for seq in (1, 2)}
    assert all(service.digests_out is None for service in services.values())
    for name in NAMES:
        assert record.applied_by(name) == {(host, seq): 1 for host in HOSTS for seq in (1, 2)}


@pytest.mark.parametrize("fleet", [report_digests.SHARED], indirect=True)
def test_shared_a_digest_of_an_unknown_format_is_refused_with_a_log_line(fleet, caplog):
    transport, database, services, record = fleet
    body = report_digests.digest_body("sched-z", [])
    body["reports"] = [dict(report("h-new", 1024), report_seq=1)]
    body["digest"] = 2
    with caplog.at_level(logging.ERROR, logger=report_digests.__name__):
        transport.publisher.publish(body, topology.fanout_exchange(report_digests.DIGEST_TOPIC),
                                    report_digests.DIGEST_TOPIC)
        wait_for(lambda: len(caplog.records) >= len(NAMES), "the refusals")
        time.sleep(0.2)
    assert caplog.messages == [
        "Digest of reports refused: from sched-z, of format 2: this scheduler reads format 1 only (a "
        "scheduler of another release sent it; run one release in shared report ingestion)"] * len(NAMES)
    assert all(service.parts.host_manager.get("h-new") is None for service in services.values())
    # A digest of this format from the same sender is taken.
    body["digest"] = report_digests.FORMAT
    transport.publisher.publish(body, topology.fanout_exchange(report_digests.DIGEST_TOPIC),
                                report_digests.DIGEST_TOPIC)
    wait_for(lambda: all(s.parts.host_manager.get("h-new") is not None for s in services.values()),
             "the digest of a known format")
