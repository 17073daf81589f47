"""``berth scaling group ...``: autoscaling groups.

``create``, ``list``, ``show``, ``set``, ``pause``, ``resume`` and ``delete`` are each
one RPC call to the scheduler (scheduler.scaling.api.ScalingGroupEndpoint), after those
that find a server group or instances named by name; the scheduler checks the whole
request and changes nothing when any part of it is wrong.

``what-if FILE`` needs neither the broker nor the database: it reads one JSON object
(a group spec, its members' samples and its history), runs the same policy the
scaling controller runs (scheduler.scaling.decide) and prints the decision as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TextIO

from scheduler import states
from scheduler.cmd import arguments, output
from scheduler.cmd.arguments import CommandError, UsageError, hint, positive, whole
from scheduler.cmd.references import group_uuid, hinted_instance
from scheduler.scaling import decide, spec
from scheduler.scaling.members import COUNTED_STATES

#: Exit status of a bad input file (as argparse's for a bad command line).
BAD_INPUT = 2
PREFIX = "berth scaling group what-if"

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
    actions = arguments.actions(
        subparsers, "scaling-group", "Autoscaling groups: create, list, show, set, pause, resume, delete; "
        "what-if tries a decision locally.", "scaling_group_action",
        description="Autoscaling groups keep their member count where their metrics want it "
        "(Kubernetes' HorizontalPodAutoscaler algorithm).")
    add_group_commands(actions)
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


# -- the groups: create, list, show, set, pause, resume, delete -------------------------------------

NONE = "-"
UNKNOWN = "<unknown>"
INITIALIZING = "<initializing>"
CREATE_HELP = """\
Create a scaling group and print its UUID. Its members are booted as --flavor (or
--flavor-ram/--flavor-vcpus/--flavor-disk) with the zone, server group and hints given,
and named NAME-1, NAME-2...; the scaling controller creates them at its next sync.

