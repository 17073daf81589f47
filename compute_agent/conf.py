"""Options of the compute agent: the ``[compute_agent]`` group."""

from oslo_config import cfg

from compute_agent import inventory
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
        choices=[
            ("fake", "Simulated host of the fake_* sizes; builds take fake_build_time."),
            (
                "host",
                "This machine's real memory, disk (of state_path) and CPU count; instances are simulated.",
            ),
        ],
        help="Virtualization driver: where the agent's totals come from and how it builds. "
        "No default: berth-compute-agent does not start until it is set, so that no host "
        "reports simulated sizes by mistake. berth-all-in-one runs fake unless it is set.",
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
    cfg.FloatOpt(
        "fake_migration_time_per_gb",
        default=0.0,
        min=0.0,
        help="Seconds the fake driver takes to move in, or resize, an instance, per GiB of "
        "its flavor's memory (a live migration copies its memory; the others take as long).",
    ),
    cfg.FloatOpt(
        "fake_move_failure_rate",
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's moves (migrations, evacuations, resizes) that fail "
        "once their time is up: 0 none, 1 every one. Drawn per move from fake_load_seed, the "
        "instance and the migration id, so a resumed move ends as it would have.",
    ),
    cfg.FloatOpt(
        "fake_busy_fraction",
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's instances that are busy (drawn per instance from "
        "fake_load_seed and its uuid); the others idle. Shapes the measured load it reports.",
    ),
    cfg.FloatOpt(
        "fake_busy_cpu_load",
        default=1.0,
        min=0.0,
        help="Cores a busy fake instance keeps busy, per vCPU of its flavor.",
    ),
    cfg.FloatOpt(
        "fake_idle_cpu_load",
        default=0.05,
        min=0.0,
        help="Cores an idle fake instance keeps busy, per vCPU of its flavor.",
    ),
    cfg.FloatOpt(
        "fake_hidden_cpu_load",
        default=0.0,
        min=0.0,
        help="Cores the fake host keeps busy with load no allocation accounts for (guests "
        "beyond their flavor, work outside any instance).",
    ),
    cfg.FloatOpt(
        "fake_idle_memory_fraction",
        default=0.5,
        min=0.0,
        max=1.0,
        help="Share of its memory an idle fake instance uses (a busy one uses all of it).",
    ),
    cfg.FloatOpt(
        "fake_reservation_fraction",
        default=1.0,
        min=0.0,
        max=1.0,
        help="Share of its flavor a fake instance reserves; it may burst into the rest "
        "(the cpu/memory reserved and burst figures it reports).",
    ),
    cfg.FloatOpt(
        "fake_powered_off_fraction",
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's instances that are powered off: they use nothing "
        "and their reservation is reported as undeployed.",
    ),
    cfg.IntOpt(
        "fake_load_seed",
        default=0,
        help="Seed of the fake driver's load: which instances are busy or powered off.",
    ),
    cfg.StrOpt(
        "fake_cpu_arch",
        default="x86_64",
        help="CPU architecture the fake driver reports (ImagePropertiesFilter's hw_architecture).",
    ),
    cfg.ListOpt(
        "fake_cpu_features",
        default=["sse", "sse2", "sse4_2", "aes", "avx", "avx2"],
        help="CPU features the fake driver reports in cpu_info (what a flavor's "
        "'capabilities:cpu_info:features' extra spec matches), and as traits where os-traits "
        "names them (avx2: HW_CPU_X86_AVX2) when fake_cpu_arch is x86.",
    ),
    cfg.IntOpt(
        "fake_hypervisor_version",
        default=1000,
        min=0,
        help="Hypervisor version the fake driver reports, as Nova counts it (1.2.3 is 1002003).",
    ),
    cfg.StrOpt(
        "fake_hypervisor_type",
        default="fake",
        help="Hypervisor type the fake driver reports (ImagePropertiesFilter's img_hv_type).",
    ),
    cfg.ListOpt(
        "fake_vm_modes",
        default=["hvm"],
        help="VM modes the fake driver reports (ImagePropertiesFilter's hw_vm_mode).",
    ),
    cfg.DictOpt(
        "resources",
        default={},
        help="Resource classes this host has besides VCPU, MEMORY_MB, DISK_GB and PCPU, with "
        "their totals, e.g. 'VGPU:4, CUSTOM_FPGA:2' (standard os-resource-classes names or "
        "CUSTOM_*). A flavor takes them with resources:CLASS=N; the agent never gives out more "
        "than the total (with resource_reserved and resource_allocation_ratio).",
    ),
    cfg.DictOpt(
        "resource_reserved",
        default={},
        help="Units of a class of resources (or PCPU) kept for the host, e.g. 'VGPU:1'. Default 0.",
    ),
    cfg.DictOpt(
        "resource_max_unit",
        default={},
        help="Most units of a class of resources (or PCPU) one instance may take. Default: its total.",
    ),
    cfg.DictOpt(
        "resource_min_unit",
        default={},
        help="Fewest units of a class of resources (or PCPU) one instance may take. Default 1.",
    ),
    cfg.DictOpt(
        "resource_step_size",
        default={},
        help="An instance takes a class of resources (or PCPU) in multiples of this. Default 1.",
    ),
    cfg.DictOpt(
        "resource_allocation_ratio",
        default={},
        help="Overcommit of a class of resources (or PCPU): (total - reserved) * ratio units can be "
        "given out, e.g. 'CUSTOM_LICENSE:2.0'. Default 1.0.",
    ),
    cfg.StrOpt(
        "cpu_dedicated_set",
        help="Host CPUs kept for instances of hw:cpu_policy=dedicated, reported as the PCPU "
        "class, in Nova's syntax: '4-7,^6', '0,2,4'. The other CPUs are the shared ones: "
        "the report's vcpus and the VCPU class. Unset: every CPU is shared and there is no PCPU.",
    ),
    cfg.ListOpt(
        "traits",
        default=[],
        help="Traits this host has besides those read from its CPU (HW_CPU_X86_*): CUSTOM_* "
        "names or standard os-traits ones, e.g. 'CUSTOM_SSD, COMPUTE_TRUSTED_CERTS'. A flavor "
        "requires or forbids them with trait:NAME=required|forbidden.",
    ),
    cfg.StrOpt(
        "host_ip",
        help="The address of this host the agent reports (SimpleCIDRAffinityFilter, JsonFilter's "
        "$host_ip). Default: the address this machine routes outside traffic from.",
    ),
    cfg.StrOpt(
        "nodename",
        help="Name of the compute node this agent reports (the 'nodename' of "
        "force_nodes and of the retry record). Defaults to the host name.",
    ),
]


DRIVER_NOT_SET = (
    "[compute_agent] driver is not set: set driver = host to report this machine's memory, disk "
    "and CPUs, or driver = fake to report a simulated host of fake_memory_mb, fake_local_gb and fake_vcpus"
)


def register_opts(conf):
    groups.register(conf, group, opts)


def check_driver(conf):
    """Fail start-up when the operator has not chosen a driver."""
    if conf.compute_agent.driver is None:
        raise ValueError(DRIVER_NOT_SET)


def check_resources(conf):
    """Fail start-up on a bad resources, resource_*, cpu_dedicated_set or traits value."""
    inventory.from_conf(conf)


def list_opts():
    return [(group, opts)]
