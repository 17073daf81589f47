from oslo_config import cfg

from scheduler.conf import groups

group = cfg.OptGroup("scheduler", title="Scheduler", help="The scheduler service.")

opts = [
    cfg.IntOpt(
        "max_attempts",
        default=3,
        min=1,
        help="How many hosts an instance may be tried on (the first placement and its "
        "reschedules) before it goes to ERROR.",
    ),
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="Seconds without a report after which a compute host is considered down "
        "and receives no new instances.",
    ),
    cfg.IntOpt(
        "periodic_interval",
        default=5,
        min=1,
        help="Seconds between the scheduler's periodic tasks (host liveness, flushing "
        "host reports to the database).",
    ),
]


def register_opts(conf):
    groups.register(conf, group, opts)


def list_opts():
    return [(group, opts)]
