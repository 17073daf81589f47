from oslo_config import cfg

group = cfg.OptGroup("scheduler", title="Scheduler", help="The scheduler service.")

opts = [
    cfg.IntOpt(
        "batch_size",
        default=32,
        min=1,
        max=1000,
        help="Messages a scheduler worker handles in one database transaction when they are "
        "already waiting: none is acknowledged, and no build is sent, before the "
        "transaction commits. 1 commits every message on its own. The worker prefetches "
        "at least three times this many (see rabbit_qos_prefetch_count).",
    ),
    cfg.IntOpt(
        "max_attempts",
        default=3,
        min=1,
        help="How many hosts an instance may be tried on (the first placement and its "
        "reschedules) before it goes to ERROR.",
    ),
    cfg.IntOpt(
        "build_retries_same_host",
        default=0,
        min=0,
        max=10,
        help="How many times an instance whose build failed on a host is built again on "
        "that host before it is rescheduled on another (the failed host then left out, as "
        "every failed host is). 0, Nova's behaviour: never. VMware Cloud Director retries "
        "twice. The host must still pass every enabled filter, else the instance goes to "
        "another host at once; a build tried again on its host does not count against "
        "max_attempts, which counts the hosts tried.",
    ),
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="Seconds without a report after which a compute host is considered down "
        "and receives no new instances (Nova keeps it in [DEFAULT], read there too).",
        deprecated_opts=[cfg.DeprecatedOpt("service_down_time", group="DEFAULT")],
    ),
    cfg.IntOpt(
        "periodic_interval",
        default=5,
        min=1,
        help="Seconds between the scheduler's periodic tasks (host liveness, flushing "
        "host reports to the database).",
    ),
    cfg.IntOpt(
        "build_timeout",
        default=600,
        min=1,
        help="Seconds an instance may stay SCHEDULED or BUILDING without news from its "
        "agent. Past it, the periodic task rescheduling it on another host (if "
        "max_attempts allows; its first host is told to terminate it) or puts it in "
        "ERROR with the reason.",
    ),
    cfg.BoolOpt(
        "prefer_owned_hosts",
        default=True,
        help="With N schedulers live, place a request on the hosts this scheduler owns (its "
        "rendezvous share of the hosts, the one whose reports it writes) when one of them "
        "passes the filters, so that N schedulers no longer race for the same heaviest hosts "
        "(their claims conflicting). The whole fleet is weighed, as by a lone scheduler, when "
        "none of its own passes, when fewer than 16 x N x host_subset_size hosts pass, for a "
        "move (migration, evacuation, drain, resize to another host), and for a request whose "
        "spread matters (a server group member of any policy, same_host, different_host, or a "
        "hint a weigher reads such as preferred_hosts). A lone scheduler places the same "
        "either way. False: every scheduler weighs the whole fleet.",
    ),
]


def list_opts():
    return [(group, opts)]
