"""What /status.json holds, and the page's routes."""

import json
import time

import pytest

from berth_contract.host_report import HostReport
from scheduler.conf.filter_scheduler import allocation_ratios
from scheduler.fleet.host_manager import HostManager
from scheduler.policy.aggregates import Aggregate
from scheduler.scaling.controller import SYNCED, MetricReading, SyncResult
from scheduler.status_page import app
from scheduler.status_page.recent import Recent, ScalingHistory
from scheduler.status_page.snapshot import StatusSource, fleet
from tests.unit.scheduler.manager_world import assembled, parts, report, request  # noqa: F401


@pytest.fixture
def hosts(conf):
    manager = HostManager(conf)
    for name, ram, used in (("b1", 8192, 2048), ("a1", 4096, 0), ("off", 2048, 0), ("gone", 1024, 0),
                            ("quiet", 512, 0)):
        manager.update_from_report(HostReport.from_wire(report(name, ram, used), name))
    manager.table.set_aggregates([Aggregate.from_dict({"name": "fast", "hosts": ["b1"],
                                                       "metadata": {"availability_zone": "az2"}})])
    manager.set_disabled({"off": None})
    manager.forget("gone")
    manager.get("quiet").updated = time.monotonic() - 600
    return manager


def test_the_fleet_is_columnar_by_host_in_name_order_with_zone_aggregates_state_and_use(hosts):
    shown = fleet(hosts, "nova", 60.0)
    assert shown["names"] == ["a1", "b1", "off", "quiet"]  # the deleted host is left out
    assert [shown["zones"][z] for z in shown["zone"]] == ["nova", "az2", "nova", "nova"]
    assert [shown["memberships"][m] for m in shown["membership"]] == [[], ["fast"], [], []]
    assert shown["state"] == [0, 0, 2, 1]  # up, up, disabled, down
    assert shown["ram_used_mb"] == [0, 2048, 0, 0] and shown["ram_mb"] == [4096, 8192, 2048, 512]
    assert shown["vcpus"] == [8, 8, 8, 8] and shown["disk_gb"] == [100] * 4


def test_a_new_host_a_new_aggregate_and_a_host_back_are_shown_at_once(hosts):
    fleet(hosts, "nova", 60.0)  # what the page keeps between two reads is then stale
    hosts.update_from_report(HostReport.from_wire(report("a0", 1024, 512), "a0"))
    hosts.update_from_report(HostReport.from_wire(report("gone", 1024, 0), "gone"))  # deleted, reports again
    shown = fleet(hosts, "nova", 60.0)
    assert shown["names"] == ["a0", "a1", "b1", "gone", "off", "quiet"]
    assert shown["ram_used_mb"][0] == 512
    zone = {"availability_zone": "az2"}
    hosts.table.set_aggregates([
        Aggregate.from_dict({"name": "fast", "hosts": ["b1", "a0"], "metadata": zone}),
        Aggregate.from_dict({"name": "gpu", "hosts": ["a0", "quiet"], "metadata": {}})])
    shown = fleet(hosts, "nova", 60.0)
    assert [shown["memberships"][m] for m in shown["membership"]] == [
        ["fast", "gpu"], [], ["fast"], [], [], ["gpu"]]
    assert [shown["zones"][z] for z in shown["zone"]] == ["az2", "nova", "az2", "nova", "nova", "nova"]
    hosts.forget("b1")
    assert fleet(hosts, "nova", 60.0)["names"] == ["a0", "a1", "gone", "off", "quiet"]


def test_an_empty_fleet_is_an_empty_page(conf):
    shown = fleet(HostManager(conf), "nova", 60.0)
    assert shown["names"] == shown["zone"] == shown["membership"] == shown["zones"] == []


class Failing:
    def __call__(self):
        raise RuntimeError("connection to server at postgresql://berth:s3cret@db failed")


def test_a_snapshot_without_the_database_still_shows_the_fleet_and_says_why(hosts, caplog):
    refusals, letters = Recent(), Recent()
    refusals.add(instances=["u1"], reason="No valid host was found: RamFilter removed 4")
    refusals.add(instances=["u2"], reason="second")
    source = StatusSource("sched-1", hosts, Failing(), lambda: "nova", lambda: 60.0, refusals, letters, None)
    snapshot = source.snapshot()
    assert snapshot["instances"] is None
    assert snapshot["instances_error"] == "the database cannot be read now"
    assert [r["reason"] for r in snapshot["refusals"]] == [  # newest first
        "second", "No valid host was found: RamFilter removed 4"]
    assert snapshot["scaling_groups"] is None and snapshot["dead_letters"] == []
    assert len(snapshot["hosts"]["names"]) == 4
    assert "s3cret" not in caplog.text and "s3cret" not in json.dumps(snapshot)


