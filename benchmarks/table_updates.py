"""Agents' reports applied to a scheduler's host table as a digest of another scheduler's applies
them (``HostReport.trusted``, then ``HostManager.update_from_report``): CPU per report, in
process, no broker nor database. The reports are the ``reports`` section's (a real agent's keys,
4 instances a host, figures drawn at random), every host reporting in turn.

``python -m benchmarks.table_updates [--hosts N] [--rounds R] [--baseline DIR]``: with
``--baseline``, each round also measures the tree DIR (a checkout of other code), each tree in a
process of its own, alternated, and prints the ratio round by round.
"""

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import summary

HERE = Path(__file__).resolve().parents[1]


def per_report_us(hosts, passes=5):
    """Median CPU microseconds per report of ``passes`` passes over the fleet, after one to warm."""
    from benchmarks import ingestion
    from benchmarks.report_load import _Fleet
    from berth_contract.host_report import HostReport
    from scheduler.fleet.host_manager import HostManager
    from scheduler.utils import jsonutils

    fleet = _Fleet(hosts, 4, 1)
    manager = HostManager(ingestion._conf())
    took = []
    for at in range(passes + 1):
        bodies = [jsonutils.loads(body) for _, body in fleet.bodies(0, hosts)]
        started = time.process_time()
        for wire in bodies:
            manager.update_from_report(HostReport.trusted(wire))
        if at:
            took.append((time.process_time() - started) / hosts * 1e6)
    return statistics.median(took)


def _in_process_of(tree, hosts):
    """per_report_us(hosts) of the code of ``tree``, in a process of its own (this function's text
    run there: the baseline need not have this module, only benchmarks.report_load)."""
    code = (f"import statistics, time\n{inspect.getsource(per_report_us)}\n"
            f"print(per_report_us({hosts}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a checkout to measure alternated with this one")
    args = parser.parse_args(argv)
    if args.hosts < 1 or args.rounds < 1:
        parser.error("--hosts and --rounds must be at least 1")
    if args.baseline is None:
        summary.alternated({"this tree": lambda: per_report_us(args.hosts)}, args.rounds, "us CPU per report")
        return 0
    if not (args.baseline / "scheduler" / "fleet" / "host_manager.py").is_file():
        parser.error(f"--baseline {args.baseline} is not a Berth checkout")
    took = {"this tree": [], str(args.baseline): []}
    for _ in range(args.rounds):
        took["this tree"].append(_in_process_of(HERE, args.hosts))
        took[str(args.baseline)].append(_in_process_of(args.baseline, args.hosts))
    for name, values in took.items():
        q1, median, q3 = summary.quartiles(values)
        print(f"{name}: {median:.2f} us CPU per report (IQR {q1:.2f}-{q3:.2f}, {args.rounds} rounds)")
    ratios = [a / b for a, b in zip(*took.values(), strict=True)]
    q1, median, q3 = summary.quartiles(ratios)
    print(f"this tree / baseline, round by round: {median:.3f} (IQR {q1:.3f}-{q3:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
