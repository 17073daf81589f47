"""Options of the compute agent: the ``[compute_agent]`` group."""

from oslo_config import cfg

from scheduler.conf import groups

group = cfg.OptGroup(
    "compute_agent",
    title="Compute agent",
    help="The compute agent: what it reports to the scheduler and how it builds instances.",
)

opts = [
    cfg.IntOpt(
        "reserved_host_memory_mb",
        default=512,
        min=0,
        help="Memory (MiB) kept for the host itself. It counts as used in every report, "
        "so the scheduler never places instances on it.",
    ),
    cfg.IntOpt(
        "reserved_host_disk_mb",
        default=0,
        min=0,
        help="Local disk (MiB) kept for the host itself; counts as used in every report.",
    ),
    cfg.IntOpt(
        "reserved_host_cpus",
        default=0,
        min=0,
        help="Virtual CPUs kept for the host itself; counts as used in every report.",
    ),
    cfg.IntOpt(
        "report_interval",
        default=10,
        min=1,
        help="Seconds between the agent's periodic resource reports. Keep it well below "
        "the scheduler's [scheduler] service_down_time, or the host is taken for down.",
    ),
    cfg.BoolOpt(
        "report_on_change",
        default=True,
        help="Also send a report soon after every claim or release, so the scheduler "
        "sees the new usage before the next periodic report. Reports are coalesced to "
        "at most one per report_min_interval.",
    ),
    cfg.FloatOpt(
        "report_min_interval",
        default=0.2,
        min=0.0,
        help="Shortest delay (seconds) between two change-triggered reports; changes "
        "within it are sent together in one report.",
    ),
    cfg.StrOpt(
        "driver",
        default="fake",
        choices=[
            ("fake", "Simulated host of the fake_* sizes; builds take fake_build_time."),
            (
                "host",
                "This machine's real memory, disk (of state_path) and CPU count; instances are simulated.",
            ),
        ],
        help="Virtualization driver: where the agent's totals come from and how it builds.",
    ),
    cfg.IntOpt(
        "fake_memory_mb",
        default=32768,
        min=1,
        help="Total memory (MiB) the fake driver reports.",
    ),
    cfg.IntOpt(
        "fake_local_gb",
        default=1024,
        min=1,
        help="Total local disk (GiB) the fake driver reports.",
    ),
    cfg.IntOpt(
        "fake_vcpus",
        default=16,
        min=1,
        help="Virtual CPUs the fake driver reports.",
    ),
    cfg.FloatOpt(
        "fake_build_time",
        default=0.0,
        min=0.0,
        help="Seconds a fake build takes before the instance goes ACTIVE.",
    ),
    cfg.StrOpt(
        "nodename",
        help="Name of the compute node this agent reports (the 'nodename' of "
        "force_nodes and of the retry record). Defaults to the host name.",
    ),
]


def register_opts(conf):
    groups.register(conf, group, opts)


def list_opts():
    return [(group, opts)]
