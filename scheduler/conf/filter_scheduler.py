from oslo_config import cfg

group = cfg.OptGroup(
    "filter_scheduler",
    title="Filter scheduler",
    help="Which filters and weighers place instances, and how.",
)

opts = [
    cfg.ListOpt(
        "enabled_filters",
        default=["AvailabilityZoneFilter", "ComputeFilter", "RetryFilter", "RamFilter", "DiskFilter",
                 "CoreFilter", "ResourceClassFilter", "TraitsFilter", "ImagePropertiesFilter",
                 "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter", "SameHostFilter",
                 "DifferentHostFilter", "JsonFilter"],
        help="Filters run, in this order, on every candidate host; a host must pass "
        "all of them. Names are the filter classes. The default honours every hint and "
        "policy berth server create accepts; a request asking for one no enabled filter or weigher "
        "honours is refused, naming the plugin to enable. ResourceClassFilter and TraitsFilter "
        "check what Nova asks Placement for (resources:CLASS=N, trait:NAME=required|forbidden); "
        "IsolatedAggregateFilter is Nova's enable_isolated_aggregate_filtering, opt-in as there: "
        "add it here. Nova's class paths "
        "(nova.scheduler.filters.ram_filter.RamFilter) name the same filters.",
    ),
    cfg.ListOpt(
        "weighers",
        default=["RAMWeigher", "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher"],
        help="Weighers that rank the hosts that passed the filters. Each weight is "
        "normalized to [0, 1] over the candidates and multiplied by the weigher's multiplier. "
        "The default spreads by free RAM, as Nova's did for years, and honours soft "
        "(anti-)affinity server groups. Nova's names are understood: "
        "nova.scheduler.weights.all_weighers is Nova's set, and a dotted path the class "
        "it ends with.",
        deprecated_opts=[cfg.DeprecatedOpt("weight_classes", group="filter_scheduler")],
    ),
    cfg.MultiStrOpt(
        "available_filters",
        default=["nova.scheduler.filters.all_filters"],
        help="Filters that enabled_filters may name, as in Nova: "
        "nova.scheduler.filters.all_filters (every filter installed, Berth's and those of "
        "the berth.scheduler.filters entry point), or class names and paths, one a line.",
    ),
    cfg.IntOpt(
        "host_subset_size",
        default=1,
        min=1,
        help="The instance goes to a host chosen at random among this many best-weighed "
        "hosts. Larger values spread concurrent requests and schedulers apart.",
    ),
    cfg.BoolOpt(
        "shuffle_best_same_weighed_hosts",
        default=False,
        help="Pick at random among every host that shares the best weight, however many "
        "they are (otherwise the earliest of them fill the host_subset_size subset). "
        "Spreads a fleet of identical hosts, as with host_subset_size 1 and many equal "
        "hosts; packs less densely.",
    ),
    *(opt for resource, (unit, plugin, initial) in {
        "cpu": ("Virtual CPUs per physical CPU", "CoreFilter, CPUWeigher", 4.0),
        "ram": ("Virtual RAM per physical RAM", "RamFilter", 1.0),
        "disk": ("Virtual disk per physical disk", "DiskFilter", 1.0),
    }.items() for opt in (
        cfg.FloatOpt(
            f"{resource}_allocation_ratio",
            min=0.0,
            help=f"{unit} ({plugin}). Unset or 0.0: initial_{resource}_allocation_ratio, as Nova "
            "reads it. Nova keeps it in [DEFAULT], read there too.",
            deprecated_opts=[cfg.DeprecatedOpt(f"{resource}_allocation_ratio", group="DEFAULT")],
        ),
        cfg.FloatOpt(
            f"initial_{resource}_allocation_ratio",
            default=initial,
            min=0.0,
            help=f"{unit} when {resource}_allocation_ratio is unset (Nova's default for a new "
            "compute node). Nova keeps it in [DEFAULT], read there too.",
            deprecated_opts=[cfg.DeprecatedOpt(f"initial_{resource}_allocation_ratio", group="DEFAULT")],
        ),
    )),
]


def allocation_ratio(conf, resource):
    """The overcommit ratio of ``resource`` ("cpu", "ram" or "disk") as Nova sets it on a compute
    node: ``<resource>_allocation_ratio`` unless unset or 0.0, else the initial one."""
    group = conf.filter_scheduler
    ratio = group[f"{resource}_allocation_ratio"]
    return group[f"initial_{resource}_allocation_ratio"] if ratio in (None, 0.0) else ratio


def allocation_ratios(conf):
    """{"ram", "vcpus", "disk"}: each resource's allocation_ratio, as the status page names them."""
    return {"ram": allocation_ratio(conf, "ram"), "vcpus": allocation_ratio(conf, "cpu"),
            "disk": allocation_ratio(conf, "disk")}


def list_opts():
    return [(group, opts)]
