"""A compute agent's periodic resource report (``report_resources``): its wire keys, the one
check of what it may hold, and its typed form.

The agent builds a HostReport and sends ``to_wire()``, a flat dict; the scheduler takes it
back with ``HostReport.from_wire``, which refuses a report whole, naming the field (bad_report),
but for ``instance_usage``: a bad entry of it is dropped, with a warning, and the rest kept.
Each field is named as its wire key. Keys a report carries that no field names (those of a
newer agent, or a saved row's own columns) are kept in ``extra`` and sent on as they came.
Pure: no I/O.
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from berth_contract import amqp_names as names
from berth_contract import host_names, instance_metrics, resource_classes, traits
from berth_contract.errors import InvalidRequest
from berth_contract.request_spec import is_bounded_number, parse_uuid
from berth_contract.wire_numbers import is_finite

MAX_INSTANCES_PER_HOST = 100_000
MAX_METRICS = 200
MAX_SUPPORTED = 100
#: cpu_info: at most this many features, each short text (a real x86 CPU lists about 150).
MAX_CPU_FEATURES = 1000
#: inventories and usages: at most this many resource classes; traits: at most this many.
MAX_CLASSES = 100
MAX_TRAITS = 1000
#: Placement's largest allocation_ratio (its column is a single-precision float).
MAX_ALLOCATION_RATIO = 3.40282e38
#: The integer columns of compute_nodes are 32-bit everywhere.
_INT32 = 2**31 - 1
_LIMIT = 2**53
_MAX_TIME_TEXT = 64
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# (key, integral, lowest, highest): the figures every report carries, with the
# bounds the database and the arithmetic can hold. "Used" figures include the
# host's reserves; "free" ones go negative on an overcommitted host.
_FIGURES = (
    ("memory_mb", True, 0, _INT32),
    ("free_ram_mb", True, -_INT32, _INT32),
    ("local_gb", True, 0, _INT32),
    ("free_disk_gb", False, -_LIMIT, _LIMIT),
    ("vcpus", True, 0, _INT32),
    ("vcpus_used", False, 0, _LIMIT),
)
_OPTIONAL_FIGURES = (
    ("memory_mb_used", True, 0, _INT32),
    ("local_gb_used", False, 0, _LIMIT),
    ("running_vms", True, 0, MAX_INSTANCES_PER_HOST),
    ("report_seq", True, 1, _LIMIT),
    ("reserved_host_memory_mb", False, 0, _INT32),
    ("reserved_host_disk_mb", False, 0, _LIMIT),
    ("reserved_host_cpus", False, 0, _INT32),
    ("hypervisor_version", True, 0, _LIMIT),
)


def bad_report(where: str, field: str, why: str) -> InvalidRequest:
    """A report the scheduler refuses, its wrong key in ``field``. An InvalidRequest, not a
    subclass: the class's name is what a dead letter's reason and a caller's error say."""
    refused = InvalidRequest(f"{where}: {field}{why}"[:300])
    refused.field = field  # type: ignore[attr-defined]
    return refused


#: A figure of HostLoad: a number >= 0, or None where the agent does not report it.
Figure = float | None


class HostLoad(NamedTuple):
    """The reservation figures (VMware Cloud Director's capacity ranking) and the measured load
    sample (CloudStack's balanced weighting) of a host; None where the agent does not report one."""

    cpu_utilization: Figure = None
    memory_mb_in_use: Figure = None
    utilization_sampled_at: str | float | None = None
    cpu_reserved: Figure = None
    cpu_burst: Figure = None
    cpu_undeployed_reservation: Figure = None
    memory_reserved_mb: Figure = None
    memory_burst_mb: Figure = None
    memory_undeployed_reservation_mb: Figure = None


#: The wire keys of HostLoad.
LOAD_KEYS = HostLoad._fields
_NO_LOAD = (None,) * len(LOAD_KEYS)


