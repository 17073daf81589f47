"""The controller as the scheduler service runs it: settings from [scaling], the metrics
it reads on a fleet, the sync thread, and the leases given up on stop (memory://, SQLite)."""

from __future__ import annotations

import time
import uuid as uuidlib
from datetime import datetime, timedelta

import kombu
import pytest

from scheduler import rpc, states
from scheduler.conf import opts
from scheduler.db.api import Database
from scheduler.scaling.service import (
    BrokerQueues,
    FleetMetrics,
    controller_settings,
    external_metric_error,
)
from scheduler.service import SchedulerService

SPEC = {"min": 2, "max": 4, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}


def test_the_settings_come_from_the_scaling_options(conf):
    conf.set_override("host", "sched-7")
    conf.set_override("sync_period", 5, group="scaling")
    conf.set_override("replace_backoff", 20, group="scaling")
    conf.set_override("replace_backoff_max", 10, group="scaling")
    conf.set_override("cpu_initialization_period", 120, group="scaling")
    settings = controller_settings(conf, pid=42)
    assert settings.owner == "sched-7:42"
    assert settings.period_s == 5
    assert (settings.replace_backoff_s, settings.replace_backoff_max_s) == (20, 20)  # max never below
    assert settings.readiness.cpu_initialization_period_s == 120
    assert settings.readiness.initial_readiness_delay_s == 30


def test_a_queue_depth_is_read_from_the_broker_and_a_missing_queue_is_none_with_its_reason(conf):
    transport = rpc.get_transport(conf)
    queues = BrokerQueues(transport)
    try:
        with kombu.Connection("memory://") as conn:
            queue = kombu.Queue("jobs", kombu.Exchange("jobs-x", type="direct"), routing_key="jobs")
            producer = conn.Producer()
            for n in range(7):
                producer.publish({"n": n}, exchange=queue.exchange, routing_key="jobs", declare=[queue])
        metrics = FleetMetrics(None, queues, 60, clock=datetime.now)
        assert metrics.external("queue:jobs") == 7
        assert metrics.external("queue:no-such-queue") is None
        assert "no-such-queue" in queues.last_error
        assert metrics.external("queue:jobs") == 7  # the connection is opened again after the failure
        assert metrics.external("cpu-of-the-moon") is None
    finally:
        queues.close()
        transport.cleanup()


def test_only_queue_depths_are_readable_external_metrics():
    assert external_metric_error("queue:jobs") is None
    assert "queue:<queue name>" in external_metric_error("queue:")
    assert "'rps'" in external_metric_error("rps")


class Samples:
    def __init__(self):
        self.asked = []

    def latest_instance_metrics(self, uuids, since):
        self.asked.append((uuids, since))
        return {uuids[0]: {"cpu": 0.5}}


def test_member_samples_older_than_metric_max_age_are_not_asked_for():
    database = Samples()
    now = datetime(2026, 12, 1, 12, 0, 0)
    metrics = FleetMetrics(database, None, 45, clock=lambda: now)
    assert metrics.member_usage(["a", "b"]) == {"a": {"cpu": 0.5}}
    assert metrics.member_usage([]) == {}
    assert database.asked == [(["a", "b"], now - timedelta(seconds=45))]


@pytest.fixture
def service(conf):
    conf.set_override("host", "sched-1")
    conf.set_override("sync_period", 1, group="scaling")
    opts.register_plugin_opts(conf)
    transport = rpc.get_transport(conf)
    database = Database.from_conf(conf)
    database.sync()
    yield SchedulerService(conf, transport, database)
    transport.cleanup()
    database.dispose()


def _wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_running_scheduler_syncs_the_groups_and_gives_their_leases_up_when_it_stops(service):
    database = service.database
    group = database.create_scaling_group(str(uuidlib.uuid4()), "web", SPEC, {"flavor_name": "m1.tiny"}, 2)
    service.start()
    try:
        # No host in this fleet: the scheduler refuses both members, which is how they end.
        _wait(lambda: len(database.list_scaling_group_members(group["uuid"])) == 2
              and all(m["state"] == states.ERROR for m in database.list_scaling_group_members(group["uuid"])))
        held = database.get_scaling_group(group["uuid"])
        assert held["lease_owner"].startswith("sched-1:")
        assert held["status"]["desired"] == 2
        names = sorted(m["display_name"] for m in database.list_scaling_group_members(group["uuid"]))
        assert names == ["web-1", "web-2"]
    finally:
        service.stop()
    assert database.get_scaling_group(group["uuid"])["lease_owner"] is None


def test_a_scheduler_with_the_controller_off_syncs_nothing(conf, service):
    conf.set_override("enabled", False, group="scaling")
    off = SchedulerService(conf, service.transport, service.database)
    assert off.scaling is None
    group = service.database.create_scaling_group(str(uuidlib.uuid4()), "web", SPEC,
                                                  {"flavor_name": "m1.tiny"}, 2)
    off.start()
    try:
        off.run_periodic_tasks()
    finally:
        off.stop()
    assert service.database.list_scaling_group_members(group["uuid"]) == []
    assert service.database.get_scaling_group(group["uuid"])["lease_owner"] is None
