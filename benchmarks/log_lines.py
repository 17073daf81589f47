"""The scheduler's INFO line per placement through oslo.log's ContextFormatter and through
Berth's LineFormatter, alternated in one process: CPU per line, each inside a request of its
own and written to a log file, as berth-scheduler logs.

``python -m benchmarks.log_lines [--lines N] [--rounds R]``
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time

from oslo_log import formatters

from scheduler import conf as berth_conf
from scheduler.planning.applier import log_decision
from scheduler.process import startup
from scheduler.rpc import context as rpc_context
from scheduler.utils.log_lines import LineFormatter


def measure(lines=5000, rounds=15):
    """{formatter name: [microseconds of CPU per line, one per round]}."""
    with tempfile.TemporaryDirectory(prefix="berth-log-lines-") as tmp:
        conf = berth_conf.new_conf()
        conf(["--log-file", os.path.join(tmp, "berth-scheduler.log")], project="berth",
             default_config_files=[])
        root = logging.getLogger()
        saved = list(root.handlers)
        startup.setup_logging(conf, "berth-scheduler")
        try:
            [handler] = root.handlers
            made = {"project": "berth-scheduler", "version": "bench", "datefmt": conf.log_date_format,
                    "config": conf}
            kinds = {"ContextFormatter": formatters.ContextFormatter(**made),
                     "LineFormatter": LineFormatter(**made)}
            spent = {name: [] for name in kinds}
            for _ in range(rounds):
                for name, formatter in kinds.items():
                    handler.setFormatter(formatter)
                    contexts = [rpc_context.Context({"request_id": rpc_context.new_request_id(),
                                                     "project_id": "p1"}) for _ in range(lines)]
                    for context in contexts:  # each request made current once before, as the server does
                        with rpc_context.handling(context):
                            pass
                    start = time.process_time()
                    for number, context in enumerate(contexts):
                        with rpc_context.handling(context):
                            log_decision(f"0c3c8c4e-1f0a-4a47-9a6f-{number:012d}", "sim-000042", None)
                    spent[name].append((time.process_time() - start) / lines * 1e6)
        finally:
            for handler in root.handlers:
                handler.close()
            root.handlers[:] = saved
    return spent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000, help="lines per round and formatter")
    parser.add_argument("--rounds", type=int, default=15, help="rounds, each formatter once per round")
    args = parser.parse_args(argv)
    for name, spent in measure(args.lines, args.rounds).items():
        low, _, high = statistics.quantiles(spent, n=4)
        print(f"{name}: median {statistics.median(spent):.1f} us of CPU per line (IQR {low:.1f}-{high:.1f}, "
              f"min-max {min(spent):.1f}-{max(spent):.1f}; {args.rounds} rounds of {args.lines})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