class HostReport(NamedTuple):
    """What an agent says of its host: resources, instances, placement facts, load and usage.

    A named tuple rather than a frozen dataclass: as immutable, and made five times faster
    (thousands of reports a second come through here)."""

    host: str
    memory_mb: int
    free_ram_mb: int
    local_gb: int
    free_disk_gb: int | float
    vcpus: int
    vcpus_used: int | float
    nodename: str | None = None
    memory_mb_used: int | None = None
    local_gb_used: int | float | None = None
    running_vms: int | None = None
    reserved_host_memory_mb: int | float | None = None
    reserved_host_disk_mb: int | float | None = None
    reserved_host_cpus: int | float | None = None
    #: Which report of the agent process started at ``started_at`` this is (1, 2, ...).
    report_seq: int | None = None
    started_at: str | None = None
    reported_at: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_arch: str | None = None
    vm_modes: Sequence[str] | None = None
    supported_instances: Sequence[Sequence[str]] | None = None
    cpu_info: Mapping[str, Any] | None = None
    host_ip: str | None = None
    io_workload: int | None = None
    failed_builds: int | None = None
    image_properties: Mapping[str, Mapping[str, int]] | None = None
    version: str | None = None
    #: The agent's last report, sent as it stops cleanly (scheduler API 1.4): the host is down from
    #: then on, until its agent reports again, rather than for service_down_time more.
    stopped: bool | None = None
    stats: Mapping[str, int | str] | None = None
    metrics: Mapping[str, float] | None = None
    #: {resource class: {total, reserved, min_unit, max_unit, step_size, allocation_ratio}}: what the
    #: host has of each class, with Placement's meaning (berth_contract.resource_classes.Inventory).
    inventories: Mapping[str, Mapping[str, int | float]] | None = None
    #: {resource class: units the instances of ``instance_uuids`` take}, for the classes of ``inventories``.
    usages: Mapping[str, int | float] | None = None
    #: The host's traits (berth_contract.traits): its CPU's features and the operator's CUSTOM_ ones.
    traits: Sequence[str] | None = None
    instance_uuids: Sequence[str] = ()
    load: HostLoad | None = None
    #: {instance uuid: {"cpu": vCPUs used, "memory": MB used}} of instances the report lists.
    instance_usage: Mapping[str, Mapping[str, float]] | None = None
    #: {instance uuid: [migration id, "moving" or "done"]} of the moves the agent holds open: an
    #: instance it takes in, a resize in place whose end it has not heard (end_resize). Not stored
    #: with the host's row.
    open_moves: Mapping[str, Sequence[Any]] | None = None
    #: {instance uuid: [migration id, step]} of the moves between two agents (scheduler API 1.5) the
    #: host is part of, at the step of MOVE_STEPS it is at. Not stored with the host's row.
    move_steps: Mapping[str, Sequence[Any]] | None = None
    extra: Mapping[str, Any] = MappingProxyType({})

    @classmethod
    def from_wire(cls, wire: object, host: str) -> HostReport:
        """The report ``wire`` (the dict ``host``'s agent sent) if every field the scheduler reads
        or stores is usable, against the bounds of the column that keeps it; InvalidRequest otherwise."""
        host_names.check(host, "report_resources: host")
        where = f"report_resources from {host}"
        if not isinstance(wire, dict):
            raise bad_report(where, "resources", " must be an object")
        if wire.get("host", host) != host:
            raise bad_report(where, "resources", f" are for host {_shown(wire.get('host'))}")
        uuids = wire.get("instance_uuids", [])
        report = cls._of(wire, host, uuids, _load_of(wire), wire.get("instance_usage"))
        _check_figures(where, report)
        _check_uuids(where, uuids)
        if report.open_moves is not None:
            _check_moves(where, "open_moves", report.open_moves, uuids, OPEN_MOVES)
        if report.move_steps is not None:
            _check_moves(where, "move_steps", report.move_steps, uuids, MOVE_STEPS)
        _check_placement_facts(where, wire, report)
        _check_load(where, report.load)
        if report.instance_usage is None:
            return report
        return report._replace(
            instance_usage=instance_metrics.agent_samples(host, report.instance_usage, uuids))

    @classmethod
    def trusted(cls, wire: Mapping[str, Any]) -> HostReport:
        """The report ``wire`` as it is, unchecked: one built in this process (a simulated agent), or
        the ``to_wire()`` of one a Berth scheduler checked (a digest: scheduler.fleet.report_digests)."""
        return cls._of(wire, wire["host"], wire.get("instance_uuids") or (), _load_of(wire),
                       wire.get("instance_usage"))

    @classmethod
    def _of(cls, wire, host, uuids, load, usage):
        """The report of ``wire``'s values, unchecked: each field read once, in one pass."""
        extra = _NO_EXTRA if wire.keys() <= _KNOWN else {k: wire[k] for k in wire.keys() - _KNOWN}
        return tuple.__new__(cls, (host, *map(wire.get, _PLAIN), uuids, load, usage, wire.get("open_moves"),
                                   wire.get("move_steps"), extra))

    def to_wire(self, usage: bool = True) -> dict[str, Any]:
        """The dict an agent sends (without ``instance_usage`` if not ``usage``): each field under
        its key, but those not reported (None); the extra keys as they came."""
        wire = {k: v for k in _SENT if (v := getattr(self, k)) is not None or k in _SENT_AS_NULL}
        wire["instance_uuids"] = list(self.instance_uuids)
        if self.load is not None:
            wire.update((k, v) for k in LOAD_KEYS if (v := getattr(self.load, k)) is not None)
        if usage and self.instance_usage is not None:
            wire["instance_usage"] = self.instance_usage
        if usage and self.open_moves is not None:
            wire["open_moves"] = self.open_moves
        if usage and self.move_steps is not None:
            wire["move_steps"] = self.move_steps
        wire.update(self.extra)
        return wire


