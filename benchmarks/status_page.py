"""How long the status page takes at 10,000 hosts: building /status.json in the scheduler
(its CPU, and how long it holds the host table's lock, which decisions and reports wait
for), its size, and in a headless Chromium the time from navigation to the page drawn, and
to draw it again.

The fleet: ``--hosts`` hosts in four availability zones, with random use, 1% down and 1%
disabled; 50 refusals and dead letters, 20 scaling groups with an hour of history.
Needs Debian's ``chromium`` and Playwright (the test extra) for the browser figures.

Run: ``python -m benchmarks.status_page [--hosts N] [--runs R] [--screenshot PNG]`` (the status
page's picture: ``--hosts 600 --screenshot doc/source/admin/status-page.png``).
"""

from __future__ import annotations

import math
import random
import shutil
import statistics
import sys
import time
from typing import Any

from benchmarks import command_line
from berth_contract.host_report import HostReport
from scheduler import conf as berth_conf
from scheduler.cmd.arguments import positive
from scheduler.fleet.host_manager import HostManager
from scheduler.policy.aggregates import Aggregate
from scheduler.scaling.controller import SYNCED, MetricReading, SyncResult
from scheduler.status_page import app
from scheduler.status_page.recent import Recent, ScalingHistory
from scheduler.status_page.snapshot import StatusSource
from scheduler.telemetry.endpoint import MetricsEndpoint


