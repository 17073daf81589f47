"""A host whose agent says, in its last report, that it stopped: down at once, on this scheduler
and on one that starts later from the saved rows, until its agent reports again."""

import datetime
import logging

import pytest

from berth_contract.host_report import HostReport
from scheduler.exception import InvalidRequest
from scheduler.fleet.host_manager import HostManager

STARTED = "2026-01-01T00:00:00Z"


def wire(host="h1", seq=1, started_at=STARTED, **changes):
    return dict({"host": host, "memory_mb": 4096, "free_ram_mb": 4096, "local_gb": 100, "free_disk_gb": 100,
                 "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0,
                 "report_seq": seq, "started_at": started_at}, **changes)


def test_stopped_is_true_or_false_and_travels_in_a_digest():
    with pytest.raises(InvalidRequest, match="stopped must be true or false, got 'yes'"):
        HostReport.from_wire(wire(stopped="yes"), "h1")
    report = HostReport.from_wire(wire(stopped=True), "h1")
    assert report.stopped is True and report.to_wire()["stopped"] is True
    assert HostReport.trusted(report.to_wire()).stopped is True  # what another scheduler takes
    assert "stopped" not in HostReport.from_wire(wire(), "h1").to_wire()


def test_a_stopped_report_makes_the_host_down_at_once_until_it_reports_again(conf, caplog):
    hosts = HostManager(conf)
    hosts.update_from_report(HostReport.from_wire(wire(seq=1), "h1"), now=100.0)
    assert hosts.is_up(hosts.get("h1"), now=101.0)
    with caplog.at_level(logging.INFO, logger="scheduler.fleet.host_manager"):
        hosts.update_from_report(HostReport.from_wire(wire(seq=2, stopped=True), "h1"), now=102.0)
        assert not hosts.is_up(hosts.get("h1"), now=102.5)  # service_down_time is 60 s
        assert hosts.down == {"h1"} and hosts.stopped == {"h1": 102.0}
        assert hosts.notice_down_hosts(now=103.0) == []  # said once, as it stopped
        # A report of the process that stopped, delivered late, changes nothing.
        assert not hosts.update_from_report(HostReport.from_wire(wire(seq=1), "h1"), now=104.0)
        assert not hosts.is_up(hosts.get("h1"), now=104.0)
        # Its agent starts again.
        hosts.update_from_report(HostReport.from_wire(wire(seq=1, started_at="2026-01-01T00:05:00Z"), "h1"),
                                 now=130.0)
    assert hosts.is_up(hosts.get("h1"), now=130.0) and not hosts.down and not hosts.stopped
    assert [r.getMessage() for r in caplog.records] == [
        "Host h1 is down: its agent stopped (its last report says so, report 2 of the agent started at "
        f"{STARTED}); it takes no placement, and its builds not begun are placed again, until it reports "
        "again",
        "Host h1 is up: it reports again after 28 s without a report",
    ]
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


def test_a_scheduler_that_starts_later_takes_a_stopped_host_for_down(conf, caplog):
    saved = datetime.datetime(2026, 1, 1, 0, 0, 10)
    row = dict(wire(seq=2), stats={"stopped": True}, updated_at=saved)  # as save_compute_nodes keeps it
    hosts = HostManager(conf)
    with caplog.at_level(logging.INFO, logger="scheduler.fleet.host_manager"):
        hosts.restore([row], wall=saved + datetime.timedelta(seconds=1))
    assert [r.levelname for r in caplog.records] == ["INFO"]  # no news of this run: no warning
    assert not hosts.is_up(hosts.get("h1")) and hosts.down == {"h1"}
    plain = HostManager(conf)
    plain.restore([dict(wire(seq=2), updated_at=saved)], wall=saved + datetime.timedelta(seconds=1))
    assert plain.is_up(plain.get("h1"))
