"""Random cases, and Berth and Nova built from one case.

A case is plain data (JSON, printed when a comparison fails): the options,
the hosts as their agents report them, the aggregates, and one request.
:func:`build` makes both sides from it:

- Berth: a HostTable fed by the hosts' reports (each checked by
  berth_contract.host_report.HostReport.from_wire, as the scheduler does), its
  aggregates, a RequestSpec read with RequestSpec.from_wire and completed as
  scheduler.planning.lookups would (the server group, the hosts of the same_host /
  different_host instances), and a conf with the options set.
- Nova: one nova.scheduler.host_manager.HostState per host, updated from an
  objects.ComputeNode (the same figures, stats, metrics as a
  MonitorMetricList, supported_hv_specs), a service record and the host's
  objects.Aggregate list and instances, and an objects.RequestSpec with the
  same Flavor, ImageMeta, hints, InstanceGroup and retries; the options are
  set on nova.conf.CONF (the allocation ratios on each ComputeNode, where
  Nova's HostState reads them).
"""

import collections
import contextlib
import dataclasses
import datetime
import json
import logging
import random
import time
import uuid

# --- the case --------------------------------------------------------------------------------

HOST_NAMES = ["h0", "h1", "h2", "h3", "h4", "h5", "h6"]
IMAGES = ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
          "33333333-3333-4333-8333-333333333333"]
PROJECTS = ["p1", "p2", "p3", "p4"]
ZONES = ["az1", "az2", "az3", "nova"]
FLAVORS = ["m1.small", "m1.large", "tiny", "gpu.big"]
FEATURES = ["sse2", "avx", "avx2", "avx512f", "neon", "aes"]
METRICS = ["cpu.percent", "cpu.frequency", "cpu.user.percent", "cpu.idle.time"]  # Nova's MonitorMetricType
HOST_IPS = ["10.0.1.5", "10.0.1.200", "10.0.2.7", "10.1.0.9", "192.168.5.9"]

#: The weighers both have, with the option holding each one's multiplier (Nova's name too).
WEIGHERS = {
    "RAMWeigher": "ram_weight_multiplier",
    "DiskWeigher": "disk_weight_multiplier",
    "CPUWeigher": "cpu_weight_multiplier",
    "IoOpsWeigher": "io_ops_weight_multiplier",
    "NumInstancesWeigher": "num_instances_weight_multiplier",
    "BuildFailureWeigher": "build_failure_weight_multiplier",
    "ServerGroupSoftAffinityWeigher": "soft_affinity_weight_multiplier",
    "ServerGroupSoftAntiAffinityWeigher": "soft_anti_affinity_weight_multiplier",
    "MetricsWeigher": "weight_multiplier",  # [metrics]; aggregates: metrics_weight_multiplier
    "HypervisorVersionWeigher": "hypervisor_version_weight_multiplier",
    "ImagePropertiesWeigher": "image_props_weight_multiplier",  # drawn by add_image_meta
}

#: option -> (Berth's group, Nova's group); None: Nova reads it from each ComputeNode.
OPTIONS = {
    "ram_allocation_ratio": ("filter_scheduler", None),
    "cpu_allocation_ratio": ("filter_scheduler", None),
    "disk_allocation_ratio": ("filter_scheduler", None),
    "service_down_time": ("scheduler", "DEFAULT"),
    "default_availability_zone": ("filter_scheduler", "DEFAULT"),
    "max_io_ops_per_host": ("filter_scheduler", "filter_scheduler"),
    "max_instances_per_host": ("filter_scheduler", "filter_scheduler"),
    "isolated_hosts": ("filter_scheduler", "filter_scheduler"),
    "isolated_images": ("filter_scheduler", "filter_scheduler"),
    "restrict_isolated_hosts_to_isolated_images": ("filter_scheduler", "filter_scheduler"),
    "image_properties_default_architecture": ("filter_scheduler", "filter_scheduler"),
    "aggregate_image_properties_isolation_namespace": ("filter_scheduler", "filter_scheduler"),
    "aggregate_image_properties_isolation_separator": ("filter_scheduler", "filter_scheduler"),
    "weight_setting": ("metrics", "metrics"),
    "required": ("metrics", "metrics"),
    "weight_multiplier": ("metrics", "metrics"),
    "weight_of_unavailable": ("metrics", "metrics"),
    "image_props_weight_setting": ("filter_scheduler", "filter_scheduler"),
    **{name: ("filter_scheduler", "filter_scheduler") for name in WEIGHERS.values()
       if name != "weight_multiplier"},
}


#: The aggregate metadata that overrides each weigher's multiplier (the image weigher's: add_image_meta).
MULTIPLIER_KEYS = [name for name in WEIGHERS.values()
                   if name not in ("weight_multiplier", "image_props_weight_multiplier")]
MULTIPLIER_KEYS.append("metrics_weight_multiplier")


