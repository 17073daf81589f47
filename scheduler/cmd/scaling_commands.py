"""``berth scaling-group what-if FILE``: a scaling group's decision, computed locally.

The command needs neither the broker nor the database: it reads one JSON object
(a group spec, its members' samples and its history), runs the same policy the
scaling controller runs (scheduler.scaling.decide) and prints the decision as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from scheduler.scaling import decide, spec

#: Exit status of a bad input file (as argparse's for a bad command line).
BAD_INPUT = 2
PREFIX = "berth scaling-group what-if"

WHAT_IF_HELP = """\
Print, as one JSON object, what a scaling group would do in one sync, without a broker
or a database. FILE (or - for stdin) holds one JSON object:

  {"spec": {"min": 1, "max": 10,
            "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]},
   "current": 3,
   "members": [{"state": "ACTIVE", "requests": {"cpu": 2}, "usage": {"cpu": 1.5}}],
   "recommendations": [{"age_s": 120, "replicas": 4}],
   "scale_events": [{"age_s": 30, "change": 2}]}

Metric types: resource (cpu or memory: target_utilization in percent of the flavor's
vCPUs or RAM, or target_average), instance (target_average per member), external
(target_value, or target_average per member; its value under "external").
Spec defaults: min 1, metrics cpu at 80 %, tolerance 0.1, Kubernetes' behavior.
Members: state (SCHEDULING, SCHEDULED, BUILDING, ACTIVE, ERROR, DELETING), ready,
requests (cpu in vCPUs, memory in MB), usage (a metric left out: no sample), and for
the cpu readiness rules started_s_ago, ready_since_s_ago, sample_s_ago, sample_window_s.
History: "recommendations" ({age_s, replicas}; left out: the group's first sync) and
"scale_events" ({age_s, change}, change > 0 up, < 0 down). Ages are seconds before now.
Controller settings: cpu_initialization_period_s (300), initial_readiness_delay_s (30).

The output: {"desired", "metrics": [{"name", "type", "current", "proposal"}],
"limited_by", "conditions", "record"}. A bad file: one line on stderr, exit status 2.
"""


def add_commands(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "scaling-group", help="Autoscaling groups: try a group's scaling decision on given samples.",
        description="Autoscaling groups keep their member count where their metrics want it "
        "(Kubernetes' HorizontalPodAutoscaler algorithm).")
    actions = group.add_subparsers(dest="scaling_group_action", metavar="ACTION")
    actions.required = True
    what_if = actions.add_parser(
        "what-if", help="Compute one sync's decision from a JSON file, locally (no broker, no database).",
        description=WHAT_IF_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    what_if.add_argument("what_if_file", metavar="FILE", help="the JSON input, or - for stdin")
    what_if.set_defaults(func=what_if_command, offline=True)


def read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def what_if(text: str) -> dict[str, object]:
    """The what-if output for the input ``text``; raises spec.SpecError for a bad input."""
    return decide.to_json(decide.decide_what_if(spec.parse_what_if(spec.loads(text))))


def what_if_command(client: object, args: Any, out: TextIO) -> int:
    try:
        text = read_input(args.what_if_file)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{PREFIX}: {args.what_if_file}: {reason}", file=sys.stderr)
        return BAD_INPUT
    try:
        result = what_if(text)
    except spec.SpecError as exc:
        print(f"{PREFIX}: {exc}", file=sys.stderr)
        return BAD_INPUT
    print(json.dumps(result), file=out)
    return 0