def test_the_moves_under_way_are_shown_and_a_database_away_says_so(hosts, caplog):
    move = {"id": 7, "instance_uuid": "u1", "kind": "migration", "status": "migrating", "source_host": "b1",
            "dest_host": "a1", "created_at": "2026-12-03T10:00:00.000000Z", "old_flavor": {}, "reason": None}
    source = StatusSource("sched-1", hosts, dict, lambda: "nova", lambda: 60.0, Recent(), Recent(), None,
                          moves=lambda: [move])
    [shown] = source.snapshot()["moves"]
    assert shown == {key: move[key] for key in ("id", "instance_uuid", "kind", "status", "source_host",
                                                "dest_host", "created_at")}
    away = StatusSource("sched-1", hosts, dict, lambda: "nova", lambda: 60.0, Recent(), Recent(), None,
                        moves=Failing())
    assert away.snapshot()["moves"] is None
    assert "cannot read the moves" in caplog.text and "s3cret" not in caplog.text


def test_recent_keeps_the_last_ones():
    recent = Recent(kept=3)
    for n in range(5):
        recent.add(n=n)
    assert [item["n"] for item in recent.items()] == [2, 3, 4]


def synced(name, members, desired, current, scale_event=None):
    return SyncResult(name, name, SYNCED, desired, members=members, scale_event=scale_event,
                      metrics=(MetricReading("cpu", "resource", current, "utilization", 50.0),))


def test_scaling_history_keeps_an_hour_and_the_groups_that_scaled_last():
    history = ScalingHistory(window_s=3600, max_groups=2)
    history.record([synced("web", 2, 2, 40.0), synced("api", 3, 3, None)], now=0)
    history.record([synced("web", 2, 4, 90.0, scale_event=2), synced("api", 3, 3, 30.0)], now=15)
    assert [g["name"] for g in history.groups()] == ["web", "api"]  # the one that scaled first
    assert history.groups()[0]["points"] == [[0, 2, 2, 40.0, 50.0], [15, 2, 4, 90.0, 50.0]]
    assert history.groups()[1]["points"][0] == [0, 3, 3, None, 50.0]  # not read: no value
    history.record([synced("zeta", 1, 1, 10.0)], now=3610)  # an hour after the first points
    # At most 2: web scaled, zeta was synced last; api (synced at 15, never scaled) goes.
    assert [(g["name"], len(g["points"])) for g in history.groups()] == [("web", 1), ("zeta", 1)]
    history.record([SyncResult("paused", "paused", "paused", 1)], now=3620)
    assert "paused" not in {g["name"] for g in history.groups()}


def call(routes, path):
    said = {}

    def start_response(status, headers):
        said["status"], said["headers"] = status, dict(headers)

    body = b"".join(routes[path]({"PATH_INFO": path}, start_response))
    return said["status"], said["headers"], body


def test_the_page_its_assets_and_its_data_are_served_with_a_strict_policy():
    routes = app.routes(lambda: {"scheduler": "s1"})
    for path, kind in (("/", "text/html"), ("/status.js", "text/javascript"), ("/status.css", "text/css"),
                       ("/status.json", "application/json")):
        status, headers, body = call(routes, path)
        assert status == "200 OK" and headers["Content-Type"].startswith(kind) and body
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert headers["Cache-Control"] == "no-store"
    page = call(routes, "/")[2].decode()
    assert "http" not in page  # nothing from the internet: no CDN, no font
    assert json.loads(call(routes, "/status.json")[2]) == {"scheduler": "s1"}


def test_a_snapshot_that_fails_is_a_500_that_says_where_to_look():
    status, _, body = call(app.routes(Failing()), "/status.json")
    assert status.startswith("500") and body == b"the status cannot be read now: see the scheduler's log\n"


def test_the_fleet_carries_the_allocation_ratios_the_filters_apply(hosts, conf):
    assert fleet(hosts, "nova", 60.0)["ratios"] == {"ram": 1.0, "vcpus": 1.0, "disk": 1.0}
    conf.set_override("cpu_allocation_ratio", 4.0, "filter_scheduler")
    source = StatusSource("s1", hosts, dict, lambda: "nova", lambda: 60.0, Recent(), Recent(), None,
                          ratios=lambda: allocation_ratios(conf))
    assert source.snapshot()["hosts"]["ratios"] == {"ram": 1.0, "vcpus": 4.0, "disk": 1.0}


def test_a_refusal_names_its_instances_by_the_names_they_were_booted_with(parts):  # noqa: F811
    uuids, spec, props = request(memory_mb=100_000, count=2)
    spec["instance_properties"] = {"display_name": "big"}
    parts.manager.run_instance({}, spec, props)
    [refusal] = parts.refusals.items()
    assert (refusal["instances"], refusal["names"]) == (uuids, ["big-1", "big-2"])


def test_scaling_history_says_which_metric_it_plots_and_against_what():
    history = ScalingHistory()
    history.record([synced("web", 2, 2, 40.0), SyncResult("api", "api", SYNCED, 1, members=1)], now=0)
    assert {g["name"]: g["metric"] for g in history.groups()} == {
        "web": {"name": "cpu", "target_type": "utilization"}, "api": None}
