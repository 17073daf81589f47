"""What a scheduler's scaling-group controller tells Prometheus: each group it synced last
(members, desired count, each metric against its target, named as kube-state-metrics names
a HorizontalPodAutoscaler's), and the syncs and scale events it made.

A group is synced by one scheduler per period (its lease), so each group's series come from
the scheduler that synced it last; a group another scheduler takes over leaves this one's
series at its next sync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

SYNCS = Counter(
    "berth_scaling_group_syncs",
    "Scaling groups synced, by outcome: synced, paused, deleting, removed, lost (written by another "
    "controller since it was claimed), failed.",
    ["outcome"])

SCALE_EVENTS = Counter(
    "berth_scaling_scale_events",
    "Changes of a scaling group's desired count made by a sync, up or down.",
    ["direction"])
for _direction in ("up", "down"):
    SCALE_EVENTS.labels(_direction)


def count_syncs(results: Iterable[Any]) -> None:
    """Count a sync's results (scheduler.scaling.controller.SyncResult)."""
    for result in results:
        SYNCS.labels(result.outcome).inc()
        if result.scale_event:
            SCALE_EVENTS.labels("up" if result.scale_event > 0 else "down").inc()


class ScalingGroupsCollector(Collector):
    """The groups of the last sync that were synced (not paused, failed...), read at scrape."""

    def __init__(self, last_results: Callable[[], Sequence[Any]], synced: str = "synced") -> None:
        self._last_results = last_results
        self._synced = synced

    def describe(self) -> list[Any]:  # no samples at registration: read at scrape only
        return []

    def collect(self) -> Iterator[Any]:
        members = GaugeMetricFamily(
            "berth_scaling_group_members",
            "Members a scaling group counts toward its desired count (all but those being deleted), "
            "as its last sync found them.", labels=["group"])
        desired = GaugeMetricFamily(
            "berth_scaling_group_desired_members", "The desired count a scaling group's last sync set.",
            labels=["group"])
        labels = ["group", "metric", "target_type"]
        target = GaugeMetricFamily(
            "berth_scaling_group_metric_target",
            "Each metric's target: a utilization in percent of the request, an average, or a value.",
            labels=labels)
        current = GaugeMetricFamily(
            "berth_scaling_group_metric_current",
            "Each metric as the last sync read it, in its target's terms; absent when it could not be read.",
            labels=labels)
        for result in self._last_results():
            if result.outcome != self._synced:
                continue
            members.add_metric([result.name], result.members or 0)
            desired.add_metric([result.name], result.desired or 0)
            for reading in result.metrics:
                key = [result.name, reading.name, reading.target_type]
                target.add_metric(key, reading.target)
                if reading.current is not None:
                    current.add_metric(key, reading.current)
        yield from (members, desired, target, current)
