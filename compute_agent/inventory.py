"""What the agent has of each resource class, and its traits, from ``[compute_agent]``.

The classic classes come from the driver's totals: ``VCPU`` (the host's CPUs less
``cpu_dedicated_set``), ``MEMORY_MB`` and ``DISK_GB``, each with the host's reserve.
``PCPU`` is the CPUs of ``cpu_dedicated_set``; any other class is given with its total
in ``resources``. The ``resource_*`` options set Placement's fields of those classes.
Every bad value raises ValueError naming the option, so that the agent does not start.
"""

from __future__ import annotations

import dataclasses
import math

from berth_contract import resource_classes, traits
from berth_contract.resource_classes import DISK_GB, MEMORY_MB, PCPU, VCPU, Inventory
from scheduler.exception import InvalidRequest

GROUP = "[compute_agent]"
#: Classes the host itself has: the driver's totals, and cpu_dedicated_set for PCPU.
FROM_HOST = (VCPU, MEMORY_MB, DISK_GB, PCPU)
MAX_CLASSES = 100
MAX_TRAITS = 1000
MAX_TOTAL = resource_classes.MAX_AMOUNT
MAX_CPU_ID = 65535
MAX_RATIO = 1000.0
#: option -> (Inventory field, lowest value)
FIELD_OPTIONS = {
    "resource_reserved": ("reserved", 0),
    "resource_max_unit": ("max_unit", 1),
    "resource_step_size": ("step_size", 1),
    "resource_min_unit": ("min_unit", 1),
    "resource_allocation_ratio": ("allocation_ratio", 0.0),
}


def parse_cpu_set(text: str, where: str = f"{GROUP} cpu_dedicated_set") -> frozenset[int]:
    """The CPU ids of a set in Nova's syntax: ``0,2,4``, ranges ``4-7``, exclusions ``^6``
    (taken out of what the other parts name, wherever they stand)."""
    included, excluded = set(), set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise ValueError(f"{where}: empty entry in {text!r}: give CPU ids or ranges separated by commas")
        target = excluded if part.startswith("^") else included
        part = part.lstrip("^").strip()
        low, dash, high = part.partition("-")
        first, last = _cpu_id(low, text, where), _cpu_id(high, text, where) if dash else None
        if last is None:
            last = first
        if first > last:
            raise ValueError(f"{where}: range {part!r} runs backwards: write it low-high")
        target.update(range(first, last + 1))
    cpus = included - excluded
    if not cpus:
        raise ValueError(f"{where}: {text!r} names no CPU once its exclusions are taken out")
    return frozenset(cpus)


def _cpu_id(text, whole, where):
    text = text.strip()
    if not text.isdigit() or int(text) > MAX_CPU_ID:
        raise ValueError(f"{where}: {text!r} in {whole!r} is not a CPU id (a whole number from 0 to "
                         f"{MAX_CPU_ID}; ranges as 4-7, exclusions as ^6)")
    return int(text)


def _class_name(name, option):
    try:
        return resource_classes.check_name(name, f"{GROUP} {option}")
    except InvalidRequest as exc:
        raise ValueError(str(exc)) from None


def _number(value, option, name, low, whole=True, high=MAX_TOTAL):
    where = f"{GROUP} {option}: {name}"
    try:
        number = int(value) if whole else float(value)
    except (TypeError, ValueError):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{where} must be {kind}, got {str(value)[:40]!r}") from None
    if not math.isfinite(number) or not low <= number <= high or (not whole and number <= 0):
        bound = f"above {low:g}" if not whole else f"from {low}"
        raise ValueError(f"{where} must be {bound} to {high:g}, got {str(value)[:40]!r}")
    return number


@dataclasses.dataclass(frozen=True)
class Configured:
    """What ``[compute_agent]`` adds to the driver's totals: the dedicated CPUs, the Inventory of
    each class but the classic three, and the operator's traits."""

    dedicated_cpus: frozenset = frozenset()
    inventories: dict = dataclasses.field(default_factory=dict)
    traits: tuple = ()