#: The fields taken from the wire as they are (once checked), in their order.
_PLAIN = HostReport._fields[1:HostReport._fields.index("instance_uuids")]
_NO_EXTRA = HostReport._field_defaults["extra"]
# The checks of _check_figures, each with the place of its field in a HostReport.
_FIGURES_AT = tuple((HostReport._fields.index(key), key, whole, low, high)
                    for key, whole, low, high in _FIGURES)
_OPTIONAL_FIGURES_AT = tuple((HostReport._fields.index(key), key, whole, low, high)
                             for key, whole, low, high in _OPTIONAL_FIGURES)
_TEXTS_AT = tuple((HostReport._fields.index(key), key) for key in ("nodename", "hypervisor_type"))
_TIMES_AT = tuple((HostReport._fields.index(key), key) for key in ("reported_at", "started_at"))
#: A field sent even when None: an agent says it knows no architecture (it has always sent it).
_SENT_AS_NULL = frozenset({"cpu_arch"})
_SENT = ("host", *_PLAIN)
_KNOWN = frozenset((*_SENT, "instance_uuids", "instance_usage", "open_moves", "move_steps", *LOAD_KEYS))
#: What open_moves say of a move: under way on the agent, or done there.
OPEN_MOVES = ("moving", "done")
#: The steps move_steps say a move between two agents is at on the host: its destination
#: preparing, prepared (waiting for its source), finishing; its source migrating it out, migrated.
MOVE_STEPS = ("preparing", "prepared", "finishing", "migrating", "migrated")


def _shown(value):
    return repr(value)[:60]


def _check_figures(where, report):
    for at, key, integral, low, high in _FIGURES_AT:
        value = report[at]
        if type(value) is not int or not low <= value <= high:  # else fine: the common case, fast
            _check_figure(where, key, value, integral, low, high)
    for at, key, integral, low, high in _OPTIONAL_FIGURES_AT:
        value = report[at]
        if value is not None and (type(value) is not int or not low <= value <= high):
            _check_figure(where, key, value, integral, low, high)
    for at, key in _TEXTS_AT:
        value = report[at]
        if value is not None and not _short_text(value):
            raise bad_report(where, key, f" must be text of 1 to 255 characters, got {_shown(value)}")
    for at, key in _TIMES_AT:
        value = report[at]
        if value is not None and not _is_time(value):
            raise bad_report(where, key, f" must be an ISO-8601 time, got {_shown(value)}")


