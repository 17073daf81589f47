"""Options of the compute agent: the ``[compute_agent]`` group; each driver's are in its own
(``[fake]``: compute_agent.driver.fake)."""

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
        help="Virtualization driver: where the agent's totals come from and how it builds. "
        "Berth's own: 'fake', a simulated host of the [fake] sizes whose builds take [fake] "
        "build_time; 'host', this machine's real memory, disk (of state_path) and CPU count, the "
        "instances simulated. Other distributions add theirs under the entry point group "
        "berth.compute.drivers. No default: berth-compute-agent does not start until it is set, "
        "so that no host reports simulated sizes by mistake. berth-all-in-one runs fake unless it is set.",
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


def _driver_option_modules():
    from compute_agent.driver import installed  # the drivers import what imports this module

    return installed.option_modules()


def register_opts(conf):
    """[compute_agent], and the options of every installed driver, chosen or not, so that a
    config file may set them all."""
    groups.register(conf, group, opts)
    for module in _driver_option_modules():
        groups.register_module(conf, module)


def check_driver(conf):
    """Fail start-up when the operator has not chosen a driver, or one that is not installed."""
    if conf.compute_agent.driver is None:
        raise ValueError(DRIVER_NOT_SET)
    from compute_agent.driver import installed

    installed.driver_class(conf.compute_agent.driver)


def check_resources(conf):
    """Fail start-up on a bad resources, resource_*, cpu_dedicated_set or traits value."""
    inventory.from_conf(conf)


def list_opts():
    """[compute_agent], and each installed driver's group (oslo-config-generator)."""
    found = [(group, opts)]
    for module in _driver_option_modules():
        found += module.list_opts()
    return found
