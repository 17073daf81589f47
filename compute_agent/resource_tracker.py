"""The compute agent's resource accounting: what its instances use of the host, minus reserves.

Pure accounting: no I/O, no messaging. Usage is recomputed from the amounts
(scheduler's resource classes) of the flavors of the instances the agent holds
a claim for, never read from the hypervisor, and every "used" value includes
the host's reserves::

    memory_mb_used = reserved_host_memory_mb + sum(MEMORY_MB)
    local_gb_used  = reserved_host_disk_mb / 1024 + sum(DISK_GB)
    vcpus_used     = reserved_host_cpus + sum(VCPU)
    free_ram_mb    = memory_mb - memory_mb_used      (negative under overcommit)
    free_disk_gb   = local_gb - local_gb_used        (negative under overcommit)

A flavor's amounts are its sizes unless its extra specs say otherwise, as Nova
translates a flavor for Placement: ``resources:DISK_GB=0`` (booted from a volume)
takes no local disk, ``hw:cpu_policy=dedicated`` takes its vCPUs as PCPU.

A claim is Nova's claim test against the limits the scheduler computed
(scheduler.policy.filters.resources: Placement's ``(total - reserved) * ratio``
for the instances, plus the reserve the "used" figures count): ``free = limit -
used``; the claim fails when the request is larger than ``free``. A missing or
None limit is unlimited. Every other class of the flavor's amounts (PCPU, VGPU, CUSTOM_*...)
is claimed against the host's Inventory of it, whatever the limits, so that a
unit is never given twice even when two schedulers choose this host at once.
"""

import datetime
import itertools
import re
import threading

from berth_contract import image_meta
from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor
from berth_contract.resource_classes import CLASSIC, DISK_GB, MEMORY_MB, VCPU
from compute_agent import inventory
from scheduler.version import version

FLAVOR_KEYS = ("memory_mb", "root_gb", "ephemeral_gb", "vcpus")
#: The scheduler takes at most this many stats, each name short printable text.
MAX_STATS = 200
_STAT_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,255}")


class ClaimFailed(Exception):
    """The host cannot hold the instance; the message names the resource."""

    def __init__(self, resource, message):
        super().__init__(message)
        self.resource = resource