def _check_figure(where, key, value, integral, low, high):
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise bad_report(where, key, f" must be a number, got {_shown(value)}")
    if integral and isinstance(value, float) and not value.is_integer():
        raise bad_report(where, key, f" must be a whole number, got {_shown(value)}")
    if not low <= value <= high:
        raise bad_report(where, key, f" must be between {low} and {high}, got {_shown(value)}")


def _check_uuids(where, uuids):
    if not isinstance(uuids, list) or len(uuids) > MAX_INSTANCES_PER_HOST:
        raise bad_report(where, "instance_uuids", f" must be a list of at most {MAX_INSTANCES_PER_HOST}")
    for i, value in enumerate(uuids):
        if not isinstance(value, str) or not _UUID.fullmatch(value):  # uuid.UUID() costs 5 times more
            try:
                parse_uuid(value, "")  # a UUID in another form than the agents send
            except InvalidRequest:
                raise bad_report(where, f"instance_uuids[{i}]", f": must be a UUID, got {value!r}") from None


def _check_moves(where, key, moves, uuids, words):
    if not isinstance(moves, dict) or len(moves) > MAX_INSTANCES_PER_HOST:
        raise bad_report(where, key, f" must be an object of at most {MAX_INSTANCES_PER_HOST} entries")
    held = set(uuids)
    for uuid, entry in moves.items():
        if uuid not in held:
            raise bad_report(where, f"{key}[{_shown(uuid)}]", ": is not an instance of instance_uuids")
        if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int
                and 0 < entry[0] < 2 ** 63 and entry[1] in words):
            said = " or ".join(f'"{word}"' for word in words)
            raise bad_report(where, f"{key}[{_shown(uuid)}]", f": must be [migration id (a positive "
                             f"integer), {said}], got {_shown(entry)}")


def _is_time(value):
    if not isinstance(value, str) or len(value) > _MAX_TIME_TEXT:
        return False
    text = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    try:
        datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _short_text(value):
    return isinstance(value, str) and 0 < len(value) <= 255 and not names.CONTROL.search(value)


def _check_placement_facts(where, wire, report):
    """The optional keys the placement filters and weighers read (ImageProperties, IoOps...)."""
    for key in ("io_workload", "failed_builds"):
        value = wire.get(key, 0)  # null is not a count
        if type(value) is not int or not 0 <= value <= _LIMIT:
            raise bad_report(where, key, f" must be a count, got {value!r}")
    value = report.cpu_arch
    if value is not None and not _short_text(value):
        raise bad_report(where, "cpu_arch", " must be a string of at most 255 characters")
    modes = report.vm_modes
    if modes is not None and not (
        isinstance(modes, list) and len(modes) <= MAX_SUPPORTED and all(_short_text(m) for m in modes)
    ):
        raise bad_report(where, "vm_modes", " must be a list of strings")
    triples = report.supported_instances
    if triples is not None and not (
        isinstance(triples, list)
        and len(triples) <= MAX_SUPPORTED
        and all(isinstance(t, list | tuple) and len(t) == 3 and all(_short_text(p) for p in t)
                for t in triples)
    ):
        raise bad_report(where, "supported_instances",
                        " must be a list of [architecture, hypervisor_type, vm_mode]")
    host_ip = report.host_ip
    if host_ip is not None and not _is_ip(host_ip):
        raise bad_report(where, "host_ip", f" must be an IP address, got {_shown(host_ip)}")
    _check_host_description(where, report)
    _check_classes_and_traits(where, report)
    if report.stopped is not None and not isinstance(report.stopped, bool):
        raise bad_report(where, "stopped", f" must be true or false, got {_shown(report.stopped)}")