def _fleet(conf: Any, n_hosts: int, rng: random.Random) -> HostManager:
    hosts = HostManager(conf)
    names = [f"host-{i:05d}" for i in range(n_hosts)]
    for name in names:
        ram = rng.choice((65536, 131072, 262144))
        used = int(ram * rng.random())
        hosts.update_from_report(HostReport.from_wire(
            {
                "host": name,
                "memory_mb": ram,
                "free_ram_mb": ram - used,
                "local_gb": 2000,
                "free_disk_gb": rng.randint(0, 2000),
                "vcpus": 64,
                "vcpus_used": rng.randint(0, 64),
                "instance_uuids": [],
                "running_vms": 0,
            },
            name,
        ))
    zones = [
        Aggregate.from_dict(
            {"name": f"zone-{z}", "hosts": names[z::4], "metadata": {"availability_zone": f"az{z + 1}"}}
        )
        for z in range(4)
    ]
    hosts.table.set_aggregates(zones)
    for name in rng.sample(names, n_hosts // 100):
        hosts.get(name).updated = time.monotonic() - 3600
    hosts.set_disabled({name: None for name in rng.sample(names, n_hosts // 100)})
    return hosts


def _source(hosts: HostManager, rng: random.Random) -> StatusSource:
    refusals, letters, history = Recent(), Recent(), ScalingHistory()
    for n in range(50):
        refusals.add(
            instances=[f"uuid-{n}"],
            reason=(
                "No valid host was found: 10000 hosts considered; RamFilter removed 9990, "
                "DiskFilter removed 10; none left"
            ),
        )
        letters.add(
            queue="scheduler", method="run_instance", reason="InvalidRequest: request_spec: must be an object"
        )
    now = time.time()
    desired = [4] * 20
    for step in range(240):
        results = []
        for g in range(20):  # a daily swing, compressed into the hour, each group its own phase
            load = 50 + 35 * math.sin(step / 25 + g) + rng.random() * 8
            members = desired[g]
            desired[g] = max(2, min(12, math.ceil(members * load / 50))) if step % 4 == 0 else desired[g]
            reading = MetricReading("cpu", "resource", round(load), "utilization", 50.0)
            results.append(
                SyncResult(
                    f"group-{g:02d}",
                    f"group-{g:02d}",
                    SYNCED,
                    desired[g],
                    members=members,
                    metrics=(reading,),
                    scale_event=(desired[g] - members) or None,
                )
            )
        history.record(results, now=now - 3600 + 15 * step)
    counts = {"ACTIVE": 90_000, "ERROR": 120, "BUILDING": 40}
    return StatusSource(
        "bench",
        hosts,
        lambda: counts,
        lambda: "nova",
        lambda: 60.0,
        refusals,
        letters,
        history,
    )


class _TimedLock:
    """A lock that records how long each outermost hold lasted (seconds)."""

    def __init__(self, lock: Any) -> None:
        self._lock, self._depth, self._since, self.holds = lock, 0, 0.0, []

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self._since = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.holds.append(time.perf_counter() - self._since)
        self._lock.release()


def _browser_figures(port: int, runs: int, screenshot: str | None = None) -> dict[str, list[float]] | str:
    binary = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "playwright is not installed (pip install '.[test]')"
    if binary is None:
        return "no chromium (apt-get install chromium)"
    first, again = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        try:
            for _ in range(runs):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/")
                deadline = time.monotonic() + 60
                # The page's policy forbids eval, which wait_for_function needs.
                while not page.evaluate("window.berthRenders >= 1"):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the status page was not drawn within 60 s")
                    time.sleep(0.02)
                first.append(page.evaluate("window.berthFirstRenderAt"))
                for measure in ("ram", "vcpus", "disk", "max"):
                    page.select_option("#measure", measure)
                    again.append(page.evaluate("window.berthRenderMs"))
                if screenshot:
                    page.set_viewport_size({"width": 1400, "height": 1750})
                    page.screenshot(path=screenshot)
                    screenshot = None
                page.close()
        finally:
            browser.close()
    return {"first": first, "again": again}


def _figure(values: list[float], unit: str = "ms", digits: int = 1) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} {unit} ({low:.{digits}f}-{high:.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.status_page", __doc__)
    parser.add_argument("--hosts", type=positive, default=10_000, help="hosts in the fleet (default 10000)")
    parser.add_argument("--runs", type=positive, default=5, help="page loads measured (default 5)")
    parser.add_argument("--screenshot", metavar="PNG", help="also save the page as it looks, to this file")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    conf = berth_conf.new_conf()
    conf([], project="berth-bench", default_config_files=[])
    conf.set_override("listen_port", 0, group="prometheus")
    rng = random.Random(0)
    hosts = _fleet(conf, args.hosts, rng)
    source = _source(hosts, rng)
    lock = hosts.lock = _TimedLock(hosts.lock)
    built, cpu, size = [], [], 0
    app.routes(source.snapshot)["/status.json"]({}, lambda *a: None)  # what is kept between reads
    lock.holds.clear()
    for _ in range(21):
        started, started_cpu = time.perf_counter(), time.process_time()
        size = len(app.routes(source.snapshot)["/status.json"]({}, lambda *a: None)[0])
        cpu.append((time.process_time() - started_cpu) * 1e3)
        built.append((time.perf_counter() - started) * 1e3)
    held = [hold * 1e3 for hold in lock.holds]
    print(
        f"status page, {args.hosts:,} hosts: /status.json built and encoded in {_figure(cpu)} of CPU "
        f"({_figure(built)} of wall time), median of 21; the host table's lock held "
        f"{_figure(held, digits=2)}; {size / 1024:.0f} KiB",
        flush=True,
    )
    endpoint = MetricsEndpoint(conf, 0, routes=app.routes(source.snapshot))
    endpoint.start()
    try:
        assert endpoint.port is not None
        figures = _browser_figures(endpoint.port, args.runs, args.screenshot)
    finally:
        endpoint.stop()
    if isinstance(figures, str):
        print(f"status page in a browser: not measured: {figures}")
        return 0
    print(
        f"status page, {args.hosts:,} hosts, headless Chromium: drawn {_figure(figures['first'])} after "
        f"navigation (median of {len(figures['first'])} loads), drawn again "
        f"{_figure(figures['again'])} (median of {len(figures['again'])})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
