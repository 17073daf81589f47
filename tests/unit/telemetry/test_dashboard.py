"""The names Berth serves, the admin guide's table of them and the Grafana dashboard agree."""

import json
import pathlib
import re

from prometheus_client import REGISTRY

import compute_agent.telemetry  # noqa: F401 - registers the agents' metrics
import scheduler.telemetry.connection_metrics  # noqa: F401
import scheduler.telemetry.rpc_metrics  # noqa: F401
from berth_contract.host_report import HostReport
from scheduler.fleet.host_manager import HostManager
from scheduler.scaling.controller import SYNCED, MetricReading, SyncResult
from scheduler.scaling.metrics import ScalingGroupsCollector
from scheduler.telemetry.scheduler_metrics import FleetCollector
from tests.docs_pages import page
from tests.unit.scheduler.manager_world import report

ROOT = pathlib.Path(__file__).resolve().parents[3]
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def served(conf):
    """{family name: type} of every berth_ family a Berth process can serve."""
    hosts = HostManager(conf)
    hosts.update_from_report(HostReport.from_wire(report("h1", 4096), "h1"))
    group = SyncResult("g1", "web", SYNCED, 2, members=2,
                       metrics=(MetricReading("cpu", "resource", 40.0, "utilization", 50.0),))
    families = [*REGISTRY.collect(), *FleetCollector(hosts, lambda: 60.0, per_host=lambda: True).collect(),
                *ScalingGroupsCollector(lambda: [group]).collect()]
    return {f.name: f.type for f in families if f.name.startswith("berth_")}


def sample_names(families):
    return {name + suffix for name, kind in families.items() for suffix in SUFFIXES[kind]}


def test_every_name_the_dashboard_reads_is_served(conf):
    dashboard = json.loads((ROOT / "etc/grafana/berth-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 20
    read = {name for expr in exprs for name in re.findall(r"\bberth_\w+", expr)}
    assert read - sample_names(served(conf)) == set()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)


def test_the_metrics_pages_table_names_what_is_served_and_nothing_else(conf):
    section = page("admin/metrics.md")
    listed = set()
    for row in re.findall(r"^\| `berth_[^|]*\|", section, re.M):
        for name in re.findall(r"`(berth_\w+)", row):
            listed.add(re.sub(r"_total$", "", name))
    assert listed == set(served(conf))
