"""``berth rebalance plan|show|list|apply|stop``: plans of migrations, saved with an id.

``plan`` asks the scheduler to plan a goal on its fleet as it is now (the enabled filters decide
every destination) and prints the saved plan; ``apply`` starts a job the schedulers carry on and
watches it (:class:`scheduler.cmd.rebalancing.Apply`).
Each goal is a name of scheduler.policy.rebalance.goals.GOALS on the scheduler, and a flag here
(GOAL_FLAGS); nothing of the planner is imported here, which would cost every command its start-up.
"""

from scheduler import rpc
from scheduler.cmd import output
from scheduler.cmd.arguments import CommandError, actions, positive
from scheduler.cmd.instance_commands import named_flavor
from scheduler.cmd.rebalancing import Apply

STEP_COLUMNS = ["STEP", "INSTANCE", "SOURCE", "DEST", "MEMORY_MB", "STATUS", "MIGRATION", "REASON"]
PLAN_COLUMNS = ["ID", "GOAL", "STATE", "STEPS", "CREATED", "REASON"]
MAKE_ROOM = "make_room"
METHODS = ("auto", "greedy", "exact")
#: The goals ``plan`` takes besides --make-room: {flag: (goal, help)}.
GOAL_FLAGS: dict[str, tuple[str, str]] = {
    "balance": ("balance", "lower the skew of the hosts' measured load (max / mean) with at most "
                "--max-migrations migrations, down to --target"),
    "consolidate": ("consolidate", "empty as many hosts as --max-migrations migrations allow, each "
                    "destination keeping --headroom free"),
}
#: The options of the goals but make_room: {option: the goal that takes it (None: both)}.
GOAL_OPTIONS = {"target_skew": "balance", "headroom": "consolidate", "max_migrations": None}


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise CommandError(f"--time-limit: {text!r} is not a number of seconds") from None
    if not 0 < value <= 600:
        raise CommandError(f"--time-limit: give more than 0 and at most 600 seconds, got {text}")
    return value


def add_commands(subparsers):
    found = actions(subparsers, "rebalance", "Plans of migrations that make room or rebalance the fleet: "
                    "plan, show, list, apply, stop.", "action")
    plan = found.add_parser("plan", help="Plan the fewest migrations toward a goal on the fleet as it is "
                            "now, save the plan and print it.")
    goal = plan.add_mutually_exclusive_group(required=True)
    goal.add_argument("--make-room", metavar="FLAVOR",
                      help="room for --count instances of FLAVOR (a flavor the scheduler keeps)")
    for flag, (name, help_text) in GOAL_FLAGS.items():
        goal.add_argument(f"--{flag}", dest=name, action="store_true", help=help_text)
    plan.add_argument("--count", type=positive, default=1, metavar="N", help="with --make-room: N instances "
                      "(default 1)")
    plan.add_argument("--zone", metavar="Z", help="with --make-room: the instances' availability zone")
    plan.add_argument("--max-migrations", type=positive, metavar="K",
                      help="with --balance or --consolidate: at most K migrations (default 10)")
    plan.add_argument("--target", dest="target_skew", type=float, metavar="SKEW",
                      help="with --balance: stop at this skew, max / mean of the hosts' load (default 1.15)")
    plan.add_argument("--headroom", type=float, metavar="SHARE",
                      help="with --consolidate: the share of each limit a destination keeps free "
                      "(0 to below 1, default 0)")
    plan.add_argument("--time-limit", type=str, default="1", metavar="S",
                      help="seconds the planner may take (default 1): past it, the best plan found")
    plan.add_argument("--method", choices=METHODS, default="auto",
                      help="auto (default): the greedy plan, then the exact one within the time limit")
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
    options = {"time_limit": _seconds(args.time_limit)}
    if args.make_room:
        goal = MAKE_ROOM
        options.update(flavor=named_flavor(client, args.make_room), count=args.count, method=args.method)
        if args.zone:
            options["zone"] = args.zone
    else:
        goal = next(name for name, _ in GOAL_FLAGS.values() if getattr(args, name, False))
        if args.count != 1 or args.zone:
            raise CommandError(f"--count and --zone go with --make-room, not --{goal}")
    for name, owner in GOAL_OPTIONS.items():
        value = getattr(args, name)
        if value is None:
            continue
        if goal == MAKE_ROOM or (owner is not None and owner != goal):
            flag = "--target" if name == "target_skew" else "--" + name.replace("_", "-")
            raise CommandError(f"{flag} goes with --{owner or 'balance or --consolidate'}, not "
                               f"--{goal.replace('_', '-')}")
        options[name] = value
    print_plan(_call(client, "plan_rebalance", goal=goal, options=options), args, out, planned=True)
    return 0


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
    except KeyboardInterrupt:  # in the last listing: the plan ended
        return 130


def stop_command(client, args, out):
    plan = _call(client, "stop_rebalance_plan", plan_id=args.plan_id)
    running = sum(s["status"] == "running" for s in plan["steps"])
    print(f"rebalance plan {plan['id']} {plan['state']}"
          + (f": {running} step(s) under way end on their own" if running else ""), file=out)
    return 0


def _step_rows(plan):
    return [[s["position"], s["instance_uuid"], s["source_host"], s["dest_host"], _number(s["memory_mb"]),
             s["status"], s.get("migration_id"), s.get("failure") if s["status"] == "failed" else s["reason"]]
            for s in plan["steps"]]


def _number(value):
    return int(value) if float(value).is_integer() else value


def _record(plan):
    summary = plan["summary"]
    return {"id": plan["id"], "goal": plan["goal"], "state": plan["state"], "reason": plan.get("reason"),
            "options": plan["options"], "method": summary.get("method"), "optimal": summary.get("optimal"),
            "note": summary.get("note"), "before": summary.get("before"), "after": summary.get("after"),
            "placements": summary.get("placements"),
            "steps": [dict(zip([c.lower() for c in STEP_COLUMNS], row, strict=True))
                      for row in _step_rows(plan)]}


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
    what = plan["goal"]
    if plan["goal"] == MAKE_ROOM:
        what = f"room for {options.get('count', 1)} x {options['flavor'].get('name') or 'the flavor'}" + (
            f" in zone {options['zone']}" if options.get("zone") else "")
    moved = sum(s["memory_mb"] for s in steps)
    method = summary.get("method") + (" (proven fewest)" if summary.get("optimal") else "")
    print(f"rebalance plan {plan['id']}: {what}: {len(steps)} migration(s), {moved:g} MB moved; {method}; "
          f"{plan['state']}" + (f" ({plan['reason']})" if plan.get("reason") else ""), file=out)
    if summary.get("note"):
        print(f"note: {summary['note']}", file=out)
    output.print_columns(["FIGURE", "BEFORE", "AFTER"], summary.get("figures") or [], out)
    if steps:
        print(file=out)
        output.print_columns(STEP_COLUMNS, _step_rows(plan), out)
    if summary.get("placements"):
        print(f"then the new instance(s) fit on: {', '.join(summary['placements'])}", file=out)
    if planned and steps:
        print(f"apply it: berth rebalance apply {plan['id']}", file=out)

