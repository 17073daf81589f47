"""Synthetic fleets (HostTables of random reports) and requests, reproducible from a seed: what
the decision benchmarks and the policy tests place on."""

import dataclasses
import time
import uuid

import numpy as np

from berth_contract.host_report import HostReport
from berth_contract.request_spec import RequestSpec
from scheduler.policy import host_load
from scheduler.policy.host_state import HostTable

FLAVORS = [
    {"name": "m1.tiny", "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1},
    {"name": "m1.small", "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "vcpus": 1},
    {"name": "m1.medium", "memory_mb": 4096, "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2},
    {"name": "m1.large", "memory_mb": 8192, "root_gb": 80, "ephemeral_gb": 0, "vcpus": 4},
    {"name": "m1.xlarge", "memory_mb": 16384, "root_gb": 160, "ephemeral_gb": 0, "vcpus": 8},
]


def random_report(rng, host, load=None):
    """A plausible agent report; ``load`` (0..1.6) is the share of RAM in use."""
    memory = int(rng.choice([65536, 131072, 262144, 524288]))
    disk = int(rng.choice([500, 1000, 2000, 4000]))
    vcpus = int(rng.choice([16, 32, 48, 64]))
    load = rng.uniform(0.0, 1.6) if load is None else load
    vms = int(rng.integers(0, 60))
    return {
        "host": host,
        "memory_mb": memory,
        "free_ram_mb": int(memory * (1 - load)),
        "local_gb": disk,
        "free_disk_gb": float(disk * (1 - rng.uniform(0.0, 1.05))),
        "vcpus": vcpus,
        "vcpus_used": float(rng.integers(0, vcpus * 17)),
        "running_vms": vms,
        "instance_uuids": [],
    }


def rich_facts(rng):
    """Random report keys the placement filters read: architecture, io, failures, metrics."""
    facts = {
        "cpu_arch": str(rng.choice(["x86_64", "aarch64", "x86_64"])),
        "hypervisor_type": str(rng.choice(["fake", "kvm", "qemu"])),
        "vm_modes": [str(m) for m in rng.choice(["hvm", "xen", "exe"], size=int(rng.integers(1, 3)))],
        "io_workload": int(rng.integers(0, 12)),
        "failed_builds": int(rng.integers(0, 3)) if rng.random() < 0.2 else 0,
        "metrics": {name: float(rng.integers(0, 100)) for name in ("cpu.percent", "memory.percent")
                    if rng.random() < 0.9},
    }
    if rng.random() < 0.05:
        facts.pop("cpu_arch")
    return facts


#: Resource classes beyond the classic three that hosts of the rich fleets may have.
CUSTOM_CLASSES = ("VGPU", "CUSTOM_FPGA", "SRIOV_NET_VF")
#: Traits hosts of the rich fleets may have, and requests may require or forbid.
TRAITS = ("HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F", "HW_CPU_X86_SSE42", "HW_CPU_X86_VMX",
          "HW_NIC_SRIOV", "STORAGE_DISK_SSD", "CUSTOM_GOLD", "CUSTOM_RACK_A")


def resource_facts(rng, report, presence=0.6):
    """Random inventories (the classic three as the report's figures, and some of PCPU and
    CUSTOM_CLASSES), their usages, and traits: what ResourceClassFilter and TraitsFilter read.
    Each class and each trait is on a host with probability ``presence``."""
    inventories = {
        "VCPU": {"total": report["vcpus"], "reserved": 0, "min_unit": 1, "max_unit": report["vcpus"],
                 "step_size": 1, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": report["memory_mb"], "reserved": 0, "min_unit": 1,
                      "max_unit": report["memory_mb"], "step_size": 1, "allocation_ratio": 1.0},
        "DISK_GB": {"total": report["local_gb"], "reserved": 0, "min_unit": 1,
                    "max_unit": report["local_gb"], "step_size": 1, "allocation_ratio": 1.0},
    }
    usages = {"VCPU": report["vcpus_used"], "MEMORY_MB": report["memory_mb"] - report["free_ram_mb"],
              "DISK_GB": report["local_gb"] - report["free_disk_gb"]}
    for name in ("PCPU", *CUSTOM_CLASSES):
        if rng.random() < presence:
            total = int(rng.choice([2, 4, 8, 16]))
            least = int(rng.choice([1, 1, 2]))
            inventories[name] = {
                "total": total, "reserved": int(rng.integers(0, 2)), "min_unit": least,
                "max_unit": max(least, int(rng.choice([total, total // 2]))),
                "step_size": int(rng.choice([1, 1, 2])),
                "allocation_ratio": float(rng.choice([1.0, 1.0, 1.5]))}
            usages[name] = int(rng.integers(0, total + 1))
    traits = [name for name in TRAITS if rng.random() < presence]
    return {"inventories": inventories, "usages": usages, "traits": traits}


def trait_metadata(rng, aggregates):
    """Some of ``aggregates`` require a trait of the requests their hosts take (IsolatedAggregateFilter)."""
    for aggregate in aggregates:
        if rng.random() < 0.3:
            aggregate["metadata"][f"trait:{rng.choice(TRAITS)}"] = "required"
    return aggregates


def resource_specs(rng, classes=1, required=1, forbidden=1, dedicated=0.3):
    """Extra specs asking for ``classes`` of CUSTOM_CLASSES (and, at random, dedicated CPUs),
    requiring ``required`` traits and forbidding ``forbidden``, each drawn at random."""
    specs = {}
    for name in rng.permutation(CUSTOM_CLASSES)[:classes]:
        specs[f"resources:{name}"] = str(int(rng.choice([1, 2])))
    if classes and rng.random() < dedicated:
        specs["hw:cpu_policy"] = "dedicated"
    picked = rng.permutation(TRAITS)
    for name in picked[:required]:
        specs[f"trait:{name}"] = "required"
    for name in picked[required:required + forbidden]:
        specs[f"trait:{name}"] = "forbidden"
    return specs


def random_aggregates(rng, hosts):
    """A few aggregates over ``hosts``: zones, ratio and multiplier overrides, tenants, traits."""
    found = []
    for i in range(6):
        members = [h for h in hosts if rng.random() < 0.3]
        metadata = {}
        if rng.random() < 0.5:
            metadata["ram_allocation_ratio"] = str(rng.choice(["1.0", "2.0", "0.5", "oops"]))
        if rng.random() < 0.5:
            metadata["cpu_allocation_ratio"] = str(rng.choice(["4.0", "32.0"]))
        if rng.random() < 0.5:
            metadata["disk_allocation_ratio"] = str(rng.choice(["1.5", "0.8"]))
        for key in ("ram_weight_multiplier", "disk_weight_multiplier", "io_ops_weight_multiplier",
                    "metrics_weight_multiplier", "soft_anti_affinity_weight_multiplier"):
            if rng.random() < 0.3:
                metadata[key] = str(rng.choice(["2.0", "-1.0", "0.0", "bad"]))
        if rng.random() < 0.3:
            metadata["filter_tenant_id"] = str(rng.choice(["p1", "p1,p2", "p3"]))
        if rng.random() < 0.6:
            metadata["ssd"] = str(rng.choice(["true", "false"]))
        zone = str(rng.choice(["az1", "az2"])) if i < 3 else None
        found.append({"name": f"agg-{i}", "hosts": members, "metadata": metadata,
                      "availability_zone": zone})
    return found


def rich_spec(seed=0, table=None, count=1):
    """A random request using the hints, extra specs and image properties the catalog reads."""
    rng = np.random.default_rng(seed + 10_000)
    spec = random_spec(seed, count)
    specs = {}
    for key, choices in (("ssd", ["true", "<or> true <or> false"]),
                         ("aggregate_instance_extra_specs:ssd", ["s== true"]),
                         ("capabilities:free_ram_mb", [">= 16384", "= 4096"]),
                         ("capabilities:hypervisor_type", ["s== kvm", "<in> e"]),
                         ("capabilities:metrics:cpu.percent", ["<= 50"])):
        if rng.random() < 0.3:
            specs[key] = str(rng.choice(choices))
    resource_rng = np.random.default_rng(seed + 30_000)  # its own stream: the others' draws stay put
    if resource_rng.random() < 0.6:
        specs.update(resource_specs(resource_rng, *(int(n) for n in resource_rng.integers(0, 3, size=3))))
    spec.flavor = dataclasses.replace(spec.flavor, extra_specs=specs)
    props = {}
    if rng.random() < 0.5:
        props["hw_architecture"] = str(rng.choice(["x86_64", "aarch64", "amd64"]))
    if rng.random() < 0.3:
        props["hw_vm_mode"] = str(rng.choice(["hvm", "xen"]))
    if resource_rng.random() < 0.2:
        allowed = [name for name in TRAITS if name not in spec.flavor.forbidden_traits]
        props[f"trait:{resource_rng.choice(allowed)}"] = "required"
    spec.image_properties = props
    spec.image_id = str(rng.choice(["img-1", "img-2"]))
    spec.project_id = str(rng.choice(["p1", "p2", "p4"]))
    if rng.random() < 0.5:
        spec.availability_zone = str(rng.choice(["az1", "az2", "nova"]))
    if table is not None and len(table):
        hosts = [table.names[int(r)] for r in rng.integers(0, len(table), size=5)]
        policy = str(rng.choice(["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]))
        rules = {"max_server_per_host": int(rng.integers(1, 3))}
        spec.group = {"uuid": "g", "policy": policy, "rules": rules,
                      "members": [], "placed": [], "hosts": {h: int(rng.integers(1, 3)) for h in hosts[:3]}}
        if rng.random() < 0.5:
            spec.same_host_hosts = hosts[1:4]
        spec.different_host_hosts = hosts[2:5]
    return dataclasses.replace(spec)  # a fresh copy: none of the request's traits cached before the changes


def random_fleet(n, seed=0, down_fraction=0.02, disabled_fraction=0.01, service_down_time=60,
                 rich=False, resources=None, presence=0.6):
    """A HostTable of ``n`` hosts; a few are silent past service_down_time or disabled.

    ``rich``: hosts also report architectures, io workload, failed builds,
    metrics, inventories and traits, and sit in random aggregates (zones, ratio and
    multiplier overrides, required traits). ``resources`` (default: ``rich``): the
    inventories, traits and trait-requiring aggregates alone, each class and trait on a
    host with probability ``presence``.
    """
    resources = rich if resources is None else resources
    rng = np.random.default_rng(seed)
    load_rng = np.random.default_rng(seed + 20_000)  # its own stream: the others' draws stay put
    resource_rng = np.random.default_rng(seed + 30_000)
    table = HostTable(capacity=n)
    now = time.monotonic()
    table.clock = lambda: now  # the load weighers' staleness and recent starts read the clock
    for i in range(n):
        host = f"host-{i:06d}"
        row = table.add(host)
        silent = rng.random() < down_fraction
        report = random_report(rng, host)
        if rich:
            report.update(rich_facts(rng))
        if resources:
            report.update(resource_facts(resource_rng, report, presence))
        report.update(load_facts(load_rng, report))
        age = service_down_time * 2 if silent else rng.uniform(0, 30)
        table.update_from_report(row, HostReport.from_wire(report, host), now - age)
        age_load(load_rng, table, row, now)
        table.disabled[row] = rng.random() < disabled_fraction
    if rich:
        table.set_aggregates(trait_metadata(resource_rng, random_aggregates(rng, table.names)))
    elif resources:
        table.set_aggregates(trait_metadata(resource_rng, [
            {"name": f"isolated-{i}", "hosts": table.names[i::7], "metadata": {}} for i in range(4)]))
    return table


def random_spec(seed=0, count=1, **filter_properties):
    rng = np.random.default_rng(seed)
    flavor = dict(FLAVORS[int(rng.integers(0, len(FLAVORS)))])
    return RequestSpec.from_wire(
        {
            "instance_uuids": [str(uuid.UUID(int=int(rng.integers(0, 2**62)) + i)) for i in range(count)],
            "instance_type": flavor,
        },
        filter_properties,
    )


def load_facts(rng, report):
    """Random reservation figures and measured load (scheduler.policy.host_load), some of them missing."""
    vcpus, memory = report["vcpus"], report["memory_mb"]
    facts = {}
    if rng.random() < 0.8:
        reserved = float(rng.uniform(0.3, 1.0))
        facts.update(cpu_reserved=report["vcpus_used"] * reserved,
                     memory_reserved_mb=(memory - report["free_ram_mb"]) * reserved)
        if facts["memory_reserved_mb"] < 0:
            del facts["memory_reserved_mb"]
        for key, base in (("cpu_burst", vcpus), ("memory_burst_mb", memory),
                          ("cpu_undeployed_reservation", vcpus),
                          ("memory_undeployed_reservation_mb", memory)):
            if rng.random() < 0.7:
                facts[key] = float(base * rng.uniform(0.0, 2.0))
    if rng.random() < 0.85:  # the rest have never been measured
        facts.update(cpu_utilization=float(rng.uniform(0.0, 1.0)),
                     memory_mb_in_use=float(memory * rng.uniform(0.0, 1.0)),
                     utilization_sampled_at=str(rng.integers(0, 2**31)))
    return facts


def age_load(rng, table, row, now):
    """Make some measured hosts stale and give some recent placements, for the load weighers."""
    if rng.random() < 0.1:
        table.util_at[row] = now - float(rng.uniform(500, 2000))
    for i in range(int(rng.integers(0, 4))):
        host_load.record_start(table, row, f"recent-{row}-{i}", now - float(rng.uniform(0, 900)))
