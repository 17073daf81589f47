"""Instructions one placement decision takes, as callgrind counts them: nearly the same on a
busy machine as on a quiet one, where times are not (doc/source/contributor/performance.md,
"Comparing figures of different days").

    python -m benchmarks.decision_instructions [--hosts 1000] [--policy default]
        [--decisions 200] [--runs 3] [--tree DIR]

Each run counts this module twice under ``valgrind --tool=callgrind`` (PYTHONHASHSEED=0): once
making the warming decisions alone, once those and ``--decisions`` more, and prints the
difference over ``--decisions``: the decisions' instructions without the start-up's. The
fleet's clock stands still meanwhile (under callgrind a run lasts seconds enough to take some
hosts for down, differently each run), and OpenBLAS keeps to one thread. ``--tree`` counts the
code of another checkout (a ``git worktree`` of the code before a change) with this module, so
that two codes are compared run by run. At 1,000 hosts two runs of a code agree within 0.01 %.
Needs valgrind.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchmarks import decisions

_TOTAL = re.compile(rb"^(?:totals|summary):\s+(\d+)", re.MULTILINE)


#: What callgrind runs: the warming decisions and ``count`` more, with this checkout's way of
#: making them (loaded from its path) and the scheduler of the tree counted.
_CHILD = """
import importlib.util, sys
path, n_hosts, policy, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = importlib.util.spec_from_file_location("counted_decisions", path)
decisions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decisions)
selector, table, specs = decisions.prepared(n_hosts, policy, count)
now = table.clock()
table.clock = lambda: now  # under callgrind the seconds pass that would take hosts for down
for request in specs:
    decisions._decide(selector, table, request)
"""


def _instructions(tree, n_hosts, policy, count):
    with tempfile.TemporaryDirectory(prefix="berth-callgrind-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        # OpenBLAS's idle threads spin a while, as many instructions as the scheduling of the run.
        env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   sys.executable, "-c", _CHILD, decisions.__file__, str(n_hosts), policy, str(count)]
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True)
        if done.returncode:
            raise SystemExit(f"callgrind failed ({done.returncode}): "
                             f"{done.stderr.decode(errors='replace')[-2000:]}")
        with open(out, "rb") as counted:
            found = _TOTAL.search(counted.read())
        if found is None:
            raise SystemExit(f"no total of instructions in {out}")
        return int(found.group(1))


def per_decision(tree, n_hosts, policy, count):
    """Instructions a decision of ``policy`` at ``n_hosts`` takes, with the code of ``tree``."""
    return (_instructions(tree, n_hosts, policy, count) - _instructions(tree, n_hosts, policy, 0)) / count


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decision_instructions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--policy", choices=sorted(decisions.POLICIES), default="default")
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", help="also count the code of this checkout, run by run")
    args = parser.parse_args(argv)
    if args.decisions < 1 or args.runs < 1 or args.hosts < 1:
        parser.error("--hosts, --decisions and --runs must be at least 1")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("this", here)] + ([(args.tree, os.path.abspath(args.tree))] if args.tree else [])
    counted = {name: [] for name, _ in trees}
    for run in range(args.runs):
        for name, tree in trees:
            counted[name].append(per_decision(tree, args.hosts, args.policy, args.decisions))
            print(f"run {run + 1}: {name}: {counted[name][-1]:,.0f} instructions a decision", flush=True)
    for name, values in counted.items():
        print(f"{name}: {statistics.median(values):,.0f} instructions a decision "
              f"({min(values):,.0f}-{max(values):,.0f}, {len(values)} runs, {args.hosts:,} hosts, "
              f"{args.policy} policy)")
    if args.tree:
        this, other = (statistics.median(counted[name]) for name, _ in trees)
        print(f"this over {args.tree}: {this / other:.3f}")


if __name__ == "__main__":
    main()
