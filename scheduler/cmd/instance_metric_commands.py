"""``berth server metric push|show``: per-instance metrics (the scaling groups' instance metrics).

``push`` is one RPC call to the scheduler (scheduler.scaling.instance_metrics_api.InstanceMetricsEndpoint),
after one that finds an instance named by name: the scheduler saves the values as the
instance's newest samples, stamped with the database's time, or refuses the whole push.
``show`` lists every sample stored of the instances, measured by their agents or pushed.
"""

import argparse

from berth_contract.instance_metrics import check_pushed_name, is_value
from scheduler.cmd import arguments, output
from scheduler.cmd.arguments import CommandError
from scheduler.cmd.references import instance_uuid
from scheduler.exception import InvalidRequest


def _metric(text):
    """``NAME=VALUE``: a name a pushed metric may have, a finite number >= 0."""
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"a metric is NAME=VALUE, got {text!r}")
    try:
        check_pushed_name(name, "NAME=VALUE")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("NAME=VALUE: ")) from None
    try:
        number = float(value)
    except ValueError:
        number = None
    if not is_value(number):
        raise argparse.ArgumentTypeError(f"metric {name}: the value must be a finite number >= 0, "
                                         f"got {value!r}")
    return name, number


def add_commands(subparsers):
    actions = arguments.actions(
        subparsers, "instance-metric", "Per-instance metrics: push custom ones, show the samples stored.",
        "instance_metric_action")

    push = actions.add_parser(
        "push", help="Save metrics of an instance as its newest samples (a scaling group's instance metrics "
        "read them); names: a lowercase letter, then lowercase letters, digits, _ . - (64 at most), "
        "not cpu or memory (the agents measure those).")
    push.add_argument("reference", metavar="INSTANCE", help="a UUID, or the name of exactly one instance not "
                      "DELETED")
    push.add_argument("metrics", nargs="+", type=_metric, metavar="NAME=VALUE")
    push.set_defaults(func=metric_push)

    show = actions.add_parser("show", help="Every sample stored of the instances: value, source, when.")
    show.add_argument("references", nargs="+", metavar="INSTANCE",
                      help="a UUID, or the name of exactly one instance not DELETED")
    output.add_options(show)
    show.set_defaults(func=metric_show)


def metric_push(client, args, out):
    names = [name for name, _ in args.metrics]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CommandError(f"metric {', '.join(repeated)} given more than once; nothing pushed")
    uuid = instance_uuid(client, args.reference)
    pushed = client.admin_call({}, "push_instance_metrics", instance_uuid=uuid, metrics=dict(args.metrics))
    values = ", ".join(f"{name}={value:g}" for name, value in sorted(pushed["metrics"].items()))
    print(f"{pushed['instance_uuid']}: {values} (sampled at {pushed['sampled_at']})", file=out)
    return 0


def metric_show(client, args, out):
    uuids = list(dict.fromkeys(instance_uuid(client, reference) for reference in args.references))
    found = client.admin_call({}, "show_instance_metrics", instance_uuids=uuids)
    output.emit(args, ["INSTANCE", "NAME", "VALUE", "SOURCE", "SAMPLED AT"],
                [[uuid, name, f"{sample['value']:g}", sample["source"], sample["sampled_at"]]
                 for uuid in uuids for name, sample in sorted(found.get(uuid, {}).items())],
                out)
    return 0
