"""The status page of a fleet of thousands of hosts in a real headless Chromium: every host
drawn in its zone in the colour of its use (down and disabled ones apart), the fullest hosts
listed, a host's figures shown where it is pointed at. No broker or database: the page of one
scheduler's host table, served as the scheduler serves it."""

import random
import time

import pytest

from berth_contract.host_report import HostReport
from scheduler import conf as berth_conf
from scheduler.fleet.host_manager import HostManager
from scheduler.policy.aggregates import Aggregate
from scheduler.status_page import app
from scheduler.status_page.recent import Recent
from scheduler.status_page.snapshot import StatusSource
from scheduler.telemetry.endpoint import MetricsEndpoint
from tests.functional.browser import chromium, wait_until, watched_page

#: Zone az1 large enough for the smallest cells (6 px), az2 for the middle ones (10 px).
SIZES = {"az1": 2600, "az2": 900}
GREEN, RED = (46, 160, 67), (215, 48, 39)
DOWN, DISABLED = (0x3A, 0x3F, 0x45), (0x8F, 0xA3, 0xB8)


def _report(name, ram, ram_used, disk_used, vcpus_used):
    return HostReport.from_wire({"host": name, "memory_mb": ram, "free_ram_mb": ram - ram_used,
                                 "local_gb": 1000, "free_disk_gb": 1000 - disk_used, "vcpus": 64,
                                 "vcpus_used": vcpus_used, "instance_uuids": [], "running_vms": 0}, name)


@pytest.fixture
def large_page():
    """(URL of the page, HostManager, {name: (share of the fullest, zone)}, {role: host})."""
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("listen_port", 0, group="prometheus")
    hosts, rng = HostManager(conf), random.Random(7)
    shares, zones = {}, {}
    for zone, count in SIZES.items():
        for k in range(count):
            name = f"{zone}-{k:05d}"
            ram_used, disk_used = rng.randrange(0, 60000), rng.randrange(0, 900)
            vcpus_used = rng.randrange(0, 60)
            hosts.update_from_report(_report(name, 65536, ram_used, disk_used, vcpus_used))
            shares[name] = max(ram_used / 65536, disk_used / 1000, vcpus_used / 64)
            zones.setdefault(zone, []).append(name)
    roles = {"full": "az1-01234", "empty": "az2-00042", "down": "az1-00007", "disabled": "az2-00500"}
    hosts.update_from_report(_report(roles["full"], 65536, 65536, 10, 1))
    hosts.update_from_report(_report(roles["empty"], 65536, 0, 0, 0))
    shares[roles["full"]], shares[roles["empty"]] = 1.0, 0.0
    hosts.get(roles["down"]).updated = time.monotonic() - 3600
    hosts.set_disabled({roles["disabled"]: None})
    hosts.table.set_aggregates(
        [Aggregate.from_dict({"name": f"zone-{z}", "hosts": names, "metadata": {"availability_zone": z}})
         for z, names in zones.items()]
        + [Aggregate.from_dict({"name": "gpu", "hosts": [roles["full"]], "metadata": {}})])
    source = StatusSource("big", hosts, lambda: {"ACTIVE": 5}, lambda: "nova", lambda: 60.0, Recent(),
                          Recent(), None)
    endpoint = MetricsEndpoint(conf, 0, routes=app.routes(source.snapshot))
    endpoint.start()
    try:
        yield f"http://127.0.0.1:{endpoint.port}/", hosts, shares, roles
    finally:
        endpoint.stop()


PIXEL = """([group, index]) => {
  const part = document.querySelector(`#heatmap .zone[data-group="${group}"]`);
  const canvas = part.querySelector("canvas");
  const cell = Number(part.dataset.hosts) > 2000 ? 6 : Number(part.dataset.hosts) > 400 ? 10 : 18;
  const columns = Math.floor(canvas.width / cell);
  const x = (index % columns) * cell + 1, y = Math.floor(index / columns) * cell + 1;
  return [...canvas.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3)];
}"""


def test_thousands_of_hosts_are_drawn_listed_and_described(large_page):
    url, hosts, shares, roles = large_page
    with chromium() as browser:
        page, problems = watched_page(browser, width=1400)
        page.goto(url)
        wait_until(page, "window.berthRenders >= 1", what="the page drawn")
        groups = page.evaluate("""[...document.querySelectorAll('#heatmap .zone')].map(
            g => [g.dataset.group, Number(g.dataset.hosts), g.querySelector('h3').innerText])""")
        assert groups == [["az1", 2600, "az1: 2600 hosts, 1 down"],
                          ["az2", 900, "az2: 900 hosts, 1 disabled"]]
        assert page.inner_text("#hosts-up").startswith("3498")
        assert page.inner_text("#hosts-down").startswith("1")
        assert page.inner_text("#hosts-disabled").startswith("1")

        # Each zone's hosts in the order of their names: az1-00007 is the 8th square of az1.
        def pixel(name):
            zone, number = name.split("-")
            return tuple(page.evaluate(PIXEL, [zone, int(number)]))

        assert pixel(roles["down"]) == DOWN and pixel(roles["disabled"]) == DISABLED
        assert pixel(roles["full"]) == RED and pixel(roles["empty"]) == GREEN
        for name in ("az1-00100", "az2-00333"):  # the colour of its share, to the nearest 1/200
            share = round(shares[name] * 200) / 200
            low, high, t = (GREEN, (235, 190, 40), share * 2) if share < 0.5 else \
                ((235, 190, 40), RED, (share - 0.5) * 2)
            assert pixel(name) == tuple(round(a + (b - a) * t) for a, b in zip(low, high, strict=True))

        page.click("details summary")
        listed = page.locator("#fullest tbody tr td:first-child").all_text_contents()
        up = [n for n in shares if n != roles["down"]]
        assert listed == sorted(up, key=lambda n: (-shares[n], n))[:20]
        assert listed[0] == roles["full"]

        canvas = page.locator('#heatmap .zone[data-group="az1"] canvas')
        box = canvas.bounding_box()
        columns = int(box["width"] // 6)
        full = int(roles["full"].split("-")[1])
        page.mouse.move(box["x"] + (full % columns) * 6 + 3, box["y"] + (full // columns) * 6 + 3)
        wait_until(page, f"document.getElementById('hover').innerText.startsWith('{roles['full']} ')",
                   what="the pointed host described")
        assert page.inner_text("#hover") == (f"{roles['full']} (az1, up): RAM 65536 of 65536 MB, "
                                             "vCPUs 1 of 64, disk 10 of 1000 GB; aggregates gpu, zone-az1")

        page.select_option("#grouping", "aggregate")
        assert page.evaluate("""[...document.querySelectorAll('#heatmap .zone')]
                                .map(g => g.dataset.group + ' ' + g.dataset.hosts).join(', ')""") == (
            "gpu 1, zone-az1 2600, zone-az2 900")
        # Chromium's advice on this test's own reads of pixels is no problem of the page.
        assert [p for p in problems if "willReadFrequently" not in p] == []
