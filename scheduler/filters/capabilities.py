"""ComputeCapabilitiesFilter: flavor extra_specs against what the host reports.

Every extra_spec that is unscoped or scoped ``capabilities:`` names a host
capability, nested with ``:`` (``capabilities:metrics:cpu.percent``), and a
requirement matched by extra_specs_ops (``>= 4096``, ``s== x86_64``,
``<in> avx``...). A host lacking the capability fails. Capabilities:
free_ram_mb, free_disk_gb, total_usable_ram_mb, total_usable_disk_gb,
vcpus_total, vcpus_used, num_instances, num_io_ops, failed_builds, host,
nodename, hypervisor_type, cpu_arch, metrics.
"""

import numpy as np

from scheduler import filters
from scheduler.filters import extra_specs_ops
from scheduler.host_state import _int_or_float

SCOPE = "capabilities"

#: capability -> (HostTable column, how HostState casts it)
COLUMNS = {
    "free_ram_mb": ("free_ram_mb", _int_or_float),
    "free_disk_gb": ("free_disk_gb", _int_or_float),
    "total_usable_ram_mb": ("total_ram_mb", _int_or_float),
    "total_usable_disk_gb": ("total_disk_gb", _int_or_float),
    "vcpus_total": ("vcpus_total", _int_or_float),
    "vcpus_used": ("vcpus_used", _int_or_float),
    "num_instances": ("num_instances", int),
    "num_io_ops": ("num_io_ops", int),
    "failed_builds": ("failed_builds", int),
}


#: capability -> (categorical attribute of the HostTable, the capability of its value)
CATEGORIES = {
    "hypervisor_type": ("hypervisor", lambda value: value),
    "cpu_arch": ("instances", lambda triples: triples[0][0] if triples else None),
}


def _requirements(extra_specs):
    wanted = []
    for key, req in extra_specs.items():
        scope = key.split(":")
        if len(scope) > 1:
            if scope[0] != SCOPE:
                continue
            scope = scope[1:]
        wanted.append((scope, req))
    return wanted


def _other_capability(table, row, scope):
    """A capability that is not a numeric column, as a string; None when the host lacks it."""
    name, rest = scope[0], scope[1:]
    if name == "host":
        value = table.names[row]
    elif name == "nodename":
        value = table.nodenames[row]
    elif name in CATEGORIES:
        attribute, of = CATEGORIES[name]
        value = of(table.category(attribute, row))
    elif name == "metrics":
        value = table.extra.get(int(row), {}).get("metrics") or {}
    else:
        return None
    for part in rest:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None or isinstance(value, dict):
        return None
    return str(value)


def capability(table, row, scope):
    column = COLUMNS.get(scope[0]) if len(scope) == 1 else None
    if column is not None:
        name, cast = column
        return str(cast(getattr(table, "_" + name)[row]))
    return _other_capability(table, row, scope)


class ComputeCapabilitiesFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        for scope, req in _requirements(spec.flavor.extra_specs):
            value = capability(host_state.table, host_state.row, scope)
            if value is None or not extra_specs_ops.match(value, req):
                return False
        return True

    def filter_vector(self, table, rows, spec):
        wanted = _requirements(spec.flavor.extra_specs)
        if not wanted:
            return True
        passed = True
        for scope, req in wanted:
            passed = passed & _passes(table, rows, scope, req)
        return passed


def _match_value(value, req):
    return value is not None and extra_specs_ops.match(str(value), req)


def _passes(table, rows, scope, req):
    """Whether each row of ``rows`` has capability ``scope`` and it satisfies ``req``."""
    name = scope[0]
    if name in COLUMNS and len(scope) == 1:
        column, cast = COLUMNS[name]
        values = getattr(table, column)[rows]
        if cast is int:
            values = np.trunc(values)
        passed = extra_specs_ops.match_numbers(values, req)
        if passed is None or (cast is int and not np.isfinite(values).all()):
            # Match each distinct value once.
            distinct, inverse = np.unique(getattr(table, column)[rows], return_inverse=True)
            ok = np.array([extra_specs_ops.match(str(cast(v)), req) for v in distinct], dtype=bool)
            passed = ok[inverse]
        return passed
    if name in CATEGORIES and len(scope) == 1:
        attribute, of = CATEGORIES[name]
        ok = table.categories[attribute].each(
            lambda value: _match_value(of(value), req), key=(name, str(req)))
        return ok[getattr(table, attribute + "_code")[rows]]
    if name == "metrics" and len(scope) == 2:
        values = table.metric(scope[1])
        if values is None:
            return False
        passed = extra_specs_ops.match_numbers(values[rows], req)
        if passed is not None:
            return passed & ~np.isnan(values[rows])
    if name not in ("host", "nodename", "metrics"):
        return False  # no host has it
    numbers = table.row_numbers(rows)
    seen = {}
    passed = np.empty(len(numbers), dtype=bool)
    for i, row in enumerate(numbers):
        value = _other_capability(table, row, scope)
        if value not in seen:
            seen[value] = value is not None and extra_specs_ops.match(value, req)
        passed[i] = seen[value]
    return passed