def from_conf(conf) -> Configured:
    """The checked configuration of ``conf.compute_agent``; ValueError naming the option."""
    opts = conf.compute_agent
    cpus = parse_cpu_set(opts.cpu_dedicated_set) if opts.cpu_dedicated_set else frozenset()
    totals = {}
    for name, value in (opts.resources or {}).items():
        name = _class_name(name, "resources")
        if name in FROM_HOST:
            raise ValueError(f"{GROUP} resources: {name} cannot be given here: VCPU, MEMORY_MB and DISK_GB "
                             "come from the host's totals and reserves, PCPU from cpu_dedicated_set")
        totals[name] = _number(value, "resources", name, 1)
    if len(totals) > MAX_CLASSES:
        raise ValueError(f"{GROUP} resources: at most {MAX_CLASSES} classes, got {len(totals)}")
    if cpus:
        totals[PCPU] = len(cpus)
    fields = {name: {} for name in totals}
    for option, (field, low) in FIELD_OPTIONS.items():
        for name, value in (getattr(opts, option) or {}).items():
            name = _class_name(name, option)
            if name not in totals:
                why = ("set cpu_dedicated_set to give the host PCPU" if name == PCPU
                       else f"only the classes of resources (or PCPU) take it; {name} is not one")
                raise ValueError(f"{GROUP} {option}: {name}: {why}")
            ratio = field == "allocation_ratio"
            fields[name][field] = _number(value, option, name, low, whole=not ratio,
                                          high=MAX_RATIO if ratio else MAX_TOTAL)
    inventories = {name: _inventory(name, total, fields[name]) for name, total in totals.items()}
    host_traits = []
    for name in opts.traits or ():
        try:
            host_traits.append(traits.check_name(name, f"{GROUP} traits"))
        except InvalidRequest as exc:
            raise ValueError(str(exc)) from None
    if len(host_traits) > MAX_TRAITS:
        raise ValueError(f"{GROUP} traits: at most {MAX_TRAITS}, got {len(host_traits)}")
    return Configured(cpus, inventories, tuple(dict.fromkeys(host_traits)))


def _inventory(name, total, fields):
    inventory = Inventory(total=total, **fields)
    if inventory.reserved > total:
        raise ValueError(f"{GROUP} resource_reserved: {name}: {inventory.reserved} is more than its total "
                         f"{total}")
    if inventory.largest > total:
        raise ValueError(f"{GROUP} resource_max_unit: {name}: {inventory.largest} is more than its total "
                         f"{total}")
    if inventory.min_unit > inventory.largest:
        raise ValueError(f"{GROUP} resource_min_unit: {name}: {inventory.min_unit} is more than its max_unit "
                         f"{inventory.largest}")
    return inventory


class NotOnThisHost(ValueError):
    """The configuration names what this host does not have (a CPU of cpu_dedicated_set)."""


def check_host_cpus(dedicated: frozenset, host_cpus, where: str = f"{GROUP} cpu_dedicated_set") -> None:
    """ValueError when ``dedicated`` names a CPU that is not among ``host_cpus``."""
    missing = sorted(set(dedicated) - set(host_cpus))
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise NotOnThisHost(f"{where}: this host has no CPU {shown} (its CPUs: {_ranges(sorted(host_cpus))})")


def _ranges(ids):
    if not ids:
        return "none"
    parts, start = [], ids[0]
    for before, after in zip(ids, ids[1:] + [None], strict=True):
        if after != before + 1:
            parts.append(str(start) if start == before else f"{start}-{before}")
            start = after
    return ",".join(parts)


def host_inventories(vcpus, memory_mb, local_gb, reserved_cpus, reserved_memory_mb, reserved_disk_mb,
                     configured: Configured) -> dict[str, Inventory]:
    """Every class the host has: the classic three of the driver's totals (``vcpus``: the shared
    CPUs only) with the host's reserves, and those of ``configured``. A class of no unit (VCPU
    when every CPU is dedicated) is left out, as Placement takes no empty inventory."""
    classic = {
        VCPU: Inventory(total=vcpus, reserved=min(reserved_cpus, vcpus)),
        MEMORY_MB: Inventory(total=memory_mb, reserved=min(reserved_memory_mb, memory_mb)),
        DISK_GB: Inventory(total=local_gb, reserved=min(math.ceil(reserved_disk_mb / 1024), local_gb)),
    }
    found = {name: inv for name, inv in classic.items() if inv.total > 0}
    found.update(configured.inventories)
    return found
