"""What the scaling controller tells Prometheus: each group it synced, as kube-state-metrics
shows a HorizontalPodAutoscaler, and its syncs and scale events counted."""

from prometheus_client import CollectorRegistry, generate_latest

from scheduler.scaling.metrics import ScalingGroupsCollector, count_syncs
from tests.unit.scaling.test_controller import _group, _run, clock, controller, database, metrics, scheduler  # noqa: F401
from tests.unit.telemetry.scrape import samples, value


def test_a_group_scaling_up_shows_its_members_desired_count_and_metric(
        database, scheduler, metrics, controller, clock):  # noqa: F811 - the fixtures imported above
    _group(database, desired=2)
    _group(database, uuid="g2", name="paused", desired=1, min=1)
    database.update_scaling_group("g2", {"paused": True})
    first = controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.9)  # 90% of a vCPU against a target of 50%: 2 -> 4
    ups = value("berth_scaling_scale_events_total", direction="up")
    synced = value("berth_scaling_group_syncs_total", outcome="synced")
    results = controller.sync_once(clock.at(15))
    count_syncs(results)
    assert value("berth_scaling_scale_events_total", direction="up") - ups == 1
    assert value("berth_scaling_group_syncs_total", outcome="synced") - synced == 1

    registry = CollectorRegistry()
    registry.register(ScalingGroupsCollector(lambda: results))
    shown = samples(generate_latest(registry).decode())
    assert shown == {  # the paused group has no series: it was not synced
        ("berth_scaling_group_members", (("group", "web"),)): 2,
        ("berth_scaling_group_desired_members", (("group", "web"),)): 4,
        ("berth_scaling_group_metric_target", (("group", "web"), ("metric", "cpu"),
                                               ("target_type", "utilization"))): 50,
        ("berth_scaling_group_metric_current", (("group", "web"), ("metric", "cpu"),
                                                ("target_type", "utilization"))): 90,
    }
    assert [r.outcome for r in first] == ["synced", "paused"]


def test_a_metric_that_cannot_be_read_shows_its_target_only(
        database, scheduler, metrics, controller, clock):  # noqa: F811 - the fixtures imported above
    _group(database, desired=2)
    controller.sync_once(clock.at(0))  # members not placed yet: no sample to read
    results = controller.sync_once(clock.at(15))
    registry = CollectorRegistry()
    registry.register(ScalingGroupsCollector(lambda: results))
    names = {name for name, _ in samples(generate_latest(registry).decode())}
    assert "berth_scaling_group_metric_target" in names
    assert "berth_scaling_group_metric_current" not in names
