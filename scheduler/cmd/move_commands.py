"""``berth server resize``, ``migrate``, ``migrations``, ``host evacuate`` and ``host drain``: moving
instances.

Each command but ``drain`` is one call to the scheduler (API 1.1) after the one that finds an
instance named by name; the scheduler checks the move and refuses it, saying why, with
nothing changed. With ``--wait``, ``resize``, ``migrate`` and ``evacuate`` then poll the
migrations they started until each ended (or, a resize, waits to be confirmed), telling the
progress on stderr (scheduler.cmd.waiting), and print them as they ended. ``drain`` starts a
job the schedulers carry on and watches it (:class:`scheduler.cmd.draining.Drain`).
"""

import sys

from scheduler import migration_states as moves
from scheduler import rpc
from scheduler.cmd import draining, output
from scheduler.cmd.arguments import CommandError, Interrupted, UsageError, positive, whole
from scheduler.cmd.instance_commands import flavor_from_args
from scheduler.cmd.references import instance_uuid, instances_by_uuid, unknown_host
from scheduler.cmd.waiting import wait_for_moves

#: STEP: where a move between two agents is (prepare, migrate, finish), empty for one taken in alone.
#: DOWNTIME and TRANSFER: seconds a live migration's guest was paused and its memory took to go over,
#: as its source's driver measured them (empty when it said nothing of them).
COLUMNS = ["ID", "INSTANCE", "KIND", "STATUS", "STEP", "SOURCE", "DEST", "CREATED", "FINISHED", "DOWNTIME",
           "TRANSFER", "REASON"]


def add_wait(parser, until):
    parser.add_argument("--wait", action="store_true", help=f"wait until {until}, telling the progress "
                        "on stderr; exit 1 when a move failed")
    parser.add_argument("--timeout", type=positive, default=300, metavar="SECONDS",
                        help="with --wait: give up after this long (default 300)")


def add_commands(subparsers):
    resize = subparsers.add_parser(
        "resize", help="Give an instance another flavor (then --confirm or --revert it).")
    resize.add_argument("reference", metavar="INSTANCE",
                        help="a UUID, or the name of exactly one instance not DELETED")
    resize.add_argument("--flavor", help="the new flavor: one the scheduler keeps, by name "
                        "(berth flavor list)")
    resize.add_argument("--flavor-ram", type=positive, metavar="MB",
                        help="memory of an unnamed flavor (which keeps the instance's extra specs)")
    resize.add_argument("--flavor-disk", type=whole, metavar="GB",
                        help="root disk of an unnamed flavor (default: the instance's own disks)")
    resize.add_argument("--flavor-vcpus", type=positive, metavar="N", help="vCPUs of an unnamed flavor")
    answer = resize.add_mutually_exclusive_group()
    answer.add_argument("--confirm", action="store_true",
                        help="keep the new size: the source host lets go of the old one")
    answer.add_argument("--revert", action="store_true",
                        help="go back to the old size on the source host")
    add_wait(resize, "the resize is done (VERIFY_RESIZE: then --confirm or --revert it) or failed")
    output.add_options(resize)
    resize.set_defaults(func=resize_command)

    migrate = subparsers.add_parser(
        "migrate", help="Move an instance to another host, which the scheduler chooses or --host names.")
    migrate.add_argument("reference", metavar="INSTANCE",
                         help="a UUID, or the name of exactly one instance not DELETED")
    migrate.add_argument("--live", action="store_true", help="move it running (live migration)")
    # dest differs from the option name: oslo.config's [DEFAULT] host shadows "host".
    migrate.add_argument("--host", dest="target_host", metavar="HOST",
                         help="to this host, if the filters let it take the instance")
    migrate.add_argument("--force", action="store_true",
                         help="with --host: to that host without asking the filters")
    add_wait(migrate, "the instance is ACTIVE on its new host, or the move failed")
    output.add_options(migrate)
    migrate.set_defaults(func=migrate_command)

    listing = subparsers.add_parser("migrations", help="Moves of instances, newest first.")
    listing.add_argument("--host", dest="on_host", metavar="HOST", help="only those from or to HOST")
    listing.add_argument("--state", type=str.lower, choices=moves.STATUSES, metavar="STATUS",
                         help=f"only those in STATUS: {', '.join(moves.STATUSES)}")
    listing.add_argument("--instance", metavar="INSTANCE", help="only those of INSTANCE (a UUID or a name)")
    output.add_options(listing)
    listing.set_defaults(func=migrations_command)


def add_host_actions(actions):
    """``berth host evacuate`` and ``berth host drain``, beside the other ``host`` actions."""
    evacuate = actions.add_parser(
        "evacuate", help="Rebuild elsewhere every instance of a host that is down.")
    evacuate.add_argument("target_host", metavar="HOST")
    add_wait(evacuate, "every instance is rebuilt on its new host, or its move failed")
    output.add_options(evacuate)
    evacuate.set_defaults(func=evacuate_command)

    drain = actions.add_parser(
        "drain", help="Disable a host and move its instances elsewhere, a few at a time; "
        "say which stay, and why. The schedulers carry the drain on: Ctrl-C leaves it be.")
    drain.add_argument("target_host", metavar="HOST")
    drain.add_argument("--live", action="store_true", help="move them running (live migration)")
    drain.add_argument("--max-parallel", type=positive, default=2, metavar="N",
                       help="at most N moves under way at once (default 2)")
    drain.add_argument("--timeout", type=positive, metavar="SECONDS",
                       help="give up after this long: start no new move, wait for none (default: no limit)")
    drain.add_argument("--stop", action="store_true",
                       help="stop the drain of HOST under way: no new move starts, those under way end")
    drain.set_defaults(func=drain_command)


