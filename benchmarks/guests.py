"""Real guests under the qemu driver: boot time, live migration and its downtime per guest size,
and the agent's CPU per guest.

Two qemu drivers in this process, as two agents on one machine (each its own instances
directory), boot the test image of tools/build-guest-image (built into a temporary directory
from the installed Debian packages). For each guest size, each repeat:

- **boot**: ``spawn`` from the qemu command to the image's ``berth-guest: up`` on the serial
  console (what makes a build ACTIVE);
- **live migration**: the three steps of a move between two agents (``prepare_move_in`` on the
  destination, ``migrate_out`` on the source, ``finish_move_in``), end to end, and the
  downtime and total time qemu itself reports (``query-migrate``, as ``migrate_out`` returns them);
- **agent CPU per guest**: with ``--guests N`` guests running, the CPU time of the agent's
  ``measure`` (what each report reads of every guest, from /proc) per guest and report.

Figures are medians over the repeats with their min-max. Guests run under TCG unless KVM works
(``[qemu] accel = auto``, said in the first line). Needs qemu-system-x86, qemu-utils,
busybox-static and a kernel in /boot.

Run alone: ``python -m benchmarks.guests [--sizes 96,128,256] [--repeats 3] [--guests 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path

from compute_agent.driver.qemu.driver import QemuDriver
from tests.guests.guests import qemu_conf

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "berth-test"


def _driver(tmp, name, images):
    return QemuDriver(qemu_conf(tmp / name, images))


def _instance(memory_mb):
    return {"uuid": str(uuidlib.uuid4()), "flavor": {"memory_mb": memory_mb, "vcpus": 1, "root_gb": 1},
            "image": {"id": IMAGE, "properties": {}}}


def _boot(driver, instance):
    start = time.perf_counter()
    driver.spawn(instance)
    return time.perf_counter() - start


def _migrate(source, destination, instance):
    migration = {"id": 1, "kind": "live-migration", "live": True, "source_host": "a", "dest_host": "b"}
    start = time.perf_counter()
    transfer = destination.prepare_move_in(instance, migration)
    figures = source.migrate_out(instance, migration, transfer)  # qemu's, as the agent tells them
    destination.finish_move_in(instance, migration, transfer)
    took = time.perf_counter() - start
    source.destroy(instance)
    return took, figures.get("downtime_ms", 0) / 1000, figures.get("total_ms", 0) / 1000


def _measure_cpu(driver, instances, reports):
    flavors = {i["uuid"]: i["flavor"] for i in instances}
    driver.measure(flavors)  # the first sample of each guest
    start = time.process_time()
    for _ in range(reports):
        driver.measure(flavors)
    return (time.process_time() - start) / (reports * len(instances))


def _figure(values, unit="s", scale=1.0):
    values = [v * scale for v in values]
    return f"{statistics.median(values):.3f} {unit} ({min(values):.3f}-{max(values):.3f})"


def run(sizes, repeats, guests, reports, out=sys.stdout):
    with tempfile.TemporaryDirectory(prefix="berth-guests-bench-") as directory:
        tmp = Path(directory)
        images = tmp / "images"
        built = subprocess.run([sys.executable, str(ROOT / "tools" / "build-guest-image"), str(images)],
                               capture_output=True, text=True)
        if built.returncode != 0:
            sys.exit(f"cannot build the test image: {built.stderr.strip()}")
        a, b = _driver(tmp, "a", images), _driver(tmp, "b", images)
        print(f"guests under {a.accelerator().upper()}, qemu {a.qemu_version()}, {os.cpu_count()} CPUs; "
              f"{repeats} repeat(s) per size; medians (min-max)", file=out)
        rows = []
        try:
            for memory_mb in sizes:
                boots, moves, downtimes, qemu_times = [], [], [], []
                for _ in range(repeats):
                    instance = _instance(memory_mb)
                    boots.append(_boot(a, instance))
                    took, downtime, total = _migrate(a, b, instance)
                    moves.append(took)
                    downtimes.append(downtime)
                    qemu_times.append(total)
                    b.destroy(instance)
                rows.append({"memory_mb": memory_mb, "boot_s": statistics.median(boots),
                             "migration_s": statistics.median(moves),
                             "downtime_ms": statistics.median(downtimes) * 1000})
                print(f"{memory_mb:>5} MB: boot {_figure(boots)}; live migration {_figure(moves)} "
                      f"(qemu: {_figure(qemu_times)}), downtime {_figure(downtimes, 'ms', 1000)}", file=out)
            running = [_instance(min(sizes)) for _ in range(guests)]
            for instance in running:
                a.spawn(instance)
            try:
                per_guest = [_measure_cpu(a, running, reports) for _ in range(repeats)]
            finally:
                for instance in running:
                    a.destroy(instance)
            print(f"agent CPU per guest and report (measure, {guests} guests): "
                  f"{_figure(per_guest, 'ms', 1000)}", file=out)
            rows.append({"agent_cpu_ms_per_guest_report": statistics.median(per_guest) * 1000})
        finally:
            for driver in (a, b):
                for leftover in Path(driver.instances_path).glob("*"):
                    driver.destroy({"uuid": leftover.name})
        return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.guests", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="96,128,256",
                        help="guest memory sizes in MB, comma-separated (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per size (default %(default)s)")
    parser.add_argument("--guests", type=int, default=4,
                        help="guests running while the agent's CPU per guest is measured "
                        "(default %(default)s)")
    parser.add_argument("--reports", type=int, default=20,
                        help="reports measured per repeat for the agent's CPU (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure line too")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 72 or args.repeats < 1 or args.guests < 1 or args.reports < 1:
        parser.error("sizes of at least 72 MB (a guest needs that), and at least one repeat, guest, report")
    rows = run(sizes, args.repeats, args.guests, args.reports)
    if args.json:
        for row in rows:
            print(json.dumps(row))


if __name__ == "__main__":
    main()