Metrics (repeat for several; the largest count any of them asks for wins; none: cpu at 80 %):
  --cpu PERCENT, --memory PERCENT      utilization, in percent of the flavor's vCPUs / RAM
  --metric instance:NAME=AVERAGE       a metric each member reports, its average per member
  --metric external:NAME=value:V       one value for the group (e.g. queue:jobs, a queue's depth)
  --metric external:NAME=average:V     one value for the group, per member
  --metric resource:cpu|memory=utilization:PERCENT|average:V

--spec FILE reads a whole spec (as `what-if` takes it); the options given with it override
its parts: --min, --max, --tolerance, --behavior replace those keys, and any metric option
replaces its metrics list.
"""
SET_HELP = """\
Change a scaling group: any metric option (--cpu, --memory, --metric) replaces its whole
metrics list; the spec is checked whole again, and nothing changes when any part is wrong.
--desired sets the count now (the metrics may change it again at the next sync);
--desired 0 while min is above 0 pauses the group, as in Kubernetes (`resume` starts it again).
"""


def _whole(text: str) -> int:
    """A whole number of at least 0."""
    return int(whole(text))


def _decimal(text: str, what: str = "a number", above_zero: bool = False) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not value.is_finite() or value < 0 or (above_zero and value == 0):
        bound = "above 0" if above_zero else ">= 0"
        raise argparse.ArgumentTypeError(f"must be a number {bound}, got {text!r}")
    return value


def _tolerance(text: str) -> Decimal:
    return _decimal(text)


def _wire(value: Decimal | int) -> int | float:
    """A number as JSON carries it (the scheduler reads a float back as the decimal it prints)."""
    if isinstance(value, int) or value == value.to_integral_value():
        return int(value)
    return float(value)


def _utilization(resource: str) -> Any:
    def parse(text: str) -> dict[str, Any]:
        return {"type": spec.RESOURCE, "name": resource, "target_utilization": positive(text)}
    parse.__name__ = f"{resource} percent"
    return parse


_TARGET_KINDS = {spec.RESOURCE: ("utilization", "average"), spec.INSTANCE: ("average",),
                 spec.EXTERNAL: ("value", "average")}


def _metric(text: str) -> dict[str, Any]:
    """``TYPE:NAME=[KIND:]TARGET`` (see CREATE_HELP) as a spec's metric."""
    kind, _, rest = text.partition(":")
    name, sep, target = rest.rpartition("=")
    if kind not in _TARGET_KINDS or not sep or not name:
        raise argparse.ArgumentTypeError(
            f"a metric is instance:NAME=AVERAGE, external:NAME=value:V, external:NAME=average:V or "
            f"resource:cpu|memory=utilization:PERCENT|average:V, got {text!r}")
    allowed = _TARGET_KINDS[kind]
    which, colon, number = target.partition(":")
    if not colon:
        if len(allowed) > 1:
            raise argparse.ArgumentTypeError(
                f"{text!r}: say which target, {' or '.join(f'{kind}:{name}={a}:N' for a in allowed)}")
        which, number = allowed[0], target
    if which not in allowed:
        raise argparse.ArgumentTypeError(f"{text!r}: a {kind} metric's target is {' or '.join(allowed)}, "
                                         f"got {which!r}")
    if kind == spec.RESOURCE and name not in spec.RESOURCES:
        raise argparse.ArgumentTypeError(f"{text!r}: a resource metric is cpu or memory, got {name!r}")
    if which == "utilization":
        return {"type": kind, "name": name, "target_utilization": positive(number)}
    return {"type": kind, "name": name, f"target_{which}": _wire(_decimal(number, above_zero=True))}


def _add_spec_options(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--min", dest="scaling_min", type=_whole, metavar="N",
                        help="the fewest members" + (" (default 1)" if creating else ""))
    parser.add_argument("--max", dest="scaling_max", type=positive, metavar="N",
                        help="the most members" + (" (required, unless --spec gives it)" if creating else ""))
    parser.add_argument("--desired", dest="scaling_desired", type=_whole, metavar="N",
                        help="the members to start with (default: min)" if creating else
                        "set the desired count now (0 while min is above 0: pause)")
    parser.add_argument("--cpu", dest="scaling_metrics", action="append", type=_utilization("cpu"),
                        metavar="PERCENT", help="cpu utilization target, in percent of the flavor's vCPUs")
    parser.add_argument("--memory", dest="scaling_metrics", action="append", type=_utilization("memory"),
                        metavar="PERCENT", help="memory utilization target, in percent of the flavor's RAM")
    parser.add_argument("--metric", dest="scaling_metrics", action="append", type=_metric, metavar="METRIC",
                        help="instance:NAME=AVERAGE, external:NAME=value:V or external:NAME=average:V "
                        "(repeat for several)")
    parser.add_argument("--tolerance", dest="scaling_tolerance", type=_tolerance, metavar="X",
                        help="no scaling while a metric is within this ratio of its target (default 0.1)")
    parser.add_argument("--behavior", dest="scaling_behavior", metavar="FILE",
                        help="a JSON file (or -) of the behavior object: scale_up and scale_down, "
                        "as `what-if` takes it")


def add_group_commands(actions: Any) -> None:
    # oslo.config's sub-command keeps "name" for the command itself: no dest may be "name".
    create = actions.add_parser("create", help="Create a scaling group and print it, as show does.",
                                description=CREATE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    create.add_argument("scaling_group_name", metavar="NAME",
                        help="the group's name; its members are NAME-1, NAME-2...")
    create.add_argument("--flavor", dest="scaling_flavor", metavar="FLAVOR", help="the members' named flavor")
    create.add_argument("--flavor-ram", dest="scaling_ram", type=positive, metavar="MB",
                        help="memory of an unnamed flavor")
    create.add_argument("--flavor-vcpus", dest="scaling_vcpus", type=positive, metavar="N",
                        help="vCPUs of an unnamed flavor")
    create.add_argument("--flavor-disk", dest="scaling_disk", type=_whole, metavar="GB", help="root disk")
    _add_spec_options(create, creating=True)
    create.add_argument("--image", dest="scaling_image", metavar="IMAGE",
                        help="the image each member boots (as berth server create --image); none: the "
                        "agents' default ([qemu] default_image)")
    create.add_argument("--server-group", dest="scaling_server_group", metavar="GROUP",
                        help="the members' server group: a UUID, or the name of exactly one")
    create.add_argument("--availability-zone", dest="scaling_zone", metavar="AZ",
                        help="only hosts of this availability zone")
    create.add_argument("--hint", dest="scaling_hints", type=hint, action="append", default=[],
                        metavar="KEY=VALUE", help="a scheduler hint for each member (same_host=UUID or NAME, "
                        "query=JSON, ...); repeat for several, a repeated key makes a list")
    create.add_argument("--spec", dest="scaling_spec", metavar="FILE",
                        help="a JSON file (or -) of a whole spec, as `what-if` takes it; options override "
                        "its parts")
    create.add_argument("--project", dest="scaling_project", default="admin",
                        help="the project of the members (default admin)")
    output.add_options(create)
    create.set_defaults(func=create_command)

    listing = actions.add_parser("list", help="Every scaling group: state, targets, member counts.")
    output.add_options(listing)
    listing.set_defaults(func=list_command)

    show = actions.add_parser("show", help="One scaling group, as `kubectl describe hpa` shows one: "
                              "metrics, conditions, events, members.")
    show.add_argument("scaling_group_reference", metavar="GROUP", help="the group's name or UUID")
    output.add_options(show)
    show.set_defaults(func=show_command)

    change = actions.add_parser("set", help="Change a scaling group's min, max, desired count, metrics, "
                                "tolerance or behavior.", description=SET_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    change.add_argument("scaling_group_reference", metavar="GROUP", help="the group's name or UUID")
    _add_spec_options(change, creating=False)
    change.set_defaults(func=set_command)

    for verb, func, text in (
            ("pause", pause_command, "Pause a scaling group: its members are left as they are."),
            ("resume", resume_command, "Resume a paused scaling group."),
            ("delete", delete_command, "Delete a scaling group: its members, then the group.")):
        parser = actions.add_parser(verb, help=text)
        parser.add_argument("scaling_group_reference", metavar="GROUP", help="the group's name or UUID")
        parser.set_defaults(func=func)


def _json_file(path: str, option: str) -> dict[str, Any]:
    try:
        text = read_input(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CommandError(f"{option} {path}: {reason}") from None
    try:
        value = spec.loads(text)
    except spec.SpecError as exc:
        raise CommandError(f"{option} {path}: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError(f"{option} {path}: must hold one JSON object")
    return value


def _to_wire(value: Any) -> Any:
    """What spec.loads read, with its decimals as JSON numbers."""
    if isinstance(value, dict):
        return {key: _to_wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_wire(item) for item in value]
    if isinstance(value, Decimal):
        return _wire(value)
    return value


def _spec_changes(args: Any) -> dict[str, Any]:
    """The spec's parts the options give: min, max, metrics, tolerance, behavior."""
    found: dict[str, Any] = {}
    if args.scaling_min is not None:
        found["min"] = args.scaling_min
    if args.scaling_max is not None:
        found["max"] = args.scaling_max
    if args.scaling_metrics:
        found["metrics"] = list(args.scaling_metrics)
    if args.scaling_tolerance is not None:
        found["tolerance"] = _wire(args.scaling_tolerance)
    if args.scaling_behavior is not None:
        found["behavior"] = _to_wire(_json_file(args.scaling_behavior, "--behavior"))
    return found


def _template(client: Any, args: Any) -> dict[str, Any]:
    sizes = (args.scaling_ram, args.scaling_vcpus, args.scaling_disk)
    template: dict[str, Any] = {}
    if args.scaling_flavor:
        if any(size is not None for size in sizes):
            raise UsageError("give either --flavor or --flavor-ram/--flavor-vcpus/--flavor-disk")
        template["flavor_name"] = args.scaling_flavor
    elif args.scaling_ram is None or args.scaling_vcpus is None:
        raise UsageError("give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)")
    else:
        template.update(memory_mb=args.scaling_ram, vcpus=args.scaling_vcpus, root_gb=args.scaling_disk or 0)
    if args.scaling_image is not None:
        template["image"] = args.scaling_image
    if args.scaling_zone:
        template["availability_zone"] = args.scaling_zone
    if args.scaling_server_group:
        template["server_group_uuid"] = group_uuid(client, args.scaling_server_group)
    hints: dict[str, Any] = {}
    for key, value in args.scaling_hints:
        if key in ("same_host", "different_host"):
            value = hinted_instance(client, key, value)
        if key in hints:
            previous = hints[key]
            hints[key] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            hints[key] = value
    if hints:
        template["scheduler_hints"] = hints
    return template


def create_command(client: Any, args: Any, out: TextIO) -> int:
    data = _to_wire(_json_file(args.scaling_spec, "--spec")) if args.scaling_spec else {}
    data.update(_spec_changes(args))
    if "max" not in data:
        raise UsageError("give --max N (or a --spec file that holds max)")
    template = _template(client, args)
    group = client.admin_call({}, "create_scaling_group", name=args.scaling_group_name, spec=data,
                              template=template, desired=args.scaling_desired,
                              project_id=args.scaling_project)
    if group.get("warning"):
        print(f"berth: warning: {group['warning']}", file=sys.stderr)
    print_group(client.admin_call({}, "show_scaling_group", name_or_uuid=group["uuid"]), args, out)
    return 0


def set_command(client: Any, args: Any, out: TextIO) -> int:
    changes = _spec_changes(args)
    if args.scaling_desired is not None:
        changes["desired"] = args.scaling_desired
    if not changes:
        raise CommandError("nothing to change: give --min, --max, --desired, --cpu, --memory, --metric, "
                           "--tolerance or --behavior")
    reply = client.admin_call({}, "update_scaling_group", name_or_uuid=args.scaling_group_reference,
                              changes=changes)
    print(reply["message"], file=out)
    return 0


def pause_command(client: Any, args: Any, out: TextIO) -> int:
    print(client.admin_call({}, "pause_scaling_group", name_or_uuid=args.scaling_group_reference)["message"],
          file=out)
    return 0


def resume_command(client: Any, args: Any, out: TextIO) -> int:
    print(client.admin_call({}, "resume_scaling_group", name_or_uuid=args.scaling_group_reference)["message"],
          file=out)
    return 0


def delete_command(client: Any, args: Any, out: TextIO) -> int:
    print(client.admin_call({}, "delete_scaling_group", name_or_uuid=args.scaling_group_reference)["message"],
          file=out)
    return 0


# -- how a group reads ------------------------------------------------------------------------------


def number(value: Any) -> str:
    """A JSON number as a person writes it: 90, 0.25, 1500000 (never 1.5e+06)."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return str(value)
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if exact == exact.to_integral_value():
        return str(int(exact))
    return format(exact.normalize(), "f")


_UNITS = {spec.CPU: " vCPU", "memory": " MB"}


def metric_target(metric: Mapping[str, Any]) -> tuple[str, str]:
    """(label, target) of a spec's metric, as `kubectl describe hpa` words them."""
    kind, name = metric.get("type"), metric.get("name")
    if kind == spec.RESOURCE:
        if metric.get("target_utilization") is not None:
            return (f"resource {name} on members (as a percentage of request)",
                    f"{number(metric['target_utilization'])}%")
        return f"resource {name} on members", number(metric.get("target_average")) + _UNITS.get(str(name), "")
    if kind == spec.INSTANCE:
        return f'"{name}" on members', number(metric.get("target_average"))
    if metric.get("target_value") is not None:
        return f'"{name}" (target value)', number(metric["target_value"])
    return f'"{name}" (target average value)', number(metric.get("target_average"))


def _current(metric: Mapping[str, Any], reading: Mapping[str, Any] | None) -> str:
    value = None if reading is None else reading.get("current")
    if value is None:
        return INITIALIZING if reading is not None and reading.get("initializing") else UNKNOWN
    if metric.get("type") == spec.RESOURCE:
        if metric.get("target_utilization") is not None:
            return f"{number(value)}%"
        return number(value) + _UNITS.get(str(metric.get("name")), "")
    return number(value)


def _spec_metrics(group: Mapping[str, Any]) -> list[dict[str, Any]]:
    metrics = (group.get("spec") or {}).get("metrics")
    if metrics is None:
        return [{"type": spec.RESOURCE, "name": spec.CPU, "target_utilization": spec.DEFAULT_CPU_UTILIZATION}]
    return [m for m in metrics if isinstance(m, dict)]


def metric_lines(group: Mapping[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """(label, current, target, why not read) of each metric of the group's spec, current
    as its last sync read it (unknown: not read, or never synced)."""
    readings = list(((group.get("status") or {}).get("metrics")) or [])
    lines = []
    for index, metric in enumerate(_spec_metrics(group)):
        reading = readings[index] if index < len(readings) else None
        if reading is not None and (reading.get("name"), reading.get("type")) != (metric.get("name"),
                                                                                  metric.get("type")):
            reading = None  # the spec changed since that sync
        label, target = metric_target(metric)
        error = None if reading is None or not reading.get("error") else str(reading["error"])
        lines.append((label, _current(metric, reading), target, error))
    return lines


def targets(group: Mapping[str, Any]) -> str:
    """The TARGETS column of `list`, as `kubectl get hpa` prints it: cpu: 90%/50%, ..."""
    found = []
    for metric, (_, current, target, _) in zip(_spec_metrics(group), metric_lines(group), strict=True):
        found.append(f"{metric.get('name')}: {current}/{target}")
    return ", ".join(found)


def counted(counts: Mapping[str, int]) -> int:
    """The members a group counts: all but those being deleted."""
    return sum(count for state, count in counts.items() if state in COUNTED_STATES)


def overdue_text(group: Mapping[str, Any]) -> str:
    """What show adds when a live group has not been synced for two sync periods: the
    controller has stopped, is not enabled anywhere, or fails on this group."""
    period = group.get("sync_period_s")
    status = group.get("status")
    since = (status or {}).get("synced_at") if status is not None else group.get("created_at")
    start, end = parse_time(since), parse_time(group.get("now"))
    if group.get("state") == "deleting" or not period or start is None or end is None:
        return ""
    if (end - start).total_seconds() <= 2 * float(period):
        return ""
    return (f"; OVERDUE: groups are synced every {number(period)} s: no scheduler with [scaling] "
            "enabled is running, or its syncs of this group fail (see the schedulers' logs)")


def state_text(group: Mapping[str, Any]) -> str:
    state = str(group.get("state") or NONE)
    if state == "active" and group.get("status") is None:
        return "never synced"
    return state


def _list_row(group: Mapping[str, Any]) -> list[Any]:
    group_spec = group.get("spec") or {}
    return [group["name"], group["uuid"], state_text(group), targets(group), group_spec.get("min", 1),
            group_spec.get("max"), group["desired"], counted(group.get("member_counts") or {})]


LIST_HEADERS = ["NAME", "UUID", "STATE", "TARGETS", "MIN", "MAX", "DESIRED", "CURRENT"]


def list_command(client: Any, args: Any, out: TextIO) -> int:
    output.emit(args, LIST_HEADERS, [_list_row(g) for g in client.admin_call({}, "list_scaling_groups")], out)
    return 0


def parse_time(value: Any) -> datetime | None:
    """A time of the reply (ISO 8601, with or without Z) as naive UTC; None if not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError:
        return None
    if found.tzinfo is not None:
        found = found.astimezone(UTC).replace(tzinfo=None)
    return found


def age(then: Any, now: Any) -> str:
    """How long before ``now`` ``then`` was, as kubectl words ages: 45s, 3m12s, 25m, 5h, 3d."""
    start, end = parse_time(then), parse_time(now)
    if start is None or end is None:
        return UNKNOWN
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def clock(value: Any) -> str:
    found = parse_time(value)
    return NONE if found is None else found.strftime("%Y-%m-%d %H:%M:%S")


def _when(value: Any, now: Any) -> str:
    shown = clock(value)
    return shown if shown == NONE else f"{shown} ({age(value, now)} ago)"


def template_text(template: Mapping[str, Any], server_group: Mapping[str, Any] | None = None) -> str:
    """What each member is booted as; ``server_group`` as show's reply describes it."""
    parts = []
    if template.get("flavor_name") and not template.get("memory_mb"):
        parts.append(f"flavor {template['flavor_name']}")
    else:
        parts.append(f"{template.get('memory_mb')} MB RAM, {template.get('vcpus')} vCPUs, "
                     f"{template.get('root_gb') or 0} GB disk")
    if template.get("image"):
        parts.append(f"image {template['image']}")
    if template.get("availability_zone"):
        parts.append(f"zone {template['availability_zone']}")
    if template.get("server_group_uuid"):
        uuid = template["server_group_uuid"]
        if server_group and server_group.get("missing"):
            parts.append(f"server group {uuid} (deleted: new members go to ERROR)")
        elif server_group and server_group.get("name"):
            parts.append(f"server group {server_group['name']} ({server_group.get('policy')}, {uuid})")
        else:
            parts.append(f"server group {uuid}")
    for key, value in sorted((template.get("scheduler_hints") or {}).items()):
        parts.append(f"hint {key}={json.dumps(value) if not isinstance(value, str) else value}")
    return ", ".join(parts)


def _counts_text(counts: Mapping[str, int]) -> str:
    order = {state: i for i, state in enumerate(states.ALL)}
    ordered = sorted(counts.items(), key=lambda item: order.get(item[0], len(order)))
    return ", ".join(f"{count} {state}" for state, count in ordered)


def event_message(event: Mapping[str, Any]) -> str:
    """The reason the controller recorded ("scaled from 3 to 5: cpu utilization ...")."""
    reason = str(event.get("reason") or "")
    if "from" in event and "to" in event and not reason.startswith("scaled from"):
        return f"scaled from {event['from']} to {event['to']}" + (f": {reason}" if reason else "")
    return reason or NONE


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, indent: str = "  ") -> None:
    """Columns under a header line and a line of dashes, as `kubectl describe` prints them."""
    cells = [[NONE if c in (None, "") else str(c) for c in row] for row in rows]
    lines = [list(headers), ["-" * len(h) for h in headers], *cells]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    for line in lines:
        print(indent + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip(), file=out)


def describe(group: Mapping[str, Any], out: TextIO) -> None:
    """The group as `kubectl describe hpa` prints one."""
    now = group.get("now")
    status = group.get("status")
    group_spec = group.get("spec") or {}
    counts = group.get("member_counts") or {}
    state = state_text(group)
    overdue = overdue_text(group)
    if state == "deleting":
        state += ": the controller deletes its members, then the group"
    elif state == "never synced":
        state += ": no scaling controller has synced the group yet" + overdue
    fields: list[tuple[str, str]] = [
        ("Name:", group["name"]), ("UUID:", group["uuid"]), ("Project:", group.get("project_id") or NONE),
        ("State:", state), ("Created:", _when(group.get("created_at"), now)),
        ("Template:", template_text(group.get("template") or {}, group.get("server_group"))),
        ("Metrics:", "( current / target )"),
    ]
    fields += [(f"  {label}:", f"{current} / {target}" + (f" ({error})" if error else ""))
               for label, current, target, error in metric_lines(group)]
    fields += [("Min members:", str(group_spec.get("min", 1))), ("Max members:", str(group_spec.get("max"))),
               ("Tolerance:", number(group_spec.get("tolerance", spec.DEFAULT_TOLERANCE)))]
    if group_spec.get("behavior"):
        fields.append(("Behavior:", json.dumps(group_spec["behavior"], sort_keys=True)))
    members = f"{counted(counts)} current / {group['desired']} desired"
    fields.append(("Members:", members + (f" ({_counts_text(counts)})" if counts else "")))
    if status is not None:
        fields.append(("Last sync:", _when(status.get("synced_at"), now) + overdue))
        if status.get("limited_by"):
            fields.append(("Limited by:", status["limited_by"]))
        pending = status.get("pending") or {}
        if pending.get("count"):
            fields.append(("Members to create:",
                           f"{pending['count']} more, at later syncs: {pending.get('reason')}"))
        replacing = status.get("replacing") or {}
        if replacing.get("failures"):
            fields.append(("Replacing ERROR members:", f"{replacing['failures']} time(s) in a row; next not "
                           f"before {_when(replacing.get('next_at'), now)}"))
        for key, label in (("error", "Spec error:"), ("template_error", "Template error:")):
            if status.get(key):
                fields.append((label, str(status[key])))
    if group.get("lease_owner"):
        lease = clock(group.get("lease_expires_at"))
        fields.append(("Controller:", f"{group['lease_owner']} (lease until {lease})"))
    width = max(len(label) for label, _ in fields) + 2
    for label, value in fields:
        print(f"{label.ljust(width)}{value}".rstrip(), file=out)
    conditions = (status or {}).get("conditions") or []
    if conditions:
        print("Conditions:", file=out)
        _table(["Type", "Status", "Reason", "Message"],
               [[c.get("type"), c.get("status"), c.get("reason"), c.get("message")] for c in conditions], out)
    else:
        print("Conditions:".ljust(width) + "<none>", file=out)
    events = (status or {}).get("events") or []
    if events:
        print("Events:", file=out)
        _table(["Age", "Change", "Message"],
               [[age(e.get("at"), now), f"{e['change']:+d}" if isinstance(e.get("change"), int) else NONE,
                 event_message(e)] for e in events], out)
    else:
        print("Events:".ljust(width) + "<none>", file=out)
    _describe_members(group.get("members") or [], width, out)


def _describe_members(members: Sequence[Mapping[str, Any]], width: int, out: TextIO) -> None:
    """The members table; with a Fault column when one has a fault (why it is in ERROR)."""
    if not members:
        print("Member instances:".ljust(width) + "<none>", file=out)
        return
    rows = [[m["uuid"], m.get("name"), m["state"], m.get("host"), clock(m.get("created_at"))]
            for m in members]
    faults = any(m.get("fault_reason") for m in members)
    if faults:
        for row, member in zip(rows, members, strict=True):
            row.append(_short(member.get("fault_reason")))
    print("Member instances:", file=out)
    _table(["UUID", "Name", "State", "Host", "Created", *(["Fault"] if faults else [])], rows, out)


#: How much of a member's fault reason the members table shows.
FAULT_SHOWN = 80


def _short(text: str | None) -> str:
    if not text:
        return NONE
    return text if len(text) <= FAULT_SHOWN else text[:FAULT_SHOWN - 3] + "..."


def show_command(client: Any, args: Any, out: TextIO) -> int:
    print_group(client.admin_call({}, "show_scaling_group", name_or_uuid=args.scaling_group_reference), args,
                out)
    return 0


def print_group(group: Mapping[str, Any], args: Any, out: TextIO) -> None:
    """The group as `kubectl describe hpa` prints one; with -f or -c, one object of its fields (its
    members a list of their UUIDs)."""
    if not output.wants_format(args):
        describe(group, out)
        return
    output.emit_one(args, record(group), out, text={"members": "\n".join})


def record(group: Mapping[str, Any]) -> dict[str, Any]:
    """{field: value} of ``scaling-group show -f``: the listing's columns, then the group's own."""
    status = group.get("status") or {}
    return dict(zip([_key(h) for h in LIST_HEADERS], _list_row(group), strict=True),
                project=group.get("project_id"), limited_by=status.get("limited_by"),
                last_sync=status.get("synced_at"), created=group.get("created_at"),
                members=[m["uuid"] for m in group.get("members") or []])


def _key(header: str) -> str:
    return header.lower().replace(" ", "_")
