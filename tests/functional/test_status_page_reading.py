"""What the status page says without pointing at anything, in a real headless Chromium: a
host's fill against what it can take under its allocation ratios (its physical use apart),
refused instances by name, the heat map's rows labelled with host names, the scaling plot's
axes. No broker or database: one scheduler's host table and memory, served as it serves them."""

import time

import pytest

from berth_contract.host_report import HostReport
from scheduler import conf as berth_conf
from scheduler.fleet.host_manager import HostManager
from scheduler.scaling.controller import SYNCED, MetricReading, SyncResult
from scheduler.status_page import app
from scheduler.status_page.recent import Recent, ScalingHistory
from scheduler.status_page.snapshot import StatusSource
from scheduler.telemetry.endpoint import MetricsEndpoint
from tests.functional.browser import chromium, wait_until, watched_page

RATIOS = {"ram": 1.0, "vcpus": 4.0, "disk": 1.0}
U1, U2 = "6f1f5c8e-1111-4c6b-9d55-0a1b2c3d4e5f", "6f1f5c8e-2222-4c6b-9d55-0a1b2c3d4e5f"
RED = (215, 48, 39)


def _report(name, vcpus_used, ram_used=1024):
    return HostReport.from_wire({"host": name, "memory_mb": 16384, "free_ram_mb": 16384 - ram_used,
                                 "local_gb": 100, "free_disk_gb": 90, "vcpus": 8, "vcpus_used": vcpus_used,
                                 "instance_uuids": [], "running_vms": 0}, name)


def serve(hosts, refusals=None, history=None):
    """The page of ``hosts`` (a HostManager) at RATIOS: (its URL, the endpoint to stop)."""
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("listen_port", 0, group="prometheus")
    source = StatusSource("s1", hosts, lambda: {"ACTIVE": 1}, lambda: "nova", lambda: 60.0,
                          refusals or Recent(), Recent(), history, ratios=lambda: RATIOS)
    endpoint = MetricsEndpoint(conf, 0, routes=app.routes(source.snapshot))
    endpoint.start()
    return f"http://127.0.0.1:{endpoint.port}/", endpoint


@pytest.fixture
def small_fleet():
    """A page of three hosts, compute-1 at 9 of 8 vCPUs (113% physical, 28% of 4.0x); refusals
    of a named instance and an unnamed one; a scaling group synced for ten minutes."""
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    hosts = HostManager(conf)
    for name, vcpus_used in (("compute-1", 9), ("compute-2", 2), ("compute-3", 0)):
        hosts.update_from_report(_report(name, vcpus_used))
    refusals = Recent()
    refusals.add(instances=[U1, U2], names=["web-1", None],
                 reason="No valid host was found: RamFilter removed 3")
    history = ScalingHistory()
    start = time.time() - 600
    for k in range(11):
        history.record([SyncResult("web", "web", SYNCED, 2 + k // 4, members=2 + k // 5, metrics=(
            MetricReading("cpu", "resource", 40.0 + 4 * k, "utilization", 60.0),))], now=start + 60 * k)
    url, endpoint = serve(hosts, refusals, history)
    yield url
    endpoint.stop()


PIXEL = """([group, index]) => {
  const canvas = document.querySelector(`#heatmap .zone[data-group="${group}"] canvas`);
  const x = index * 18 + 1;
  return [...canvas.getContext("2d").getImageData(x, 1, 1, 1).data.slice(0, 3)];
}"""


def test_fill_is_against_what_the_host_can_take_names_and_axes_are_shown(small_fleet):
    with chromium() as browser:
        page, problems = watched_page(browser)
        page.goto(small_fleet)
        wait_until(page, "window.berthRenders >= 1", what="the page drawn")
        page.click("details summary")
        rows = page.evaluate("""[...document.querySelectorAll('#fullest tbody tr')].map(
            r => [...r.querySelectorAll('td')].map(td => td.innerText))""")
        assert rows[0] == ["compute-1", "nova", "up", "6%", "28% of 4.0x (113% physical)", "10%"]
        # Coloured by 28% (its fullest against what it can take), not as full.
        assert tuple(page.evaluate(PIXEL, ["nova", 0])) != RED
        share = 9 / 32
        low, high, t = (46, 160, 67), (235, 190, 40), round(share * 200) / 200 * 2
        assert tuple(page.evaluate(PIXEL, ["nova", 0])) == tuple(round(a + (b - a) * t)
                                                                 for a, b in zip(low, high, strict=True))
        assert page.inner_text("#vcpus-used") == "11%\nof their vCPUs at 4.0x (46% physical)"  # 11 of 24 x 4

        # The heat map's row says which hosts it holds, without pointing at it.
        assert page.inner_text("#heatmap .zone .labels") == "compute-1 – compute-3"
        assert page.inner_text("#heatmap .zone .note") == (
            "each row labelled by its first and last host: point at a host for its name")

        refused = page.locator("#refusals tbody tr td:nth-child(2) .instance")
        assert refused.all_inner_texts() == ["web-1", U2]
        assert refused.nth(0).get_attribute("title") == U1  # its UUID on hover

        def texts(kind):
            return page.evaluate(f"""[...document.querySelectorAll('.group[data-group="web"] text.{kind}')]
                                     .map(t => t.textContent)""")

        assert texts("ytick") == ["0", "2", "4", "0%", "50%", "100%"]
        assert texts("axis-title") == ["instances", "cpu"]
        xticks = texts("xtick")
        assert 2 <= len(xticks) <= 4 and all(len(t) == 5 and t[2] == ":" for t in xticks), xticks
        # Chromium's advice on this test's own reads of pixels is no problem of the page.
        assert [p for p in problems if "willReadFrequently" not in p] == []


def test_a_zone_of_many_hosts_labels_one_row_in_so_many_and_says_so():
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    hosts = HostManager(conf)
    for k in range(3000):
        hosts.update_from_report(_report(f"c{k:04d}", k % 8))
    url, endpoint = serve(hosts)
    try:
        with chromium() as browser:
            page, problems = watched_page(browser, width=1280)
            page.goto(url)
            wait_until(page, "window.berthRenders >= 1", what="the page drawn")
            columns = page.evaluate("Math.floor(document.querySelector('#heatmap canvas').width / 6)")
            labels = page.locator("#heatmap .labels .label").all_inner_texts()
            assert labels[:2] == [f"c0000 – c{columns - 1:04d}",
                                  f"c{3 * columns:04d} – c{4 * columns - 1:04d}"]
            lines = -(-3000 // columns)
            assert page.inner_text("#heatmap .zone .note") == (
                f"1 row of hosts in 3 labelled ({lines} rows of {columns}): point at a host for its name")
            assert problems == []
    finally:
        endpoint.stop()
