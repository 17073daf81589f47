"""ComputeCapabilitiesFilter: flavor extra_specs against what the host reports, as Nova's.

A key scoped ``capabilities:`` names a host attribute of Nova's HostState
(scheduler.policy.host_attributes), nested with ``:`` into dicts and into JSON text
(``capabilities:cpu_info:features``); a name that is no attribute, or one
the host has no value for, is looked up in the host's compute node ``stats``
(``capabilities:num_proj_<project>``, ``capabilities:io_workload``). An
unscoped key is read the same way when the host has an attribute or stat of
that name, and ignored otherwise (``ssd=true`` is for
AggregateInstanceExtraSpecsFilter); other scopes are ignored. The value,
as text, must satisfy the requirement (extra_specs_ops: ``>= 4096``,
``s== x86_64``, ``<in> avx2``...); a host without it fails.
``hw:maxphysaddr_bits`` asks for ``capabilities:cpu_info:maxphysaddr:bits``
of at least that many bits. Beyond Nova: ``capabilities:metrics:<name>``
reads a metric the agent reports.
"""

import numpy as np

from scheduler.policy import filters, host_attributes
from scheduler.policy.filters import extra_specs_ops
from scheduler.policy.host_state import _int_or_float

SCOPE = "capabilities"

#: capability -> (HostTable column, its unit in Nova / Berth's, how HostState casts it)
COLUMNS = {
    "free_ram_mb": ("free_ram_mb", 1, _int_or_float),
    "free_disk_mb": ("free_disk_gb", 1024, _int_or_float),
    "total_usable_ram_mb": ("total_ram_mb", 1, _int_or_float),
    "total_usable_disk_gb": ("total_disk_gb", 1, _int_or_float),
    "vcpus_total": ("vcpus_total", 1, _int_or_float),
    "vcpus_used": ("vcpus_used", 1, _int_or_float),
    "num_instances": ("num_instances", 1, int),
    "num_io_ops": ("num_io_ops", 1, int),
    "failed_builds": ("failed_builds", 1, int),
}
#: capability -> the categorical attribute of the HostTable that holds it
CATEGORIES = {"cpu_info": "cpu_info", "hypervisor_type": "hypervisor", "supported_instances": "instances"}


def requirements(extra_specs):
    """[(path into the host's attributes, requirement, whether unscoped)] of the extra specs this
    filter reads (an unscoped one only on a host that has the attribute or stat)."""
    specs = dict(extra_specs)
    bits = specs.pop("hw:maxphysaddr_bits", None)
    if bits is not None:
        specs["capabilities:cpu_info:maxphysaddr:bits"] = ">= " + str(bits)
    wanted = []
    for key, req in specs.items():
        scope = key.split(":")
        if len(scope) > 1:
            if scope[0] != SCOPE:
                continue
            scope = scope[1:]
        wanted.append((scope, req, len(scope) == 1 and key == scope[0]))
    return wanted


def _matches(value, req):
    return value is not None and extra_specs_ops.match(_text(value), req)


def _text(value):
    # Nova compares str() of the value; Berth's floats that are whole read as Nova's ints.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def capability(host_state, scope):
    """The host's value at ``scope`` (a path of names), None when it has none."""
    value = host_attributes.lookup(host_state, scope[0])
    if value is None:
        value = host_state.stats.get(scope[0])
    return host_attributes.walk(value, scope[1:])


def _requirement_met(host_state, scope, req, unscoped):
    if unscoped and scope[0] not in host_attributes.NOVA and scope[0] not in host_state.stats:
        return True
    return _matches(capability(host_state, scope), req)


class ComputeCapabilitiesFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_extra_specs = ("", SCOPE + ":")

    def check_hints(self, spec):
        for scope, req, unscoped in requirements(spec.flavor.extra_specs):
            if unscoped and scope[0] not in host_attributes.NOVA:
                continue  # read only on a host with such a stat; ignored elsewhere, as Nova does
            try:
                extra_specs_ops.check(req)
            except ValueError as exc:
                name = scope[0] if unscoped else ":".join([SCOPE, *scope])
                raise ValueError(f"flavor extra spec {name[:60]}: {exc}") from None

    def host_passes(self, host_state, spec):
        return all(_requirement_met(host_state, scope, req, unscoped)
                   for scope, req, unscoped in requirements(spec.flavor.extra_specs))

    def filter_vector(self, table, rows, spec):
        wanted = requirements(spec.flavor.extra_specs)
        if not wanted:
            return True
        passed = True
        for scope, req, unscoped in wanted:
            passed = passed & _passes(table, rows, scope, req, unscoped)
        return passed


def _passes(table, rows, scope, req, unscoped):
    """Whether each row of ``rows`` has capability ``scope`` and it satisfies ``req``."""
    name = scope[0]
    if name not in host_attributes.NOVA:
        return _stat_passes(table, rows, scope, req, unscoped)
    if name in ("stats", "uuid", "instances", "cell_uuid"):
        numbers = table.row_numbers(rows)
        return np.fromiter((_requirement_met(view, scope, req, unscoped) for view in table.views(numbers)),
                           dtype=bool, count=len(numbers))
    if name in COLUMNS and len(scope) == 1:
        column, unit, cast = COLUMNS[name]
        raw = getattr(table, column)[rows] * unit
        values = np.trunc(raw) if cast is int else raw
        passed = extra_specs_ops.match_numbers(values, req)
        if passed is None or (cast is int and not np.isfinite(values).all()):
            distinct, inverse = np.unique(raw, return_inverse=True)
            ok = np.array([_matches(cast(v), req) for v in distinct], dtype=bool)
            passed = ok[inverse]
        return passed
    if name in CATEGORIES:
        attribute = CATEGORIES[name]
        ok = table.categories[attribute].each(
            lambda value: _matches(host_attributes.walk(value, scope[1:]), req), key=(tuple(scope), str(req)))
        return ok[getattr(table, attribute + "_code")[rows]]
    if name == "metrics" and len(scope) == 2:
        column = table.metric(scope[1])
        if column is None:
            return np.zeros(len(table.row_numbers(rows)), dtype=bool)
        values = column[rows]
        distinct, inverse = np.unique(values, return_inverse=True)
        ok = np.array([not np.isnan(v) and _matches(float(v), req) for v in distinct], dtype=bool)
        return ok[inverse]
    if name == "hypervisor_version" and len(scope) == 1:
        values = table.hypervisor_version[rows]
        distinct, inverse = np.unique(values, return_inverse=True)
        ok = np.array([not np.isnan(v) and _matches(int(v), req) for v in distinct], dtype=bool)
        return ok[inverse]
    numbers = table.row_numbers(rows)
    return np.fromiter((_requirement_met(view, scope, req, unscoped) for view in table.views(numbers)),
                       dtype=bool, count=len(numbers))


def _stat_passes(table, rows, scope, req, unscoped):
    """_passes for a name that is no HostState attribute: read in each host's stats. A host
    without the stat passes an unscoped requirement (not for it) and fails a scoped one."""
    numbers = table.row_numbers(rows)
    passed = np.full(len(numbers), unscoped, dtype=bool)
    holders = table.stats_by_name.get(scope[0])
    if holders:
        held = np.fromiter(holders, dtype=np.intp, count=len(holders))
        where = np.flatnonzero(np.isin(numbers, held))
        verdicts = {}
        for i in where:
            value = holders[int(numbers[i])]
            ok = verdicts.get(value)
            if ok is None:
                ok = verdicts[value] = _matches(host_attributes.walk(value, scope[1:]), req)
            passed[i] = ok
    return passed

