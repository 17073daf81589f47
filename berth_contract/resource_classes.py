"""Resource classes: what an instance takes of a host, class by class.

A flavor takes its vCPUs as ``VCPU``, its RAM as ``MEMORY_MB`` and its root and
ephemeral disk as ``DISK_GB``, as Nova's flavors do. Its extra specs change that
with Nova's syntax: ``resources:CLASS=N`` asks for N units of any standard or
``CUSTOM_*`` class (os-resource-classes names; N=0 drops a class, as
``resources:DISK_GB=0`` for an instance booted from a volume), and
``hw:cpu_policy=dedicated`` asks for the vCPUs as ``PCPU``, dedicated host CPUs,
instead of ``VCPU``. An Inventory is what a host has of one class, with
Placement's meaning. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re

import os_resource_classes as orc

from berth_contract.errors import InvalidRequest

VCPU, PCPU, MEMORY_MB, DISK_GB = orc.VCPU, orc.PCPU, orc.MEMORY_MB, orc.DISK_GB
#: The classes of the classic figures (vcpus, memory_mb, local_gb) that every agent reports
#: and CoreFilter, RamFilter and DiskFilter check.
CLASSIC = (VCPU, MEMORY_MB, DISK_GB)
RESOURCES = "resources:"
CPU_POLICY = "hw:cpu_policy"
CPU_POLICIES = ("shared", "dedicated")
MAX_AMOUNT = 2**31 - 1
_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]{1,248}$")
_STANDARD = frozenset(orc.STANDARDS)
_GRANULAR = re.compile(r"^resources[A-Za-z0-9_-]+:")
#: Why a numbered request group (resources1:, trait1:, group_policy) is refused.
NUMBERED = "numbered request groups are not supported: every host is a single resource provider"


def check_name(name: str, where: str) -> str:
    """``name`` if it is a standard resource class or a ``CUSTOM_`` one; InvalidRequest otherwise."""
    if name in _STANDARD or _CUSTOM.match(name):
        return name
    raise InvalidRequest(f"{where}: {name!r} is not a resource class: use a standard class "
                         f"(VCPU, PCPU, MEMORY_MB, DISK_GB, VGPU...) or CUSTOM_ followed by "
                         "capital letters, digits and _")


def _amount(value: object, where: str) -> int:
    text = str(value).strip()
    if not text.isdigit() or int(text) > MAX_AMOUNT:
        raise InvalidRequest(f"{where}: the amount must be a whole number from 0 to {MAX_AMOUNT}, "
                             f"got {str(value)[:40]!r}")
    return int(text)


def cpu_policy(extra_specs: dict, where: str) -> str:
    """The flavor's CPU policy: ``shared`` (the default) or ``dedicated``."""
    policy = extra_specs.get(CPU_POLICY, "shared")
    if policy not in CPU_POLICIES:
        why = (" (mixed needs guest NUMA cells, which Berth does not model)" if policy == "mixed"
               else "")
        raise InvalidRequest(f"{where}[{CPU_POLICY}]: must be one of {', '.join(CPU_POLICIES)}, "
                             f"got {str(policy)[:40]!r}{why}")
    return policy


def amounts(vcpus: int, memory_mb: int, disk_gb: int, extra_specs: dict,
            where: str = "flavor.extra_specs") -> dict[str, int]:
    """{class: units} a flavor of these figures and ``extra_specs`` takes of its host: the three
    classic classes always (0 where asked), every other class only where its amount is above 0."""
    wanted = {VCPU: vcpus, MEMORY_MB: memory_mb, DISK_GB: disk_gb}
    explicit = {}
    for key, value in extra_specs.items():
        if key.startswith(RESOURCES):
            name = check_name(key[len(RESOURCES):], f"{where}[{key}]")
            explicit[name] = _amount(value, f"{where}[{key}]")
        elif _GRANULAR.match(key):
            raise InvalidRequest(f"{where}[{key}]: {NUMBERED} in Berth; use resources:CLASS=N")
    if cpu_policy(extra_specs, where) == "dedicated":
        clash = [c for c in (VCPU, PCPU) if c in explicit]
        if clash:
            raise InvalidRequest(f"{where}: {CPU_POLICY}=dedicated and resources:{clash[0]} both say "
                                 "how the vCPUs are taken: give one of them")
        wanted[VCPU], wanted[PCPU] = 0, vcpus
    wanted.update(explicit)
    return {name: units for name, units in wanted.items() if units > 0 or name in CLASSIC}


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What a host has of one resource class, as Placement has it: ``capacity`` units can be
    allocated in all, each allocation from ``min_unit`` to ``max_unit`` in steps of ``step_size``."""

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None  # None: total
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio

    @property
    def largest(self) -> int:
        return self.total if self.max_unit is None else self.max_unit

    @property
    def holds_nothing(self) -> str | None:
        """Why not even one allocation fits this inventory, or None. Placement accepts such an
        inventory (min_unit above max_unit, an allocation_ratio of 0...) and allocates nothing from it."""
        if self.min_unit > self.largest:
            return f"its min_unit {self.min_unit} is above its max_unit {self.largest}"
        smallest = -(-self.min_unit // self.step_size) * self.step_size
        if smallest > self.largest:
            return (f"no multiple of its step_size {self.step_size} lies from its min_unit {self.min_unit} "
                    f"to its max_unit {self.largest}")
        if self.capacity < smallest:
            return (f"its capacity, (total {self.total} - reserved {self.reserved}) * allocation_ratio "
                    f"{self.allocation_ratio:g} = {self.capacity:g}, is below its smallest allocation, "
                    f"{smallest}")
        return None

    def refuses(self, used: float, units: int) -> str | None:
        """Why ``units`` more cannot be allocated with ``used`` taken already, or None."""
        nothing = self.holds_nothing
        if nothing is not None:
            return f"the host's inventory holds nothing: {nothing}"
        if units < self.min_unit:
            return f"at least {self.min_unit} per instance"
        if units > self.largest:
            return f"at most {self.largest} per instance"
        if units % self.step_size:
            return f"in steps of {self.step_size}"
        if used + units > self.capacity:
            return f"{max(self.capacity - used, 0):g} of {self.capacity:g} free"
        return None

    def to_wire(self) -> dict:
        wire = dataclasses.asdict(self)
        if self.max_unit is None:
            wire["max_unit"] = self.total
        return wire