@dataclasses.dataclass
class Profile:
    """What a family's cases may hold. The defaults keep out the inputs where Berth
    knowingly differs (see the test module's docstring)."""

    zero_vcpus: bool = True  # hosts reporting 0 vCPUs (CoreFilter: a known difference)
    non_finite: bool = False  # nan / inf in aggregate ratios and multipliers (a known difference)
    metric_keys: bool = False  # metrics through ComputeCapabilitiesFilter / JsonFilter (known)
    image_aliases: bool = True  # legacy names and non-canonical values of image properties
    custom_image_props: bool = False  # image properties that are not Nova's ImageMetaProps fields
    mismatched_ops: bool = False  # numeric operators on text values (Nova raises, Berth refuses)
    odd_queries: bool = False  # JsonFilter: "" arguments, dotted paths into non-dicts, text vs number
    hostless_ip: bool = False  # hosts reporting no host_ip under a build_near_host_ip hint
    findings: bool = False  # the inputs of the disagreements found so far
    #: What to draw more of, so that the filter meets passing and failing hosts alike:
    #: "aggregate_specs" (extra specs for aggregates only), "image_isolation" (image properties that
    #: aggregates name), "group" (always a server group, with members).
    focus: str = ""


def uid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def gen_case(seed, profile=None):
    """One random case; the same seed gives the same case."""
    profile = profile or Profile()
    rng = random.Random(seed)
    names = HOST_NAMES[: rng.randint(2, len(HOST_NAMES))]
    pool = [uid(rng) for _ in range(12)]  # instances in the cloud, each on one host or none
    unplaced = list(pool)
    rng.shuffle(unplaced)
    hosts = [gen_host(rng, name, unplaced, profile) for name in names]
    options = gen_options(rng, names)
    if options["required"] and not profile.findings:
        # Nova's MetricsWeigher raises when a required metric is missing (a finding): keep them all.
        for host in hosts:
            for entry in options["weight_setting"]:
                name = entry.split("=")[0]
                host["metrics"].setdefault(name, metric_value(rng, name))
    generated = {
        "seed": seed,
        "options": options,
        "hosts": hosts,
        "aggregates": [gen_aggregate(rng, i, names, profile) for i in range(rng.randint(0, 4) or 1)],
        "request": gen_request(rng, hosts, pool, options, profile),
    }
    add_image_meta(random.Random(f"image-meta-{seed}"), generated, profile)
    return generated