def _moving(call, *args, **kwargs):
    """``call``'s answer; a cap in [upgrade_levels] below the moves' API is refused as a command's error."""
    try:
        return call({}, *args, **kwargs)
    except rpc.RPCVersionCapError as exc:
        raise CommandError(str(exc)) from None


def _rows(migrations):
    return [[m["id"], m["instance_uuid"], m["kind"], m["status"], m.get("step"), m.get("source_host"),
             m.get("dest_host"), m.get("created_at"), m.get("finished_at"), _seconds(m, "downtime_ms"),
             _seconds(m, "total_ms"), m.get("reason")]
            for m in migrations]


def _seconds(migration, figure):
    """A figure of ``migration`` in milliseconds, in seconds; None when it has none."""
    value = (migration.get("figures") or {}).get(figure)
    return None if value is None else round(value / 1000, 3)


def print_migrations(migrations, out, args=None):
    output.emit(args, COLUMNS, _rows(migrations), out)


def resize_command(client, args, out):
    sized = any(v is not None for v in (args.flavor, args.flavor_ram, args.flavor_disk, args.flavor_vcpus))
    answered = "--confirm" if args.confirm else "--revert" if args.revert else None
    if answered and sized:
        raise UsageError(f"{answered} takes no flavor: give either a new flavor or {answered}")
    if not answered and not sized:
        raise UsageError("give the new flavor (--flavor NAME, or --flavor-ram and --flavor-vcpus), "
                           "or --confirm or --revert")
    flavor = flavor_from_args(client, args) if sized else None
    uuid = instance_uuid(client, args.reference)
    if flavor is not None and not args.flavor:
        # New sizes of its own flavor: its extra specs (GPUs, dedicated CPUs, traits) are kept, and so
        # are its disks unless given: a disk is never shrunk (the scheduler refuses), nor silently made 0.
        shown = client.show_instance({}, uuid)
        stored = (shown.get("request_spec") or {}).get("instance_type") or {}
        flavor["extra_specs"] = dict(stored.get("extra_specs") or {})
        if args.flavor_disk is None:
            flavor.update(root_gb=shown.get("root_gb") or 0, ephemeral_gb=shown.get("ephemeral_gb") or 0)
    if args.confirm:
        migration = _moving(client.confirm_resize, uuid)
    elif args.revert:
        migration = _moving(client.revert_resize, uuid)
    else:
        migration = _moving(client.resize_instance, uuid, flavor)
    return _print_moved(client, [migration], args, out)


def migrate_command(client, args, out):
    if args.force and not args.target_host:
        raise CommandError("--force needs --host HOST: it skips the filters for that host")
    uuid = instance_uuid(client, args.reference)
    migration = _moving(client.migrate_instance, uuid, host=args.target_host, force=args.force,
                        live=args.live)
    return _print_moved(client, [migration], args, out)


def _print_moved(client, migrations, args, out):
    """Print ``migrations``, as they ended with --wait; the exit status (1: one failed)."""
    if getattr(args, "wait", False) and migrations:
        uuids = [m["instance_uuid"] for m in migrations]
        names = {u: i.get("display_name") for u, i in instances_by_uuid(client, uuids).items()}
        ended = wait_for_moves(client, migrations, args.timeout, names=names)
        migrations = [ended.get(m["id"], m) for m in migrations]
        for m in migrations:
            if m["kind"] == moves.RESIZE and m["status"] == moves.FINISHED:
                print(f"resized: check it, then berth server resize {m['instance_uuid']} --confirm "
                      "(or --revert)", file=sys.stderr)
    print_migrations(migrations, out, args)
    return 1 if any(m["status"] == moves.ERROR for m in migrations) else 0


def evacuate_command(client, args, out):
    """The migrations started, then each instance that stays and why (exit 1 when one does)."""
    answers = _moving(client.evacuate_host, args.target_host)
    if not answers and getattr(args, "output_format", None) is None:
        print(f"host {args.target_host} has no instance to evacuate", file=out)
        return 0
    migrations = [a["migration"] for a in answers if "migration" in a]
    failed = _print_moved(client, migrations, args, out)
    if migrations:
        # Whether a host's driver keeps its disks on shared storage is not reported: said for every one.
        print(f"evacuated instances are rebuilt from their image on their new host: what their disks on "
              f"{args.target_host} held is lost (unless its driver keeps them on shared storage)",
              file=sys.stderr if output.wants_format(args) else out)
    stays = [a for a in answers if "migration" not in a]
    for answer in stays:
        print(f"not evacuated: {answer['instance_uuid']}: {answer.get('error')}", file=sys.stderr)
    return 1 if stays or failed else 0


def migrations_command(client, args, out):
    uuid = instance_uuid(client, args.instance) if args.instance else None
    found = _moving(client.list_migrations, host=args.on_host, status=args.state, instance_uuid=uuid)
    # A misspelt host would list nothing, as one no move touched does: say which it is.
    host = args.on_host
    refusal = unknown_host(client, host, ", and no move is from or to it") if not found and host else None
    if refusal is not None:
        raise refusal
    print_migrations(found, out, args)
    return 0


def drain_command(client, args, out):
    if args.stop:
        return draining.stop(client, args.target_host, out)
    drain = draining.Drain(client, args.target_host, out, live=args.live, max_parallel=args.max_parallel,
                           timeout=args.timeout)
    try:
        return drain.run()
    except KeyboardInterrupt:  # in the last listing: the drain ended
        raise Interrupted(f"interrupted: the drain of {args.target_host} ended; `berth server list --host "
                          f"{args.target_host}` shows what stays on it") from None