#: An inventory's fields as Placement's API takes them: (name, lowest) of the whole numbers, each at
#: most _INT32 (Placement's lowest total is 1: Berth takes 0 as none of the class);
#: allocation_ratio is any number up to Placement's largest.
_INVENTORY_COUNTS = (("total", 0), ("reserved", 0), ("min_unit", 1), ("max_unit", 1), ("step_size", 1))
_INVENTORY_FIELDS = frozenset(("allocation_ratio", *(name for name, _ in _INVENTORY_COUNTS)))


def _check_class_names(where, field, value):
    if not isinstance(value, dict) or len(value) > MAX_CLASSES:
        raise bad_report(where, field, f" must be an object of at most {MAX_CLASSES} resource classes")
    for name in value:
        try:
            resource_classes.check_name(name, "")
        except InvalidRequest:
            raise bad_report(where, f"{field}[{str(name)[:60]!r}]", ": is not a resource class (a "
                             "standard one, VCPU, PCPU, VGPU..., or CUSTOM_ and capital letters, digits "
                             "and _)") from None


def _check_classes_and_traits(where, report):
    """inventories ({class: Placement's inventory fields}), usages ({class: units} of classes
    of inventories) and traits (a list of trait names), each optional (an old agent sends none)."""
    inventories = report.inventories
    if inventories is not None:
        _check_class_names(where, "inventories", inventories)
        for name, inventory in inventories.items():
            _check_inventory(where, f"inventories[{name!r}]", inventory)
    usages = report.usages
    if usages is not None:
        _check_class_names(where, "usages", usages)
        for name, used in usages.items():
            if name not in (inventories or {}):
                raise bad_report(where, f"usages[{name!r}]", ": is not a class of inventories")
            if not is_bounded_number(used, _LIMIT):
                raise bad_report(where, f"usages[{name!r}]", f" must be a number from 0 to {_LIMIT}, "
                                 f"got {_shown(used)}")
    names = report.traits
    if names is not None:
        if not isinstance(names, list) or len(names) > MAX_TRAITS:
            raise bad_report(where, "traits", f" must be a list of at most {MAX_TRAITS} trait names")
        for i, name in enumerate(names):
            if not isinstance(name, str) or not traits.is_trait(name):
                raise bad_report(where, f"traits[{i}]", f": {_shown(name)} is not a trait (a standard one of "
                                 "os-traits, or CUSTOM_ and capital letters, digits and _)")


def _check_inventory(where, field, inventory):
    if not isinstance(inventory, dict) or inventory.keys() != _INVENTORY_FIELDS:
        raise bad_report(where, field, " must be an object of exactly "
                         f"{', '.join(sorted(_INVENTORY_FIELDS))}")
    for key, low in _INVENTORY_COUNTS:
        value = inventory[key]
        if type(value) is not int or not low <= value <= _INT32:
            raise bad_report(where, f"{field}.{key}", f" must be a whole number from {low} to {_INT32}, "
                             f"got {_shown(value)}")
    ratio = inventory["allocation_ratio"]
    if not is_finite(ratio) or ratio > MAX_ALLOCATION_RATIO:
        raise bad_report(where, f"{field}.allocation_ratio", f" must be a number of at most "
                         f"{MAX_ALLOCATION_RATIO:g}, got {_shown(ratio)}")
    # Placement (microversion 1.26 on) refuses only an inventory whose capacity, truncated, is below
    # 0; one that can hold nothing (min_unit above max_unit, a ratio of 0...) is refused by the
    # requests for its class only (Inventory.holds_nothing).
    capacity = (inventory["total"] - inventory["reserved"]) * ratio
    if int(capacity) < 0:
        raise bad_report(where, field, f" must have a capacity of at least 0, as Placement does: (total "
                         f"{inventory['total']} - reserved {inventory['reserved']}) * allocation_ratio "
                         f"{ratio:g} is {capacity:g}")


