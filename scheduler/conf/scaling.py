"""[scaling]: the scaling groups' controller that runs in each scheduler process."""

from __future__ import annotations

from oslo_config import cfg

group = cfg.OptGroup(
    "scaling", title="Scaling groups",
    help="The controller that keeps each scaling group's members where its metrics want them "
    "(Kubernetes' HorizontalPodAutoscaler). Every scheduler process runs one; they share the "
    "groups by lease, so each group is synced by one of them per period.")

opts = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Run the scaling groups' controller in this scheduler process. Turn it off on "
        "schedulers that should only place instances; at least one scheduler must keep it on, "
        "or no group is synced.",
    ),
    cfg.FloatOpt(
        "sync_period",
        default=15.0,
        min=1.0,
        help="Seconds between two syncs of each group, and the length of a controller's lease "
        "on a group: a controller that stops is replaced within two periods "
        "(--horizontal-pod-autoscaler-sync-period).",
    ),
    cfg.FloatOpt(
        "cpu_initialization_period",
        default=300.0,
        min=0.0,
        help="Seconds after a member goes ACTIVE during which its cpu samples are not trusted "
        "(--horizontal-pod-autoscaler-cpu-initialization-period).",
    ),
    cfg.FloatOpt(
        "initial_readiness_delay",
        default=30.0,
        min=0.0,
        help="Seconds after a member goes ACTIVE during which it counts as not yet ready "
        "for the cpu metric (--horizontal-pod-autoscaler-initial-readiness-delay).",
    ),
    cfg.FloatOpt(
        "metric_max_age",
        default=60.0,
        min=1.0,
        help="Seconds after which a member's sample (measured by its agent or pushed) is "
        "stale and counts as missing. Keep it above the agents' report_interval.",
    ),
    cfg.IntOpt(
        "max_members",
        default=1000,
        min=1,
        max=2**31 - 1,
        help="The most members a scaling group may have: a group's max above it is refused at "
        "create and update (a group stored with a larger max is held to this one).",
    ),
    cfg.IntOpt(
        "max_new_members_per_sync",
        default=100,
        min=1,
        help="The members one sync of a group creates at most, replacements of ERROR members "
        "included: a group far below its count grows by this many a sync_period, so that it "
        "cannot fill the scheduler's queue ahead of every other request.",
    ),
    cfg.IntOpt(
        "max_pushed_metrics",
        default=64,
        min=1,
        help="Distinct metric names pushed (push_instance_metrics) that one instance may hold. "
        "A push that would add names past it is refused, saving nothing; the names held may be "
        "pushed again, and a name not pushed for an hour is pruned, which frees it.",
    ),
    cfg.FloatOpt(
        "replace_backoff",
        default=10.0,
        min=0.0,
        help="Seconds before a group's ERROR members are replaced again after a replacement; "
        "the wait doubles with each replacement in a row, up to replace_backoff_max.",
    ),
    cfg.FloatOpt(
        "replace_backoff_max",
        default=300.0,
        min=0.0,
        help="The longest wait between two replacements of a group's ERROR members.",
    ),
    cfg.FloatOpt(
        "cast_grace",
        default=60.0,
        min=1.0,
        help="Seconds a member may stay SCHEDULING without a host, or DELETING, before the "
        "controller sends its build or delete again (a controller that died between writing "
        "a member and sending it leaves such members).",
    ),
]


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(group, opts)]
