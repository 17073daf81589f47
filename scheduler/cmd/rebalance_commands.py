"""``berth rebalance plan|show|list|apply|stop``: plans of migrations, saved with an id.

``plan`` asks the scheduler to plan a goal on its fleet as it is now (the enabled filters decide
every destination) and prints the saved plan; ``apply`` starts a job the schedulers carry on and
watches it (:class:`scheduler.cmd.rebalancing.Apply`).
The goals, their flags and which option goes with which goal come from the installed rebalance
goals' schemas (scheduler.moves.goals): their modules import nothing of the planner,
which would cost every command its start-up.
"""

from scheduler import rpc
from scheduler.cmd import output
from scheduler.cmd.arguments import CommandError, Interrupted, actions, positive
from scheduler.cmd.instance_commands import named_flavor
from scheduler.cmd.rebalancing import Apply
from scheduler.moves import goals as rebalance_goals

#: NAME comes last, as in ``berth server list``: scripts read the others by position.
STEP_COLUMNS = ["STEP", "INSTANCE", "SOURCE", "DEST", "MEMORY_MB", "STATUS", "MIGRATION", "REASON", "NAME"]
PLAN_COLUMNS = ["ID", "GOAL", "STATE", "STEPS", "CREATED", "REASON"]


def _flag(goal):
    return "--" + goal.replace("_", "-")


def _goals():
    """The installed goals, those whose flag takes a value (their required option) first."""
    found = rebalance_goals.goals()
    return sorted(found.values(), key=lambda cls: cls.argument() is None)


def _options():
    """{option name: (the option, [the goals that take it])} of the goals' options but their
    arguments, each once, in the order of the goals."""
    found = {}
    for cls in _goals():
        for option in cls.schema:
            if option is not cls.argument():
                found.setdefault(option.name, (option, []))[1].append(cls.name)
    return found


def _sent_always(option):
    """A choice goes with its default to its goal's plans and is ignored with another goal's."""
    return option.type == rebalance_goals.CHOICE


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise CommandError(f"--time-limit: {text!r} is not a number of seconds") from None
    if not 0 < value <= rebalance_goals.MAX_TIME_LIMIT:
        raise CommandError(f"--time-limit: give more than 0 and at most {rebalance_goals.MAX_TIME_LIMIT:g} "
                           f"seconds, got {text}")
    return value


def _type(option):
    if option.type == rebalance_goals.INT:
        return positive if option.minimum == 1 else int
    return float if option.type == rebalance_goals.FLOAT else str


def add_commands(subparsers):
    found = actions(subparsers, "rebalance", "Plans of migrations that make room or rebalance the fleet: "
                    "plan, show, list, apply, stop.", "action")
    plan = found.add_parser("plan", help="Plan the fewest migrations toward a goal on the fleet as it is "
                            "now, save the plan and print it.")
    goal = plan.add_mutually_exclusive_group(required=True)
    for cls in _goals():
        argument = cls.argument()
        if argument is None:
            goal.add_argument(_flag(cls.name), dest=cls.name, action="store_true", help=cls.summary)
        else:
            goal.add_argument(_flag(cls.name), dest=cls.name, metavar=argument.metavar, help=cls.summary)
    options = _options()
    for option, owners in options.values():
        if not _sent_always(option):
            plan.add_argument(option.cli_flag, dest=option.name, type=_type(option), metavar=option.metavar,
                              help=f"with {' or '.join(map(_flag, owners))}: {option.help}")
    plan.add_argument("--time-limit", type=str, default="1", metavar="S",
                      help="seconds the planner may take (default 1): past it, the best plan found")
    for option, _ in options.values():
        if _sent_always(option):
            plan.add_argument(option.cli_flag, dest=option.name, choices=option.choices,
                              default=option.default, help=option.help)
    output.add_options(plan)
    plan.set_defaults(func=plan_command)

    show = found.add_parser("show", help="A plan and how far applying it went, step by step.")
    show.add_argument("plan_id", type=positive, metavar="PLAN_ID")
    output.add_options(show)
    show.set_defaults(func=show_command)

    listing = found.add_parser("list", help="Saved plans, newest first.")
    output.add_options(listing)
    listing.set_defaults(func=list_command)

    apply = found.add_parser("apply", help="Start the plan's steps (live migrations to the planned hosts), "
                             "each checked first; stop at the first step refused, saying why. The "
                             "schedulers carry the plan on: Ctrl-C leaves it be.")
    apply.add_argument("plan_id", type=positive, metavar="PLAN_ID")
    apply.add_argument("--max-parallel", type=positive, default=2, metavar="N",
                       help="at most N steps under way at once (default 2)")
    apply.add_argument("--stop", action="store_true",
                       help="stop applying the plan, as berth rebalance stop does")
    apply.set_defaults(func=apply_command)

    stop = found.add_parser("stop", help="Start no more steps of the plan; those under way end on their own.")
    stop.add_argument("plan_id", type=positive, metavar="PLAN_ID")
    stop.set_defaults(func=stop_command)


def _call(client, method, **kwargs):
    try:
        return client.admin_call({}, method, **kwargs)
    except rpc.RPCVersionCapError as exc:
        raise CommandError(str(exc)) from None


def plan_command(client, args, out):
    goal, options = _goal_options(client, args)
    try:
        plan = _call(client, "plan_rebalance", goal=goal, options=options)
    except KeyboardInterrupt:  # the scheduler plans on (up to --time-limit) and saves what it found
        raise Interrupted("interrupted: the scheduler may still save the plan, which moves nothing until "
                          "applied: `berth rebalance list` shows it") from None
    print_plan(plan, args, out, planned=True)
    return 0