def _is_ip(value):
    if not isinstance(value, str):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _check_host_description(where, report):
    """cpu_info, image_properties, version and stats: what the host says of itself."""
    cpu_info = report.cpu_info
    if cpu_info is not None:
        _check_cpu_info(where, cpu_info)
    image_properties = report.image_properties
    if image_properties is not None and not (
        isinstance(image_properties, dict) and len(image_properties) <= MAX_METRICS
        and all(_short_text(k) and isinstance(v, dict) and len(v) <= MAX_INSTANCES_PER_HOST
                and all(isinstance(value, str) and len(value) <= 255 and type(n) is int
                        and 0 < n <= MAX_INSTANCES_PER_HOST for value, n in v.items())
                for k, v in image_properties.items())):
        raise bad_report(where, "image_properties", " must map each image property to "
                        "{value: how many instances}")
    version = report.version
    if version is not None and not (_short_text(version) and len(version) <= 64):
        raise bad_report(where, "version", " must be text of at most 64 characters")
    stats = report.stats
    if stats is not None and not (
        isinstance(stats, dict) and len(stats) <= MAX_METRICS
        and all(_short_text(k) and not isinstance(v, bool) and (
            isinstance(v, int) and -_LIMIT <= v <= _LIMIT or isinstance(v, str) and len(v) <= 255)
            for k, v in stats.items())):
        raise bad_report(where, "stats", f" must map at most {MAX_METRICS} names to a number or "
                        "text (Nova's compute node stats: num_instances, num_proj_<project>...)")
    metrics = report.metrics
    if metrics is not None:
        if not isinstance(metrics, dict) or len(metrics) > MAX_METRICS:
            raise bad_report(where, "metrics", f" must be an object of at most {MAX_METRICS} entries")
        for name, value in metrics.items():
            if not _short_text(name) or not is_finite(value):
                raise bad_report(where, "metrics", f"[{str(name)[:50]!r}] must be a finite number")


def _check_cpu_info(where, cpu_info):
    """``{arch, model, vendor: text; topology: {name: count}; features: [text];
    maxphysaddr: {mode, bits}}`` (the shape of Nova's libvirt driver), each optional."""
    if not isinstance(cpu_info, dict):
        raise bad_report(where, "cpu_info", " must be an object")
    for key, value in cpu_info.items():
        if key in ("arch", "model", "vendor"):
            ok = value is None or _short_text(value)
        elif key == "topology":
            ok = isinstance(value, dict) and len(value) <= 10 and all(
                _short_text(k) and type(v) is int and 0 <= v <= _INT32 for k, v in value.items())
        elif key == "features":
            ok = isinstance(value, list) and len(value) <= MAX_CPU_FEATURES and all(map(_short_text, value))
        elif key == "maxphysaddr":
            ok = isinstance(value, dict) and set(value) <= {"mode", "bits"} and (
                type(value.get("bits", 0)) is int and 0 <= value.get("bits", 0) <= 1024
                and (value.get("mode") is None or _short_text(value["mode"])))
        else:
            ok = False
        if not ok:
            raise bad_report(where, "cpu_info", f"[{str(key)[:50]!r}] is not what a cpu_info holds "
                            f"(arch, model, vendor: text; topology: counts; features: a list of text; "
                            f"maxphysaddr: mode and bits)")


def _check_load(where, load):
    """InvalidRequest unless each figure of ``load`` (a HostLoad, or None) is usable."""
    if load is None:
        return
    for key, value in zip(LOAD_KEYS, load, strict=True):
        if value is None:
            continue
        if key == "utilization_sampled_at":
            if not (isinstance(value, str | int | float) and not isinstance(value, bool)
                    and len(str(value)) <= 64):
                raise bad_report(where, key, " must be a short string")
        elif not is_bounded_number(value, _LIMIT):
            raise bad_report(where, key, f" must be a non-negative number, got {value!r}")


def _load_of(wire):
    values = tuple(map(wire.get, LOAD_KEYS))
    return None if values == _NO_LOAD else tuple.__new__(HostLoad, values)