def isotime(when=None):
    """ISO-8601 UTC with a trailing Z, as every report carries."""
    when = when or datetime.datetime.now(datetime.UTC)
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _num(value):
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _fmt(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def _gb(mb):
    """MiB as GiB, an int when whole (so that reports stay integral by default)."""
    gb = mb / 1024
    return int(gb) if gb.is_integer() else gb


def normalize_flavor(flavor):
    """The four sizes of a flavor that count, missing or None ones as 0."""
    flavor = flavor or {}
    return {key: _num(flavor.get(key)) for key in FLAVOR_KEYS}


def flavor_amounts(flavor):
    """{resource class: units} a flavor of the wire (its sizes and extra_specs) takes."""
    sizes = normalize_flavor(flavor)
    extra_specs = (flavor or {}).get("extra_specs") or {}
    return Flavor(sizes["memory_mb"], sizes["root_gb"], sizes["ephemeral_gb"], sizes["vcpus"],
                  extra_specs=extra_specs).amounts


def larger_amounts(*amounts):
    """Per class, the largest of ``amounts`` ({class: units} each): what a resize holds."""
    larger = {}
    for each in amounts:
        for name, units in each.items():
            larger[name] = max(larger.get(name, 0), units)
    return larger


def larger_flavor(*flavors):
    """Per resource (memory, disk, vCPUs), the largest of ``flavors``, normalized: what a resize
    holds until it ends. The disk is counted whole, as root_gb."""
    sizes = [normalize_flavor(flavor) for flavor in flavors]
    return {"memory_mb": max(size["memory_mb"] for size in sizes),
            "root_gb": max(size["root_gb"] + size["ephemeral_gb"] for size in sizes),
            "ephemeral_gb": 0,
            "vcpus": max(size["vcpus"] for size in sizes)}


class ResourceTracker:
    def __init__(
        self,
        host,
        totals,
        nodename=None,
        hypervisor_type="fake",
        reserved_host_memory_mb=0,
        reserved_host_disk_mb=0,
        reserved_host_cpus=0,
        started_at=None,
        measure=None,
        cpu_arch=None,
        vm_modes=(),
        facts=None,
        configured=None,
        traits=(),
    ):
        self.host = host
        self.nodename = nodename or host
        self.hypervisor_type = hypervisor_type
        self.reserved_host_memory_mb = reserved_host_memory_mb
        self.reserved_host_disk_mb = reserved_host_disk_mb
        self.reserved_host_cpus = reserved_host_cpus
        self.started_at = started_at or isotime()
        # ``measure(instances, now) -> {"load": HostLoad, "instance_usage": {...}}``: the driver's
        # measured load and reservation figures, and its instances' usage, if any.
        self.measure = measure
        self.cpu_arch = cpu_arch
        self.vm_modes = list(vm_modes or ())
        #: HostReport fields the driver reads from the host: cpu_info, hypervisor_version, host_ip
        #: (ComputeCapabilitiesFilter, JsonFilter...).
        self.facts = dict(facts or {})
        #: What [compute_agent] adds to the driver's totals (compute_agent.inventory.Configured).
        self.configured = configured or inventory.Configured()
        #: The host's traits: the driver's (its CPU's) and the operator's.
        self.traits = sorted(set(traits) | set(self.configured.traits))
        #: Builds failed in a row (BuildFailureWeigher); a successful build resets it.
        self.failed_builds = 0
        #: Builds and deletes in progress (IoOpsFilter), set by the agent before each report.
        self.io_workload = 0
        self._lock = threading.Lock()
        self._instances = {}  # uuid -> normalized flavor
        self._amounts = {}  # uuid -> {resource class: units} it holds
        self._image_properties = {}  # uuid -> {(standard property, value as text)} of its image
        self._owners = {}  # uuid -> (project_id, the image's os_type), either None
        # Numbers this process's reports, so that a scheduler can tell an old one from a new one.
        self._report_numbers = itertools.count(1)
        self.set_totals(totals)

    @classmethod
    def from_conf(cls, conf, host, nodename, driver, started_at=None):
        """The tracker of ``driver``'s host; ValueError (NotOnThisHost) on a configuration it
        cannot hold (a cpu_dedicated_set naming CPUs the host does not have)."""
        opts = conf.compute_agent
        configured = inventory.from_conf(conf)
        inventory.check_host_cpus(configured.dedicated_cpus, driver.cpu_ids())
        facts = dict(driver.get_facts())
        return cls(
            host,
            driver.get_totals(),
            nodename=nodename,
            hypervisor_type=facts.pop("hypervisor_type", driver.hypervisor_type),
            cpu_arch=facts.pop("cpu_arch", None),
            vm_modes=facts.pop("vm_modes", ()),
            reserved_host_memory_mb=opts.reserved_host_memory_mb,
            reserved_host_disk_mb=opts.reserved_host_disk_mb,
            reserved_host_cpus=opts.reserved_host_cpus,
            started_at=started_at,
            measure=driver.measure if driver.capabilities.measures_usage else None,
            facts=facts,
            configured=configured,
            traits=[*driver.get_traits(), *driver.capabilities.traits()],
        )

    def set_totals(self, totals):
        with self._lock:
            self.memory_mb = _num(totals.get("memory_mb"))
            self.local_gb = _num(totals.get("local_gb"))
            # The dedicated CPUs are PCPU: the classic figure is the shared ones.
            self.vcpus = max(_num(totals.get("vcpus")) - len(self.configured.dedicated_cpus), 0)
            self._inventories = inventory.host_inventories(
                self.vcpus, self.memory_mb, self.local_gb, self.reserved_host_cpus,
                self.reserved_host_memory_mb, self.reserved_host_disk_mb, self.configured)

    # -- usage -------------------------------------------------------------

    def _used(self):
        held = self._amounts.values()
        memory = self.reserved_host_memory_mb + sum(a.get(MEMORY_MB, 0) for a in held)
        disk = _gb(self.reserved_host_disk_mb) + sum(a.get(DISK_GB, 0) for a in held)
        vcpus = self.reserved_host_cpus + sum(a.get(VCPU, 0) for a in held)
        return memory, disk, vcpus

    def _usages(self):
        """{resource class: units its instances take} of every class they take (reserves not counted)."""
        usages = {}
        for amounts in self._amounts.values():
            for name, units in amounts.items():
                usages[name] = usages.get(name, 0) + units
        return usages

    def usage(self):
        """``(memory_mb_used, local_gb_used, vcpus_used)``, reserves included."""
        with self._lock:
            return self._used()

    def __contains__(self, uuid):
        with self._lock:
            return uuid in self._instances

    def instance_uuids(self):
        with self._lock:
            return sorted(self._instances)

    # -- claims ------------------------------------------------------------

    def claim(self, uuid, flavor, limits=None, image_properties=None, project_id=None, amounts=None,
              checked=True):
        """Hold ``flavor``'s resources for ``uuid`` if they fit within ``limits`` and the host's
        inventories (``image_properties``: its image's, counted in reports for ImagePropertiesWeigher
        in their standard form, berth_contract.image_meta; ``project_id`` and the image's
        ``os_type`` are counted in the report's stats). ``amounts``: the classes held, when not
        ``flavor``'s own (a resize's larger of two); not ``checked``: held whatever is free (an
        instance the agent already has, loaded at start).

        Returns True when claimed, False when ``uuid`` was already held (a
        redelivered request: nothing changes). Raises ClaimFailed otherwise.
        """
        wanted = normalize_flavor(flavor)
        amounts = dict(flavor_amounts(flavor) if amounts is None else amounts)
        limits = limits or {}
        with self._lock:
            if uuid in self._instances:
                return False
            if checked:
                self._check(amounts, limits)
                self._check_classes(amounts)
            self._instances[uuid] = wanted
            self._amounts[uuid] = amounts
            if isinstance(image_properties, dict) and image_properties:
                kept = image_meta.kept_by_compute(image_properties)
                self._image_properties[uuid] = set(image_meta.nova_props(kept).items())
            os_type = image_properties.get("os_type") if isinstance(image_properties, dict) else None
            self._owners[uuid] = (project_id if isinstance(project_id, str) else None,
                                  os_type if isinstance(os_type, str) else None)
            return True

    def _check(self, wanted, limits, only_positive=False):
        """Raise ClaimFailed unless ``wanted`` ({class: units}: its MEMORY_MB, DISK_GB and VCPU)
        fits in ``limits`` on top of what is held; ``only_positive``: resources asked none of
        are not checked."""
        memory, disk, vcpus = self._used()
        checks = (
            ("memory", "memory_mb", "MB", wanted.get(MEMORY_MB, 0), memory),
            ("disk", "disk_gb", "GB", wanted.get(DISK_GB, 0), disk),
            ("vcpu", "vcpu", "VCPU", wanted.get(VCPU, 0), vcpus),
        )
        for resource, key, unit, requested, used in checks:
            limit = limits.get(key)
            if limit is None or (only_positive and requested <= 0):
                continue
            free = limit - used
            if requested > free:
                raise ClaimFailed(
                    resource,
                    f"Insufficient {resource}: requested {_fmt(requested)} {unit}, "
                    f"free {_fmt(free)} {unit} of limit {_fmt(limit)} {unit}",
                )

    def _check_classes(self, wanted, held=None):
        """Raise ClaimFailed unless each class of ``wanted`` ({class: units}) but the classic
        three fits in the host's inventory of it on top of what is held. ``held``: what the
        instance holds already (a resize): only a class it would hold more of is checked."""
        held = held or {}
        more = {name: units for name, units in wanted.items()
                if name not in CLASSIC and units > held.get(name, 0)}
        used = self._usages() if more else {}
        for name, units in more.items():
            before = held.get(name, 0)
            inv = self._inventories.get(name)
            why = "this host has none" if inv is None else inv.refuses(used.get(name, 0) - before, units)
            if why is not None:
                raise ClaimFailed(name, f"Insufficient {name}: requested {units}, {why}")

    def resize(self, uuid, new_flavor, limits=None):
        """Hold, for the held ``uuid``, per resource the larger of what it holds and of
        ``new_flavor`` until the resize ends (settle_resize): a revert always fits, and a
        shrink gives nothing away before it is confirmed. Only the increase is checked
        against ``limits``, the instance's own usage counted as used.

        Returns the flavor now held. Raises ClaimFailed (nothing changes), KeyError when
        ``uuid`` is not held.
        """
        limits = limits or {}
        new_amounts = flavor_amounts(new_flavor)
        with self._lock:
            held = self._instances[uuid]
            held_amounts = self._amounts[uuid]
            target = larger_flavor(held, new_flavor)
            target_amounts = larger_amounts(held_amounts, new_amounts)
            self._check({name: target_amounts.get(name, 0) - held_amounts.get(name, 0) for name in CLASSIC},
                        limits, only_positive=True)
            self._check_classes(new_amounts, held_amounts)
            self._instances[uuid] = target
            self._amounts[uuid] = target_amounts
            return dict(target)

    def settle_resize(self, uuid, flavor):
        """Hold exactly ``flavor`` for the held ``uuid`` (the resize confirmed, or reverted):
        never more than resize() held, so nothing is checked. True if ``uuid`` is held."""
        with self._lock:
            if uuid not in self._instances:
                return False
            self._instances[uuid] = normalize_flavor(flavor)
            self._amounts[uuid] = dict(flavor_amounts(flavor))
            return True

    def build_finished(self, succeeded):
        """Count a failed build, or reset the count after a successful one."""
        with self._lock:
            self.failed_builds = 0 if succeeded else self.failed_builds + 1

    def free(self, uuid):
        """Release ``uuid``'s claim; True if it was held."""
        with self._lock:
            self._image_properties.pop(uuid, None)
            self._owners.pop(uuid, None)
            self._amounts.pop(uuid, None)
            return self._instances.pop(uuid, None) is not None

    # -- the compute node record --------------------------------------------

    def _image_property_counts(self):
        """{property: {value: how many of the instances held have an image with it}}."""
        counts = {}
        for pairs in self._image_properties.values():
            for key, value in pairs:
                per_value = counts.setdefault(key, {})
                per_value[value] = per_value.get(value, 0) + 1
        return counts

    def _stats(self):
        """Nova's compute node stats: instances, builds and I/O in progress, instances per
        project and per OS type (ComputeCapabilitiesFilter and JsonFilter read them)."""
        building = min(int(self.io_workload), len(self._instances))
        stats = {"num_instances": len(self._instances), "io_workload": int(self.io_workload),
                 "failed_builds": self.failed_builds, "num_vm_active": len(self._instances) - building}
        if building:
            stats["num_vm_building"] = stats["num_task_spawning"] = building
        for project, os_type in self._owners.values():
            for key in (f"num_proj_{project}" if project else "",
                        f"num_os_type_{os_type}" if os_type else ""):
                if _STAT_NAME.fullmatch(key):
                    stats[key] = stats.get(key, 0) + 1
        if len(stats) > MAX_STATS:  # past the scheduler's bound: the per-project counts give way
            stats = {k: v for k, v in stats.items() if not k.startswith("num_proj_")}
        return dict(list(stats.items())[:MAX_STATS])

    def _metrics(self, memory_used, vcpus_used):
        """Allocation-based metrics (MetricsWeigher's weight_setting names these)."""
        metrics = {
            "memory.used_mb": memory_used,
            "memory.free_mb": self.memory_mb - memory_used,
            "vcpus.used": vcpus_used,
            "instances": len(self._instances),
        }
        if self.memory_mb:
            metrics["memory.percent"] = round(100.0 * memory_used / self.memory_mb, 3)
        if self.vcpus:
            metrics["cpu.percent"] = round(100.0 * vcpus_used / self.vcpus, 3)
        return metrics

    def report(self, now=None):
        """The compute-node record the agent sends as ``report_resources``."""
        with self._lock:
            memory, disk, vcpus = self._used()
            instances = dict(self._instances)
            usages = self._usages()
            inventories = {name: inv.to_wire() for name, inv in self._inventories.items()}
            report = HostReport(
                host=self.host,
                nodename=self.nodename,
                hypervisor_type=self.hypervisor_type,
                memory_mb=self.memory_mb,
                memory_mb_used=memory,
                free_ram_mb=self.memory_mb - memory,
                local_gb=self.local_gb,
                local_gb_used=disk,
                free_disk_gb=self.local_gb - disk,
                vcpus=self.vcpus,
                vcpus_used=vcpus,
                running_vms=len(self._instances),
                instance_uuids=sorted(self._instances),
                reserved_host_memory_mb=self.reserved_host_memory_mb,
                reserved_host_disk_mb=self.reserved_host_disk_mb,
                reserved_host_cpus=self.reserved_host_cpus,
                cpu_arch=self.cpu_arch,
                vm_modes=list(self.vm_modes),
                io_workload=int(self.io_workload),
                failed_builds=self.failed_builds,
                metrics=self._metrics(memory, vcpus),
                reported_at=isotime(now),
                started_at=self.started_at,
                report_seq=next(self._report_numbers),
                image_properties=self._image_property_counts(),
                stats=self._stats(),
                version=version(),
                inventories=inventories,
                usages={name: usages.get(name, 0) for name in inventories},
                traits=list(self.traits),
                **self.facts,
            )
        if self.measure is not None:
            report = report._replace(**self.measure(instances, now))
        return report.to_wire()