def gen_host(rng, name, unplaced, profile):
    memory = rng.choice([2048, 4096, 8192, 16384, 65536])
    disk = rng.choice([10, 40, 100, 500, 2000])
    vcpus = rng.choice(([0] if profile.zero_vcpus else []) + [1, 2, 4, 8, 16, 64])
    instances = [unplaced.pop() for _ in range(min(len(unplaced), rng.randint(0, 3)))]
    cpu_info = None
    if rng.random() < 0.8:
        cpu_info = {"arch": rng.choice(["x86_64", "aarch64"]), "vendor": rng.choice(["Intel", "AMD"]),
                    "model": rng.choice(["Skylake", "EPYC"]),
                    "features": sorted(rng.sample(FEATURES, rng.randint(0, 4)))}
        if rng.random() < 0.5:
            cpu_info["maxphysaddr"] = {"mode": "passthrough", "bits": rng.choice([39, 40, 46, 52])}
    arches = ["x86_64", "i686", "aarch64"] + (["AMD64", "i386"] if profile.image_aliases else [])
    hv_types = ["kvm", "qemu", "xen", "lxc"] + (["QEMU", "xapi"] if profile.image_aliases else [])
    modes = ["hvm", "xen", "exe"] + (["pv", "HVM"] if profile.image_aliases else [])
    return {
        "name": name,
        "nodename": rng.choice([name, name + ".node"]),
        "memory_mb": memory,
        "free_ram_mb": rng.choice([memory, rng.randint(-memory // 2, memory), memory // 2]),
        "local_gb": disk,
        "free_disk_gb": rng.choice([disk, rng.randint(-disk // 4, disk), 0]),
        "vcpus": vcpus,
        "vcpus_used": rng.choice([0, rng.randint(0, max(vcpus, 1) * 20), vcpus]),
        "instances": instances,
        "running_vms": len(instances) + rng.choice([0, 0, rng.randint(0, 60)]),
        "io_workload": rng.choice([0, 0, rng.randint(0, 12)]),
        "failed_builds": rng.choice([0, 0, 0, rng.randint(1, 5)]),
        "hypervisor_type": rng.choice(["QEMU", "kvm", "xen", "ironic"]),
        "hypervisor_version": rng.choice([4019000, 6001000, 8002000, 2012000, 0]),
        "host_ip": rng.choice(HOST_IPS + ([None] if profile.hostless_ip else [])),
        "cpu_info": cpu_info,
        "supported_instances": [[rng.choice(arches), rng.choice(hv_types), rng.choice(modes)]
                                for _ in range(rng.randint(0, 3))],
        "metrics": {m: metric_value(rng, m) for m in rng.sample(METRICS, rng.randint(0, len(METRICS)))},
        "disabled": rng.random() < 0.15,
        "age": rng.choice([1, 5, 30, 50, 70, 100, 1000]),  # seconds since its last report
    }


def metric_value(rng, name):
    """A whole number, as Nova's MonitorMetric holds it: percents from 0 to 100."""
    return rng.randint(0, 100) if name.endswith(".percent") else rng.randint(0, 3000)


def gen_options(rng, names):
    options = {
        "ram_allocation_ratio": rng.choice([1.0, 1.5, 0.5, 3.0]),
        "cpu_allocation_ratio": rng.choice([1.0, 4.0, 16.0, 0.5]),
        "disk_allocation_ratio": rng.choice([1.0, 1.5, 0.9]),
        "service_down_time": rng.choice([20, 60, 120]),
        "default_availability_zone": rng.choice(["nova", "az1"]),
        "max_io_ops_per_host": rng.choice([1, 2, 5, 8]),
        "max_instances_per_host": rng.choice([1, 3, 10, 50]),
        "isolated_hosts": rng.sample(names, rng.randint(0, 2)),
        "isolated_images": rng.sample(IMAGES, rng.randint(0, 2)),
        "restrict_isolated_hosts_to_isolated_images": rng.random() < 0.5,
        "image_properties_default_architecture": rng.choice([None, None, "x86_64", "aarch64"]),
        "aggregate_image_properties_isolation_namespace": rng.choice([None, None, "os"]),
        "aggregate_image_properties_isolation_separator": rng.choice([".", "_"]),
        "weight_setting": [f"{m}={rng.choice([-1.0, 0.5, 2.0, 0.0])}"
                           for m in rng.sample(METRICS, rng.randint(0, 2))],
        "required": rng.random() < 0.5,
        "weight_of_unavailable": rng.choice([-10000.0, -5.0]),
    }
    for name in WEIGHERS.values():
        if name == "image_props_weight_multiplier":
            continue
        # The soft (anti-)affinity multipliers may not be negative (min=0 on both sides).
        options[name] = rng.choice([1.0, 2.5, 0.0, 1000000.0] + ([] if "soft" in name else [-1.0, -0.5]))
    return options


def gen_aggregate(rng, index, names, profile):
    metadata = {}
    numbers = ["1.0", "1.5", "2", "0.5", "16", "abc", " 3 "] + (["nan", "inf"] if profile.non_finite else [])
    pools = {
        "ram_allocation_ratio": numbers, "cpu_allocation_ratio": numbers, "disk_allocation_ratio": numbers,
        "max_io_ops_per_host": ["1", "2", "5", "2.5", "abc", " 3 "],
        "max_instances_per_host": ["1", "3", "10", "4.0", "x"],
        "availability_zone": ["az1", "az2", "az1,az2", " az2 , az3", "nova"],
        "filter_tenant_id": ["p1", "p1,p2", " p2 , p3"],
        "filter_tenant_id_2": ["p4"],
        "instance_type": ["m1.small", "m1.small, m1.large", "tiny"],
        "ssd": ["true", "false"],
        "gpu": ["2, 4", "8", "2"],
        "tier": ["gold,silver", "bronze"],
        "os_distro": ["ubuntu", "ubuntu, centos", "windows"],
        "os_type": ["linux", "windows"],
        "hw_disk_bus": ["virtio", "scsi, virtio"],
        "os.distro": ["ubuntu"],
        **{name: ["-1.0", "2", "0", "0.5", "abc", "1e6"] + (["nan", "-inf"] if profile.non_finite else [])
           for name in MULTIPLIER_KEYS},
    }
    # Each kind of metadata with its own chance, so that every aggregate filter meets hosts both
    # inside and outside the aggregates it reads.
    kinds = [(["availability_zone"], 0.5), (["filter_tenant_id", "filter_tenant_id_2"], 0.3),
             (["instance_type"], 0.35), (["ssd"], 0.4), (["gpu"], 0.4), (["tier"], 0.3),
             (["os_distro", "os_type", "hw_disk_bus", "os.distro"], 0.5),
             (["ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio"], 0.5),
             (["max_io_ops_per_host", "max_instances_per_host"], 0.5), (MULTIPLIER_KEYS, 0.6)]
    for keys, chance in kinds:
        for key in rng.sample(keys, rng.randint(1, min(2, len(keys)))):
            if rng.random() < chance:
                metadata[key] = rng.choice(pools[key])
    return {"name": f"agg{index}", "hosts": rng.sample(names, rng.randint(1, len(names))),
            "metadata": metadata}


# Extra specs: key -> values of the host attribute it names (to pick requirement operands from).
NUMBERS = {
    "free_ram_mb": [0, 1024, 4096, 8192], "free_disk_mb": [0, 10240, 102400],
    "vcpus_total": [1, 4, 8, 16], "vcpus_used": [0, 8, 40], "num_instances": [0, 2, 20],
    "num_io_ops": [0, 3], "failed_builds": [0, 1], "total_usable_ram_mb": [4096, 16384],
    "total_usable_disk_gb": [40, 500], "disk_mb_used": [0, 10240], "hypervisor_version": [4019000, 6001000],
    "cpu_info:maxphysaddr:bits": [40, 46],
}
TEXTS = {
    "hypervisor_type": ["QEMU", "kvm", "xen"], "hypervisor_hostname": ["h0", "h1.node", "h2"],
    "host": ["h0", "h1"], "nodename": ["h1", "h2.node"], "host_ip": HOST_IPS[:3],
    "cpu_info:arch": ["x86_64", "aarch64"], "cpu_info:vendor": ["Intel", "AMD"],
    "cpu_info:features": FEATURES, "cpu_info:model": ["Skylake"],
}
#: Keys that read nothing in Nova's or Berth's HostState, or other scopes. (Not hw:cpu_policy:
#: Berth checks its value when a flavor is made, and dedicated takes the vCPUs as PCPU, which
#: Nova's legacy CoreFilter counted as VCPU.)
OTHER_KEYS = {"capabilities:no_such_thing": ["1"], "capabilities:cpu_info:no_such": ["x"],
              "hw:mem_page_size": ["large"], "capabilities:free_ram_mb:x": ["1"]}
AGGREGATE_KEYS = {"ssd": ["true", "false"], "gpu": ["2", "4", "8"], "tier": ["gold", "bronze"],
                  "no_such_key": ["x"]}
#: Keys read from the compute node's stats (a name that is no HostState attribute, or stats:<name>).
STATS_KEYS = {"capabilities:stats:num_instances": ["1", "0"], "capabilities:io_workload": ["0", "2"],
              "io_workload": ["0"], "capabilities:stats:failed_builds": ["0"]}
#: Nova's HostState attributes Berth's HostState does not have (for the findings run).
FINDING_KEYS = {"capabilities:cpu_allocation_ratio": ["16.0"],
                "capabilities:supported_instances": ["<in> kvm"], "capabilities:uuid": ["x"]}
NUMERIC_OPS = ["=", "==", "!=", ">=", "<=", "<or>", "s==", ""]
TEXT_OPS = ["s==", "s!=", "s<", "s<=", "s>", "s>=", "<in>", "<all-in>", "<or>", ""]


def requirement(rng, values, numeric, profile):
    if numeric and profile.mismatched_ops is False:
        op = rng.choice(NUMERIC_OPS)
    elif numeric:
        op = rng.choice(NUMERIC_OPS + TEXT_OPS)
    else:
        op = rng.choice(TEXT_OPS + (["=", ">=", "=="] if profile.mismatched_ops else []))
    picked = [str(rng.choice(values)) for _ in range(2)]
    if op == "":
        return picked[0]
    if op == "<or>":
        return "<or> " + " <or> ".join(picked)
    if op == "<all-in>":
        return "<all-in> " + " ".join(picked)
    return f"{op} {picked[0]}"


def gen_extra_specs(rng, profile):
    specs = {}
    for _ in range(rng.randint(1, 2) if profile.focus == "aggregate_specs" else rng.randint(0, 3)):
        kind = rng.uniform(0.45, 0.75) if profile.focus == "aggregate_specs" else rng.random()
        if kind < 0.45:
            name = rng.choice(sorted(NUMBERS) + sorted(TEXTS))
            numeric = name in NUMBERS
            values = NUMBERS.get(name) or TEXTS[name]
            scoped = ":" in name or rng.random() < 0.7
            key = f"capabilities:{name}" if scoped else name
        elif kind < 0.75:
            name = rng.choice(sorted(AGGREGATE_KEYS))
            key = rng.choice([name, f"aggregate_instance_extra_specs:{name}"])
            values, numeric = AGGREGATE_KEYS[name], name == "gpu"
        elif kind < 0.8:
            key = "hw:maxphysaddr_bits"
            specs[key] = str(rng.choice([39, 40, 46]))
            continue
        elif kind < 0.85:
            key = rng.choice(sorted(STATS_KEYS))
            values, numeric = STATS_KEYS[key], True
        elif profile.findings and kind < 0.95:
            key = rng.choice(sorted(FINDING_KEYS))
            values, numeric = FINDING_KEYS[key], False
            specs[key] = rng.choice(values)
            continue
        else:
            key = rng.choice(sorted(OTHER_KEYS))
            values, numeric = OTHER_KEYS[key], False
        if profile.metric_keys and rng.random() < 0.1:
            key, values, numeric = "capabilities:metrics:cpu.percent", [10, 50], True
        specs[key] = requirement(rng, values, numeric, profile)
    return specs


def gen_image(rng, profile):
    props = {}
    aliases = profile.image_aliases
    choices = {
        "hw_architecture": ["x86_64", "i686", "aarch64"] + (["amd64", "AMD64", "i386"] if aliases else []),
        "img_hv_type": ["kvm", "qemu", "xen", "lxc"] + (["QEMU", "xapi"] if aliases else []),
        "hw_vm_mode": ["hvm", "xen", "exe"] + (["pv", "hv", "HVM"] if aliases else []),
        "os_distro": ["ubuntu", "centos", "windows"],
        "os_type": ["linux", "windows"],
        "hw_disk_bus": ["virtio", "scsi"],
        "img_hv_requested_version": [">=6.0", "<5.0", ">= 4.19", ">=4.19,<6"],
    }
    if profile.findings:
        choices["hw_maxphysaddr_bits"] = ["40", "46"]
    keys = rng.sample(sorted(choices), rng.randint(0, 4))
    if profile.focus == "image_isolation":
        keys = rng.sample(["os_distro", "os_type", "hw_disk_bus"], rng.randint(1, 3))
    for key in keys:
        name = key
        if aliases and rng.random() < 0.3:
            name = LEGACY.get(key, key)
        props[name] = rng.choice(choices[key])
    if profile.custom_image_props and rng.random() < 0.5:
        props["os.distro"] = "ubuntu"
    return {"id": rng.choice(IMAGES + [None]), "properties": props}


#: Standard image property -> its legacy name (as Nova maps them).
LEGACY = {"hw_architecture": "architecture", "img_hv_type": "hypervisor_type", "hw_vm_mode": "vm_mode",
          "img_hv_requested_version": "hypervisor_version_requires", "os_distro": "vmware_ostype"}


def image_properties(rng, profile, choices, most=3):
    """Up to ``most`` of ``choices`` (standard name -> values), under legacy names too when the
    profile has aliases; sometimes a property under both names, with values that may differ."""
    props = {}
    for key in rng.sample(sorted(choices), rng.randint(0, most)):
        value = rng.choice(choices[key])
        if profile.image_aliases and key in LEGACY and rng.random() < 0.4:
            props[LEGACY[key]] = value
            if rng.random() < 0.3:
                props[key] = rng.choice(choices[key])
        else:
            props[key] = value
    return props


def add_image_meta(rng, case, profile):
    """What ImagePropertiesWeigher reads: the images of the hosts' instances, its options and
    aggregate multipliers, and legacy names in the request's image (kept out of the other draws, so
    that the cases of the seeds drawn before it stayed as they were)."""
    aliases = profile.image_aliases
    choices = {
        "hw_architecture": ["x86_64", "aarch64"] + (["amd64", "AMD64"] if aliases else []),
        "img_hv_type": ["kvm", "qemu"] + (["QEMU", "xapi"] if aliases else []),
        "hw_vm_mode": ["hvm", "xen"] + (["pv", "hv"] if aliases else []),
        "os_distro": ["ubuntu", "centos"],
        "hw_disk_bus": ["virtio", "scsi"],
        "img_hv_requested_version": [">=6.0", "<5.0"],
        # What Nova's ImageMetaProps reads otherwise than as written: the OS type in any case,
        # flexible booleans, integers, the legacy VMware adapter, image-required traits, and a
        # property that is not one of its fields (dropped).
        "os_type": ["linux", "windows"] + (["Linux", "WINDOWS"] if aliases else []),
        "hw_qemu_guest_agent": ["yes", "no"] + (["True", "on", "0", "maybe"] if aliases else []),
        "hw_cpu_cores": ["4", "2"] + (["04", " 2"] if aliases else []),
        "vmware_adaptertype": ["ide", "lsiLogic", "LsiLogicSAS"],
        "hw_vif_model": ["e1000", "virtio"] + (["VirtualE1000"] if aliases else []),
        "trait:CUSTOM_GOLD": ["required", "forbidden"],
        "custom_tag": ["a", "b"],
    }
    images = [image_properties(rng, profile, choices, most=5) for _ in range(3)]
    for h in case["hosts"]:
        h["instance_images"] = {u: rng.choice(images + [{}]) for u in h["instances"]}
    props = case["request"]["image"]["properties"]
    if aliases and rng.random() < 0.5:
        for key, value in rng.choice(images).items():
            props.setdefault(key, value)
    options = case["options"]
    options["image_props_weight_multiplier"] = rng.choice([1.0, 2.5, 0.0, -1.0, -0.5])
    options["image_props_weight_setting"] = rng.choice([
        [], [], ["hw_architecture=2.0", "os_distro=-1.0"], ["img_hv_type=0.5", "architecture=3.0"],
        ["hw_vm_mode=1.5", "img_hv_requested_version=1.0"]])
    for aggregate in case["aggregates"]:
        if rng.random() < 0.2:
            aggregate["metadata"]["image_props_weight_multiplier"] = rng.choice(["-1.0", "2", "0", "abc"])


def gen_query(rng, profile, depth=0):
    if depth < 2 and rng.random() < 0.35:
        return [rng.choice(["and", "or", "not"])] + [gen_query(rng, profile, depth + 1)
                                                     for _ in range(rng.randint(1, 3))]
    variables = {
        "$free_ram_mb": [0, 1024, 4096, 16384], "$free_disk_mb": [0, 10240, 102400],
        "$vcpus_total": [0, 4, 8, 16], "$vcpus_used": [0, 8], "$num_instances": [0, 5],
        "$total_usable_ram_mb": [4096, 16384], "$hypervisor_version": [4019000, 6001000, 5000000],
        "$hypervisor_hostname": ["h0", "h1.node", "h2"], "$hypervisor_type": ["QEMU", "kvm"],
        "$host": ["h0", "h3"], "$nodename": ["h1", "h1.node"],
        "$no_such_attribute": [1, 2],
    }
    if profile.findings:
        variables["$host_ip"] = HOST_IPS[:3]
    if profile.metric_keys:
        variables["$metrics.cpu.percent"] = [10, 100]
    if profile.odd_queries:
        variables["$free_ram_mb.x"] = [1]
        variables["$cpu_info.arch"] = ["x86_64"]
        variables[""] = ["", 1]
        variables["$no_such_attribute"] = [1, "x"]
    name = rng.choice(sorted(variables))
    values = variables[name]
    if profile.odd_queries and rng.random() < 0.1:
        values = values + ["text", 7]
    args = [name] + [rng.choice(values) for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.15:
        args.reverse()
    return [rng.choice(["=", "<", ">", "<=", ">=", "in"])] + args


def gen_request(rng, hosts, pool, options, profile):
    fits = [h["free_ram_mb"] for h in hosts if h["free_ram_mb"] > 0]
    flavor = {
        "name": rng.choice(FLAVORS),
        "memory_mb": rng.choice([256, 1024, 2048, 4096, 8192, 32768] + fits),
        "root_gb": rng.choice([0, 1, 10, 20, 80, 100]),
        "ephemeral_gb": rng.choice([0, 0, 5, 50]),
        "vcpus": rng.choice([1, 2, 4, 8, 16]),
        "extra_specs": gen_extra_specs(rng, profile),
    }
    hints = {}
    if rng.random() < 0.3:
        hints["same_host"] = rng.sample(pool, rng.randint(1, 2)) + ([uid(rng)] if rng.random() < 0.3 else [])
    if rng.random() < 0.3:
        hints["different_host"] = rng.sample(pool, rng.randint(1, 2))
    if rng.random() < 0.5:
        hints["query"] = json.dumps(gen_query(rng, profile))
    if rng.random() < 0.4:
        hints["build_near_host_ip"] = rng.choice(HOST_IPS)
        if rng.random() < 0.6:
            hints["cidr"] = rng.choice(["/24", "/16", "/8", "/32"])
    group = None
    if rng.random() < 0.8 or profile.focus == "group":
        policy = rng.choice(["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
        if profile.focus == "group":
            policy = rng.choice(["affinity", "anti-affinity"])
        group = {"uuid": uid(rng), "policy": policy, "rules": {},
                 "members": rng.sample(pool, rng.randint(2 if profile.focus == "group" else 0, 6))}
        if policy == "anti-affinity" and rng.random() < 0.5:
            group["rules"] = {"max_server_per_host": rng.randint(1, 3)}
    retry = [[h["name"], rng.choice([h["nodename"], h["nodename"] + "x"])]
             for h in rng.sample(hosts, rng.randint(0, 2))] if rng.random() < 0.4 else []
    return {
        "instance_uuid": uid(rng),
        "flavor": flavor,
        "image": gen_image(rng, profile),
        "project_id": rng.choice(PROJECTS),
        "availability_zone": rng.choice([None] + ZONES),
        "hints": hints,
        "group": group,
        "retry": retry,
    }


# --- Berth ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class BerthSide:
    conf: object
    table: object
    spec: object


def build_berth(case):
    from berth_contract.host_report import HostReport
    from berth_contract.request_spec import RequestSpec
    from scheduler import conf as berth_conf
    from scheduler.conf import opts
    from scheduler.policy.host_state import HostTable

    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-nova-parity", default_config_files=[])
    for name, value in case["options"].items():
        conf.set_override(name, value, OPTIONS[name][0])

    table = HostTable()
    now = time.monotonic()
    for h in case["hosts"]:
        report = {
            "host": h["name"], "nodename": h["nodename"], "memory_mb": h["memory_mb"],
            "free_ram_mb": h["free_ram_mb"], "local_gb": h["local_gb"], "free_disk_gb": h["free_disk_gb"],
            "vcpus": h["vcpus"], "vcpus_used": h["vcpus_used"], "instance_uuids": list(h["instances"]),
            "running_vms": h["running_vms"], "io_workload": h["io_workload"],
            "failed_builds": h["failed_builds"], "hypervisor_type": h["hypervisor_type"],
            "hypervisor_version": h["hypervisor_version"], "supported_instances": h["supported_instances"],
            "metrics": dict(h["metrics"]),
            "stats": {"num_instances": h["running_vms"], "io_workload": h["io_workload"],
                      "failed_builds": h["failed_builds"]},
        }
        for key in ("host_ip", "cpu_info"):
            if h[key] is not None:
                report[key] = h[key]
        counts = image_property_counts(h)
        if counts:
            report["image_properties"] = counts
        row = table.add(h["name"], h["nodename"])
        table.update_from_report(row, HostReport.from_wire(report, h["name"]), now - h["age"])
        table.view(row).disabled = h["disabled"]
    table.set_aggregates([dict(a) for a in case["aggregates"]])

    req = case["request"]
    request_spec = {
        "instance_uuids": [req["instance_uuid"]],
        "instance_type": dict(req["flavor"]),
        "image": {k: v for k, v in req["image"].items() if v is not None},
        "instance_properties": {"project_id": req["project_id"],
                                "availability_zone": req["availability_zone"]},
    }
    filter_properties = {"scheduler_hints": dict(req["hints"]),
                         "retry": {"num_attempts": len(req["retry"]), "hosts": req["retry"]}}
    spec = RequestSpec.from_wire(request_spec, filter_properties)
    # What scheduler.planning.lookups.prepare_spec fills in from the database.
    where = {u: h["name"] for h in case["hosts"] for u in h["instances"]}
    for hint, field in (("same_host", "same_host_hosts"), ("different_host", "different_host_hosts")):
        if req["hints"].get(hint):
            setattr(spec, field, sorted({where[u] for u in req["hints"][hint] if u in where}))
    group = req["group"]
    if group is not None:
        placed = {u: where[u] for u in group["members"] if u in where}
        spec.group = {"uuid": group["uuid"], "name": None, "policy": group["policy"],
                      "rules": dict(group["rules"]), "members": list(group["members"]),
                      "placed": sorted(placed), "hosts": dict(collections.Counter(placed.values()))}
    return BerthSide(conf, table, spec)


def image_property_counts(h):
    """The image_properties an agent holding the host's instances reports."""
    from compute_agent.resource_tracker import ResourceTracker

    tracker = ResourceTracker(h["name"], {"memory_mb": 1 << 20, "local_gb": 1 << 20, "vcpus": 1 << 10})
    flavor = {"memory_mb": 1, "root_gb": 0, "ephemeral_gb": 0, "vcpus": 1}
    for u, props in h.get("instance_images", {}).items():
        tracker.claim(u, flavor, image_properties=props)
    return tracker.report()["image_properties"]


# --- Nova ----------------------------------------------------------------------------------------

_nova_ready = False
CELL = "00000000-0000-4000-8000-0000000000ce"


def nova_conf():
    global _nova_ready
    import nova.conf
    from nova import objects

    conf = nova.conf.CONF
    if not _nova_ready:
        logging.getLogger("nova").setLevel(logging.ERROR)  # deprecation warnings of the old filters
        objects.register_all()
        conf([], project="nova", default_config_files=[])
        _nova_ready = True
    return conf


@dataclasses.dataclass
class NovaSide:
    hosts: list
    spec: object


def build_nova(case):
    from nova import objects
    from nova.scheduler import host_manager

    conf = nova_conf()
    for name, (_, group) in OPTIONS.items():
        if group is not None:
            conf.clear_override(name, None if group == "DEFAULT" else group)
    for name, value in case["options"].items():
        group = OPTIONS[name][1]
        if group is not None:
            conf.set_override(name, value, None if group == "DEFAULT" else group)
    options = case["options"]

    now = datetime.datetime.utcnow()
    aggregates = [objects.Aggregate(id=i + 1, uuid=str(uuid.UUID(int=i + 1)), name=a["name"],
                                    hosts=list(a["hosts"]), metadata=dict(a["metadata"]))
                  for i, a in enumerate(case["aggregates"])]
    hosts = []
    for h in case["hosts"]:
        compute = objects.ComputeNode(
            uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, h["name"])), host=h["name"],
            hypervisor_hostname=h["nodename"], memory_mb=h["memory_mb"], free_ram_mb=h["free_ram_mb"],
            memory_mb_used=h["memory_mb"] - h["free_ram_mb"], local_gb=h["local_gb"],
            free_disk_gb=h["free_disk_gb"], local_gb_used=h["local_gb"] - h["free_disk_gb"],
            disk_available_least=None, vcpus=h["vcpus"], vcpus_used=h["vcpus_used"], updated_at=None,
            numa_topology=None, pci_device_pools=objects.PciDevicePoolList(objects=[]),
            host_ip=h["host_ip"], hypervisor_type=h["hypervisor_type"],
            hypervisor_version=h["hypervisor_version"],
            cpu_info=None if h["cpu_info"] is None else json.dumps(h["cpu_info"], sort_keys=True),
            supported_hv_specs=[objects.HVSpec.from_list(t) for t in h["supported_instances"]],
            stats={"num_instances": str(h["running_vms"]), "io_workload": str(h["io_workload"]),
                   "failed_builds": str(h["failed_builds"])},
            metrics=None,  # set below, as the HostState holds them
            # Unset: Nova's compute node starts from its initial_*_allocation_ratio.
            cpu_allocation_ratio=options.get("cpu_allocation_ratio", conf.initial_cpu_allocation_ratio),
            ram_allocation_ratio=options.get("ram_allocation_ratio", conf.initial_ram_allocation_ratio),
            disk_allocation_ratio=options.get("disk_allocation_ratio", conf.initial_disk_allocation_ratio),
        )
        service = {"host": h["name"], "binary": "nova-compute", "disabled": h["disabled"],
                   "disabled_reason": None, "forced_down": False, "created_at": now,
                   "last_seen_up": now - datetime.timedelta(seconds=h["age"])}
        state = host_manager.HostState(h["name"], h["nodename"], CELL)
        state.update(compute=compute, service=service,
                     aggregates=[a for a in aggregates if h["name"] in a.hosts],
                     inst_dict={u: nova_instance(u, h) for u in h["instances"]})
        # Nova's MonitorMetricList.from_json reads percents stored as fractions (times 100, then
        # truncated to an int): the list the HostState ends up with is built directly instead.
        state.metrics = objects.MonitorMetricList(objects=[
            objects.MonitorMetric(name=m, value=v, timestamp=now, source="parity")
            for m, v in h["metrics"].items()])
        hosts.append(state)

    req = case["request"]
    flavor = objects.Flavor(name=req["flavor"]["name"], flavorid="parity", swap=0,
                            **{k: v for k, v in req["flavor"].items() if k != "name"})
    image = objects.ImageMeta.from_dict({k: v for k, v in req["image"].items() if v is not None})
    group = None
    if req["group"] is not None:
        g = req["group"]
        where = {u: h["name"] for h in case["hosts"] for u in h["instances"]}
        group = objects.InstanceGroup(
            uuid=g["uuid"], policy=g["policy"],
            rules={k: str(v) for k, v in g["rules"].items()},
            members=list(g["members"]) + [req["instance_uuid"]],
            hosts=sorted({where[u] for u in g["members"] if u in where}))
        group.policies = [g["policy"]]  # as InstanceGroup._from_db_object sets it
    retry = objects.SchedulerRetries(num_attempts=len(req["retry"]), hosts=objects.ComputeNodeList(
        objects=[objects.ComputeNode(host=h, hypervisor_hostname=n) for h, n in req["retry"]]))
    spec = objects.RequestSpec(
        instance_uuid=req["instance_uuid"], num_instances=1, flavor=flavor, image=image,
        project_id=req["project_id"], availability_zone=req["availability_zone"],
        scheduler_hints={k: v if isinstance(v, list) else [v] for k, v in req["hints"].items()},
        instance_group=group, retry=retry if req["retry"] else None,
        ignore_hosts=[], force_hosts=[], force_nodes=[])
    return NovaSide(hosts, spec)


def nova_instance(u, h):
    """An objects.Instance with its image's properties in system metadata, as Nova's compute keeps
    them (each under image_<name>, its value as text)."""
    from nova import objects

    props = h.get("instance_images", {}).get(u, {})
    return objects.Instance(uuid=u, host=h["name"], image_ref=None,
                            system_metadata={f"image_{k}": str(v) for k, v in props.items()})


@contextlib.contextmanager
def nova_cells():
    """Nova's ImagePropertiesWeigher looks the host's cell up and loads its instances' system
    metadata from the cell's database: here there is one cell and the instances hold theirs."""
    from unittest import mock

    from nova import context as nova_context
    from nova import objects

    nova_conf()  # registers Nova's objects

    @contextlib.contextmanager
    def target_cell(context, cell_mapping):
        yield context

    with mock.patch.object(objects.CellMapping, "get_by_uuid",
                           side_effect=lambda ctxt, cell_uuid: objects.CellMapping(uuid=cell_uuid)), \
            mock.patch.object(nova_context, "target_cell", target_cell):
        yield


def build(case):
    """Berth and Nova, each built from ``case``."""
    return build_berth(case), build_nova(case)


def shown(case):
    return json.dumps(case, indent=1, sort_keys=True)


# --- hand-made cases -----------------------------------------------------------------------------


def host(name, **facts):
    """One host, as gen_host makes them, with plain figures unless ``facts`` say otherwise."""
    return {"name": name, "nodename": name, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100,
            "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instances": [], "running_vms": 0,
            "io_workload": 0, "failed_builds": 0, "hypervisor_type": "QEMU", "hypervisor_version": 6001000,
            "host_ip": "10.0.1.5", "cpu_info": None, "supported_instances": [["x86_64", "qemu", "hvm"]],
            "metrics": {}, "disabled": False, "age": 1, "instance_images": {}, **facts}


def case(hosts, aggregates=(), options=None, **request):
    """A case from its hosts (host()), aggregates and request fields; the rest plain."""
    req = {"instance_uuid": "99999999-9999-4999-8999-999999999999",
           "flavor": {"name": "m1.small", "memory_mb": 1024, "root_gb": 10, "ephemeral_gb": 0, "vcpus": 1,
                      "extra_specs": {}},
           "image": {"id": IMAGES[0], "properties": {}}, "project_id": "p1", "availability_zone": None,
           "hints": {}, "group": None, "retry": []}
    for key, value in request.items():
        if key == "extra_specs":
            req["flavor"] = dict(req["flavor"], extra_specs=value)
        elif key == "image_properties":
            req["image"] = dict(req["image"], properties=value)
        else:
            req[key] = value
    return {"seed": None, "options": dict(options or {}), "hosts": list(hosts),
            "aggregates": [dict({"name": f"agg{i}", "hosts": [], "metadata": {}}, **a)
                           for i, a in enumerate(aggregates)],
            "request": req}
