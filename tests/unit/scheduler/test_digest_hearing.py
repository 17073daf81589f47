"""A scheduler in shared report ingestion hears the hosts by two ways: its RPC server (the reports it
takes itself) and the other schedulers' digests. While either cannot hear, the hosts' report ages
stand still: a lost digest connection does not make the hosts it carried look down."""

import time

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.fleet import report_digests
from scheduler.fleet.host_manager import HostManager
from scheduler.rpc import consumer
from tests.unit.scheduler.manager_world import report
from tests.unit.scheduler.test_shared_ingestion import wait_for


def reported(hosts, host, now, seq=1):
    wire = report(host, 8192)
    wire["report_seq"] = seq
    hosts.update_from_report(HostReport.from_wire(wire, host), now=now)


def test_the_ages_stand_still_until_every_way_of_hearing_hears_again(conf):
    hosts = HostManager(conf)
    down_time = conf.scheduler.service_down_time
    now = time.monotonic()
    reported(hosts, "h1", now)
    hosts.deaf(now + 1, report_digests.DIGEST_TOPIC)  # the digests stopped coming
    hosts.deaf(now + 2)  # and the RPC server's own queues too
    hosts.heard(now + 3)  # the RPC server hears again, the digests do not
    assert hosts.notice_down_hosts(now=now + 10 * down_time) == []
    hosts.heard(now + 10 * down_time, report_digests.DIGEST_TOPIC)
    assert hosts.is_up(hosts.get("h1"), now=now + 10 * down_time + 1)  # aged 2 s, not 10 x down_time
    assert hosts.notice_down_hosts(now=now + 11 * down_time + 2) == ["h1"]  # then it ages


@pytest.fixture
def cut(monkeypatch):
    """Names of consume loops whose connection is lost (while they are in the set)."""
    names = set()
    real = consumer.Link.check

    def check(self, channel):
        if self._loop.name in names:
            raise consumer.ConnectionLost("cut by the test")
        return real(self, channel)

    monkeypatch.setattr(consumer.Link, "check", check)
    return names


def test_a_lost_digest_connection_does_not_make_the_hosts_look_down(conf, cut):
    conf.set_override("rabbit_retry_interval", 0.05, "oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_backoff", 0, "oslo_messaging_rabbit")
    transport = rpc.get_transport(conf)
    hosts = HostManager(conf)
    down_time = conf.scheduler.service_down_time
    taken = []
    receiver = report_digests.DigestReceiver(transport, "sched-1", lambda reports, sender: taken.extend(
        reports), hearing=hosts)
    sender = report_digests.DigestSender(transport, "sched-2", interval=0.02, size=10)
    receiver.start()
    sender.start()
    try:
        wait_for(lambda: receiver.ready, "the digests' queue")
        now = time.monotonic()
        reported(hosts, "h1", now)
        cut.add("report-digests-sched-1")
        wait_for(lambda: hosts.deaf_since is not None, "the host manager to be told")
        assert not receiver.ready
        # However long the digests stay away, the host they carry is not said down.
        assert hosts.notice_down_hosts(now=time.monotonic() + 10 * down_time) == []
        assert hosts.is_up(hosts.get("h1"), now=time.monotonic() + 10 * down_time)
        cut.clear()
        wait_for(lambda: hosts.deaf_since is None, "the digests to be heard again")
        assert hosts.is_up(hosts.get("h1"))
        # Heard again: the digests come through, and the ages run again.
        wire = report("h2", 4096)
        wire["report_seq"] = 1
        sender.add(HostReport.from_wire(wire, "h2"))
        wait_for(lambda: [r.host for r in taken] == ["h2"], "a digest after the reconnection")
        assert hosts.notice_down_hosts(now=time.monotonic() + 2 * down_time) == ["h1"]
    finally:
        sender.stop()
        receiver.stop()
        transport.cleanup()