def _goal_options(client, args):
    """(goal, options) as the flags say: the options of the goal given (an option of another goal
    is refused, naming the goals it goes with, and the flags that go with exactly those goals)."""
    cls = next(cls for cls in _goals() if getattr(args, cls.name, None))
    options = {"time_limit": _seconds(args.time_limit)}
    argument = cls.argument()
    if argument is not None:
        value = getattr(args, cls.name)
        options[argument.name] = named_flavor(client, value) if argument.type == rebalance_goals.FLAVOR \
            else value
    taken = {o.name for o in cls.schema}
    known = _options()
    for name, (option, owners) in known.items():
        value = getattr(args, name)
        if name in taken and value is not None:
            options[name] = value
        elif value is not None and not _sent_always(option):
            flags = [o.cli_flag for o, them in known.values() if them == owners and not _sent_always(o)]
            raise CommandError(f"{' and '.join(flags)} {'goes' if len(flags) == 1 else 'go'} with "
                               f"{' or '.join(map(_flag, owners))}, not {_flag(cls.name)}")
    return cls.name, options


def show_command(client, args, out):
    print_plan(_call(client, "show_rebalance_plan", plan_id=args.plan_id), args, out)
    return 0


def list_command(client, args, out):
    plans = _call(client, "list_rebalance_plans")
    output.emit(args, PLAN_COLUMNS, [[p["id"], p["goal"], p["state"], p["step_count"], p["created_at"],
                                      p.get("reason")] for p in plans], out)
    return 0


def apply_command(client, args, out):
    if args.stop:
        return stop_command(client, args, out)
    try:
        return Apply(client, args.plan_id, out, max_parallel=args.max_parallel).run()
    except KeyboardInterrupt:  # before the job was asked for, or in the last listing
        raise Interrupted(f"interrupted: if rebalance plan {args.plan_id} is being applied, the scheduler "
                          f"carries it on: `berth rebalance show {args.plan_id}` shows it, `berth rebalance "
                          f"stop {args.plan_id}` stops it") from None


def stop_command(client, args, out):
    plan = _call(client, "stop_rebalance_plan", plan_id=args.plan_id)
    running = sum(s["status"] == "running" for s in plan["steps"])
    print(f"rebalance plan {plan['id']} {plan['state']}"
          + (f": {running} step(s) under way end on their own" if running else ""), file=out)
    return 0


def _step_rows(plan):
    return [[s["position"], s["instance_uuid"], s["source_host"], s["dest_host"], _number(s["memory_mb"]),
             s["status"], s.get("migration_id"), s.get("failure") if s["status"] == "failed" else s["reason"],
             s.get("display_name")]
            for s in plan["steps"]]


def _number(value):
    return int(value) if float(value).is_integer() else value


def _record(plan):
    summary = plan["summary"]
    return {"id": plan["id"], "goal": plan["goal"], "state": plan["state"], "reason": plan.get("reason"),
            "options": plan["options"], "method": summary.get("method"), "optimal": summary.get("optimal"),
            "note": summary.get("note"), "left": summary.get("left") or {},
            "before": summary.get("before"), "after": summary.get("after"),
            "reached": (plan.get("reached") or {}).get("summary"),
            "placements": summary.get("placements"),
            "steps": [dict(zip([c.lower() for c in STEP_COLUMNS], row, strict=True))
                      for row in _step_rows(plan)]}


#: The hosts a plan could not help that its text names; -f json lists every one.
LEFT_SHOWN = 10


def print_plan(plan, args, out, planned=False):
    """The plan: -f json|yaml one object; another -f its steps as a listing; else lines, the
    figures before and after, and its steps."""
    name = getattr(args, "output_format", None)
    if name in ("json", "yaml"):
        output.emit_one(args, _record(plan), out)
        return
    if output.wants_format(args):
        output.emit(args, STEP_COLUMNS, _step_rows(plan), out)
        return
    summary, options = plan["summary"], plan["options"]
    steps = plan["steps"]
    goal = rebalance_goals.goal(plan["goal"])
    what = goal.describe(options) if goal is not None else plan["goal"]
    moved = sum(s["memory_mb"] for s in steps)
    method = summary.get("method") + (" (proven fewest)" if summary.get("optimal") else "")
    print(f"rebalance plan {plan['id']}: {what}: {len(steps)} migration(s), {moved:g} MB moved; {method}; "
          f"{plan['state']}" + (f" ({plan['reason']})" if plan.get("reason") else ""), file=out)
    if summary.get("note"):
        print(f"note: {summary['note']}", file=out)
    for host, why in sorted((summary.get("left") or {}).items())[:LEFT_SHOWN]:
        print(f"not helped: {host}: {why}", file=out)
    if len(summary.get("left") or {}) > LEFT_SHOWN:
        print(f"not helped: {len(summary['left']) - LEFT_SHOWN} more host(s) (-f json lists them)", file=out)
    reached = plan.get("reached")
    if reached:  # applied, or under way: what it predicted beside what the fleet shows now
        now = dict(reached["figures"])
        rows = [[name, before, after, now.get(name, "-")]
                for name, before, after in summary.get("figures") or []]
        output.print_columns(["FIGURE", "BEFORE", "PLANNED", "NOW"], rows, out)
    else:
        output.print_columns(["FIGURE", "BEFORE", "AFTER"], summary.get("figures") or [], out)
    if steps:
        print(file=out)
        output.print_columns(STEP_COLUMNS, _step_rows(plan), out)
    if summary.get("placements"):
        print(f"then the new instance(s) fit on: {', '.join(summary['placements'])}", file=out)
    if planned and steps:
        print(f"apply it: berth rebalance apply {plan['id']}", file=out)

