"""HostState, and the columnar host table behind it.

The fleet lives in a HostTable: one row per compute host, one numpy array
per resource, so that filters and weighers can read every host at once as
vectors. A HostState is a view of one row: what plugins written for one
host at a time, and operators, see.

A row is refreshed from its agent's resource reports and consumed locally
by every placement the scheduler makes on it. A report is the agent's truth
for the instances it already holds; placements the agent has not reported
yet stay consumed on top of it until a report includes them, so an old
report never gives back room the scheduler has promised.
"""

import bisect
import contextlib
import copy
import functools
import json
import math
import time

import numpy as np

from berth_contract import image_meta, resource_classes
from berth_contract.host_report import HostReport
from scheduler.policy import host_load
from scheduler.policy.aggregates import AggregateIndex

_GROW = 2
#: Distinct inventories a host table keeps one object of (HostTable._inventory), at most.
_INVENTORIES = 10_000


class HostTable:
    #: column name -> numpy dtype; every column has one entry per row.
    COLUMNS = {
        "total_ram_mb": np.float64,
        "free_ram_mb": np.float64,
        "total_disk_gb": np.float64,
        "free_disk_gb": np.float64,
        "vcpus_total": np.float64,
        "vcpus_used": np.float64,
        # What the agent keeps back for its host, counted in its "used" figures (0: none reported)
        "reserved_ram_mb": np.float64,
        "reserved_disk_mb": np.float64,
        "reserved_vcpus": np.float64,
        "num_instances": np.float64,
        "num_io_ops": np.float64,  # builds and deletes in progress, reported plus pending placements
        "failed_builds": np.float64,  # builds failed in a row on the host (reset by a success)
        "updated": np.float64,  # monotonic time of the last report; -inf before the first
        "disabled": np.bool_,
        # Codes into ``categories`` (0: not reported).
        "hypervisor_code": np.int32,
        "instances_code": np.int32,
        "cpu_info_code": np.int32,
        "hypervisor_version": np.float64,  # NaN: not reported
        # Reservation figures and measured load (scheduler.policy.host_load).
        **host_load.COLUMNS,
    }

    def __init__(self, capacity=64):
        self.size = 0
        self.names = []
        self.nodenames = []
        self.index = {}
        # Sparse per-row state: most rows have none of it.
        self.pending = {}  # row -> {uuid: (Flavor, monotonic time)}
        # row -> sorted hashes (a tuple) of the instance uuids its last report listed (none: no entry)
        self.reported = {}
        self.extra = {}  # row -> {"reported_at", "metrics", "order": (started_at, report_seq)}
        #: stat name -> {row: value} of the hosts that report it (ComputeCapabilitiesFilter's
        #: stats fallback reads the few hosts with a stat instead of every host's stats).
        self.stats_by_name = {}
        # Distinct values of the string-valued attributes, coded per row in ``<name>_code``.
        self.categories = {"hypervisor": Categories(None), "instances": Categories(()),
                           "cpu_info": Categories(None)}  # cpu_info as Nova keeps it: JSON text
        self._metrics = {}  # metric name -> column (NaN: not reported), made on first sight
        #: Resource class other than VCPU, MEMORY_MB and DISK_GB -> its ResourceColumns, made on first sight.
        self._resources = {}
        self._inventories = {}  # (class, *its figures) -> the Inventory (_inventory)
        #: Trait name -> its code: the row of ``_has_trait`` that says which hosts have it.
        self.trait_codes = {}
        self._has_trait = np.zeros((0, 0), dtype=bool)
        self._views = {}
        self.aggregate_index = AggregateIndex(self)
        self.starts = {}  # row -> {uuid: time the scheduler placed it} (recent starts)
        self.start_log = host_load.StartLog()  # the same starts as arrays
        self.readings = {}  # row -> the last load reading folded (host_load)
        self.reserving = set()  # rows whose last report had reservation figures (host_load)
        self.instance_load = {}  # row -> InstanceLoad of its instances' measured use (host_load)
        self.reserves_version = 0  # counts the changes of any host's reserved_* figures
        #: What filters work out of whole columns and keep until those change (the key says when).
        self.derived = {}
        # Time of placements and load samples; a simulation substitutes its own clock.
        self.clock = time.monotonic
        self.load_half_life = host_load.DEFAULT_HALF_LIFE
        self.load_stale_after = host_load.DEFAULT_STALE_AFTER
        self._capacity = 0
        self._grow(max(capacity, 1))

    def _grow(self, capacity):
        for name, dtype in self.COLUMNS.items():
            fresh = np.zeros(capacity, dtype=dtype)
            if name == "updated":
                fresh[:] = -np.inf
            elif name == "hypervisor_version":
                fresh[:] = np.nan
            elif name in host_load.FILL:
                fresh[:] = host_load.FILL[name]
            if self._capacity:
                fresh[: self.size] = getattr(self, "_" + name)[: self.size]
            setattr(self, "_" + name, fresh)
        for name, column in self._metrics.items():
            self._metrics[name] = np.concatenate([column, np.full(capacity - len(column), np.nan)])
        for columns in self._resources.values():
            columns.grow(capacity)
        self._has_trait = _widened(self._has_trait, len(self._has_trait), capacity)
        self._capacity = capacity
        self._bind_columns()

    def copy(self):
        """An independent copy (a rebalance plan works on one while the scheduler goes on)."""
        copied = copy.deepcopy(self)
        copied._bind_columns()  # the copied views would no longer share the copied arrays
        return copied

    def _bind_columns(self):
        for name in self.COLUMNS:
            setattr(self, name, getattr(self, "_" + name)[: self.size])

    def __len__(self):
        return self.size

    def add(self, host, nodename=None):
        """The row of ``host``, added empty if it is new."""
        row = self.index.get(host)
        if row is not None:
            return row
        if self.size == self._capacity:
            self._grow(self._capacity * _GROW)
        row = self.size
        self.size += 1
        self.index[host] = row
        self.names.append(host)
        self.nodenames.append(nodename or host)
        self._bind_columns()
        return row

    def metric(self, name):
        """The column of reported metric ``name`` (NaN where a host does not report it), or None."""
        column = self._metrics.get(name)
        return None if column is None else column[: self.size]

    def resource(self, name):
        """The ResourceColumns of resource class ``name`` (other than the classic three), or None
        when no host has reported it nor been given it."""
        return self._resources.get(name)

    def _resource_columns(self, name):
        columns = self._resources.get(name)
        if columns is None:
            columns = self._resources[name] = ResourceColumns(self._capacity)
        return columns

    def trait_column(self, name):
        """Boolean column over every row: which hosts have trait ``name``, or None when none has."""
        code = self.trait_codes.get(name)
        return None if code is None else self._has_trait[code, : self.size]

    def _trait_code(self, name):
        code = self.trait_codes.get(name)
        if code is None:
            code = self.trait_codes[name] = len(self.trait_codes)
            if code == len(self._has_trait):
                self._has_trait = _widened(self._has_trait, max(8, code * _GROW), self._capacity)
        return code

    def category(self, name, row):
        """The value of string-valued attribute ``name`` (``hypervisor``, ``instances``) on ``row``."""
        return self.categories[name].values[getattr(self, f"_{name}_code")[row]]

    @property
    def aggregates(self):
        """The host aggregates (scheduler.policy.aggregates.Aggregate) the scheduler knows."""
        return self.aggregate_index.aggregates

    def set_aggregates(self, aggregates):
        self.aggregate_index.set(aggregates)

    def row_numbers(self, rows):
        """``rows`` (an index array or a slice) as an index array."""
        return np.arange(self.size)[rows] if isinstance(rows, slice) else rows

    def view(self, row):
        view = self._views.get(row)
        if view is None:
            view = self._views[row] = HostState(self.names[row], table=self, row=row)
        return view

    def views(self, rows=None):
        return [self.view(int(r)) for r in (range(self.size) if rows is None else rows)]

    def _take_metrics(self, row, reported):
        """The reported metrics, each in its column (NaN where a host no longer reports it)."""
        metrics = dict(reported or {})
        for name in self.extra.get(row, {}).get("metrics", {}).keys() - metrics.keys():
            if name in self._metrics:
                self._metrics[name][row] = np.nan
        for name, value in metrics.items():
            column = self._metrics.get(name)
            if column is None:
                column = self._metrics[name] = np.full(self._capacity, np.nan)
            column[row] = value
        return metrics

    def _take_inventories(self, row, reported, usages):
        """{class: Inventory} of the report, every class but the classic three in its columns
        (with the report's usage); the classes the host no longer reports have no capacity."""
        for columns in self._resources.values():
            columns.clear(row)
        inventories = {}
        usages = usages or {}
        for name, figures in (reported or {}).items():
            inventory = inventories[name] = self._inventory(name, figures)
            if name not in resource_classes.CLASSIC:
                self._resource_columns(name).set(row, inventory, usages.get(name, 0))
        return inventories

    def _inventory(self, name, figures):
        """The Inventory of ``figures``, one object for every host reporting the same (hosts report
        the same inventories again and again, and many hosts alike: making one anew was a third
        of what a report cost the table). At most _INVENTORIES kept."""
        key = (name, *figures.items())
        try:
            found = self._inventories.get(key)
        except TypeError:  # a figure that is no number: Inventory says what it makes of it
            return resource_classes.Inventory(**figures)
        if found is None:
            if len(self._inventories) >= _INVENTORIES:
                self._inventories.clear()
            found = self._inventories[key] = resource_classes.Inventory(**figures)
        return found

    def _take_stats(self, row, reported):
        """The reported stats as text, indexed by name (None when there are none)."""
        stats = {name: str(value) for name, value in reported.items()} if reported else None
        old = self.extra.get(row)
        old = old and old.get("stats")
        if (stats or old) and stats != old:  # an agent's stats seldom change from one report to the next
            self._index_stats(row, old or {}, stats or {})
        return stats

    def _index_stats(self, row, old, new):
        for name in old.keys() - new.keys():
            holders = self.stats_by_name[name]
            del holders[row]
            if not holders:
                del self.stats_by_name[name]
        for name, value in new.items():
            self.stats_by_name.setdefault(name, {})[row] = value

    def update_from_report(self, row, report, now, pending_ttl=None):
        """Write an agent's report (a HostReport) into ``row``. A dict is taken for a report in its
        wire form built in this process, unchecked (scheduler.simulation's agents)."""
        if not isinstance(report, HostReport):
            report = HostReport.trusted(report)
        self.nodenames[row] = report.nodename or self.names[row]
        self._total_ram_mb[row] = report.memory_mb
        self._free_ram_mb[row] = report.free_ram_mb
        self._total_disk_gb[row] = report.local_gb
        self._free_disk_gb[row] = report.free_disk_gb
        self._vcpus_total[row] = report.vcpus
        self._vcpus_used[row] = report.vcpus_used
        reserves = (report.reserved_host_memory_mb or 0, report.reserved_host_disk_mb or 0,
                    report.reserved_host_cpus or 0)
        if (self._reserved_ram_mb[row], self._reserved_disk_mb[row], self._reserved_vcpus[row]) != reserves:
            self._reserved_ram_mb[row], self._reserved_disk_mb[row], self._reserved_vcpus[row] = reserves
            self.reserves_version += 1
        uuids = report.instance_uuids
        if uuids:
            # A sorted tuple, not a numpy array: np.fromiter and np.sort cost more than sorting
            # a host's few hashes, on every report.
            self.reported[row] = tuple(sorted(map(hash, uuids)))
        else:
            self.reported.pop(row, None)
        self._num_instances[row] = len(uuids) if report.running_vms is None else report.running_vms
        # An agent's last report as it stopped: what it holds is known, and the host is down now.
        self._updated[row] = -np.inf if report.stopped else now
        self._num_io_ops[row] = report.io_workload or 0
        self._failed_builds[row] = report.failed_builds or 0
        self._hypervisor_code[row] = self.categories["hypervisor"].code(report.hypervisor_type)
        self._instances_code[row] = self.categories["instances"].code(supported_instances(report))
        cpu_info = report.cpu_info
        self._cpu_info_code[row] = self.categories["cpu_info"].code(
            None if cpu_info is None else json.dumps(cpu_info, sort_keys=True))
        version = report.hypervisor_version
        self._hypervisor_version[row] = np.nan if version is None else version
        metrics = self._take_metrics(row, report.metrics)
        stats = self._take_stats(row, report.stats)
        extra = self.extra[row] = {"reported_at": report.reported_at, "metrics": metrics}
        inventories = self._take_inventories(row, report.inventories, report.usages)
        if inventories:
            extra["inventories"] = inventories
        self._has_trait[:, row] = False
        if report.traits:
            extra["traits"] = frozenset(report.traits)
            codes = [self._trait_code(name) for name in extra["traits"]]
            self._has_trait[codes, row] = True
        if report.host_ip:
            extra["host_ip"] = report.host_ip
        if report.image_properties:
            extra["image_properties"] = image_meta.standard_counts(report.image_properties)
        if stats:
            extra["stats"] = stats
        if report.version:
            extra["version"] = report.version
        if report.report_seq is not None:  # which report of which agent process this is
            extra["order"] = (report.started_at, report.report_seq)
        host_load.read_report(self, row, report, now)
        pending = self.pending.get(row)
        if pending:
            self._keep_pending(row, pending, set(uuids), now, pending_ttl)

    def _keep_pending(self, row, pending, reported, now, pending_ttl):
        """Count again, on top of a new report, the placements it does not show yet but
        those older than ``pending_ttl``, taken as lost."""
        kept = {
            uuid: (flavor, since)
            for uuid, (flavor, since) in pending.items()
            if uuid not in reported and (pending_ttl is None or now - since < pending_ttl)
        }
        if kept:
            self.pending[row] = kept
            for flavor, _ in kept.values():
                self._take(row, flavor, +1)
        else:
            del self.pending[row]

    def has_reported(self, row, instance_uuid):
        """Whether the last report of ``row`` lists ``instance_uuid`` (its resources are
        in that report's figures already)."""
        hashes = self.reported.get(row)
        if hashes is None:
            return False
        key = hash(instance_uuid)
        at = bisect.bisect_left(hashes, key)
        return at < len(hashes) and hashes[at] == key

    def consume(self, row, instance_uuid, flavor, now=None):
        """Reserve ``flavor`` on ``row`` for ``instance_uuid`` until the agent reports it."""
        pending = self.pending.setdefault(row, {})
        if instance_uuid in pending:
            return
        now = self.clock() if now is None else now
        pending[instance_uuid] = (flavor, now)
        host_load.record_start(self, row, instance_uuid, now)
        self._take(row, flavor, +1)

    def release(self, row, instance_uuid):
        """Give back a placement the agent refused or that was rolled back."""
        pending = self.pending.get(row)
        entry = pending.pop(instance_uuid, None) if pending else None
        if entry is not None:
            host_load.forget_start(self, row, instance_uuid)
            self._take(row, entry[0], -1)
            if not pending:
                del self.pending[row]

    @contextlib.contextmanager
    def leaving_out(self, row, flavor):
        """``row`` as if ``flavor`` (an instance's own allocation) were not on it, while the block
        runs: whether a resized instance still fits on its host."""
        self._take(row, flavor, -1)
        try:
            yield
        finally:
            self._take(row, flavor, +1)

    def shift(self, row, flavor, sign):
        """Count ``flavor`` on ``row`` (``sign`` +1) or take it off (-1), leaving no pending entry:
        a move tried out and taken back (scheduler.moves.rebalance)."""
        self._take(row, flavor, sign)

    def _take(self, row, flavor, sign):
        amounts = flavor.amounts  # the classic three always, the other classes where asked
        vcpus = amounts[resource_classes.VCPU]
        memory_mb = amounts[resource_classes.MEMORY_MB]
        disk_gb = amounts[resource_classes.DISK_GB]
        for name, units in amounts.items():
            if name not in resource_classes.CLASSIC:
                self._resource_columns(name).used[row] += sign * units
        self._free_ram_mb[row] -= sign * memory_mb
        self._free_disk_gb[row] -= sign * disk_gb
        self._vcpus_used[row] += sign * vcpus
        self._num_instances[row] += sign
        self._num_io_ops[row] += sign
        self._cpu_reserved[row] += sign * vcpus  # NaN (not reported) stays NaN
        self._memory_reserved_mb[row] += sign * memory_mb


class ResourceColumns:
    """What every host has of one resource class, a column per figure of its Inventory:
    ``capacity`` ((total - reserved) * allocation_ratio, 0 where a host does not report the
    class), ``used`` (reported, plus pending placements), ``min_unit``, ``max_unit``, ``step_size``.
    Read the first ``len(table)`` entries."""

    #: Figure -> its value on a host without the class: no room, and no unit count fits.
    FIGURES = {"capacity": 0.0, "used": 0.0, "min_unit": 1.0, "max_unit": 0.0, "step_size": 1.0}

    #: How many unit counts the ``accepts`` masks are kept for (flavors ask for a few counts).
    CACHED_COUNTS = 16

    def __init__(self, capacity):
        for name, unset in self.FIGURES.items():
            setattr(self, name, np.full(capacity, unset))
        self._accepts = {}  # units -> bool column: the rows whose min_unit, max_unit and step take it

    def grow(self, capacity):
        for name, unset in self.FIGURES.items():
            column = getattr(self, name)
            setattr(self, name, np.concatenate([column, np.full(capacity - len(column), unset)]))
        self._accepts.clear()

    def clear(self, row):
        for name, unset in self.FIGURES.items():
            getattr(self, name)[row] = unset
        self._refresh(row)

    def set(self, row, inventory, used):
        self.capacity[row] = inventory.capacity
        self.used[row] = used
        self.min_unit[row] = inventory.min_unit
        self.max_unit[row] = inventory.largest
        self.step_size[row] = inventory.step_size
        self._refresh(row)

    def _refresh(self, row):
        for units, accepts in self._accepts.items():
            accepts[row] = self._takes(units, row)

    def _takes(self, units, rows):
        return ((units >= self.min_unit[rows]) & (units <= self.max_unit[rows])
                & (np.fmod(units, self.step_size[rows]) == 0))

    def fits(self, size, rows, units):
        """Boolean per row of ``rows`` (of a table of ``size`` rows): ``units`` more can be
        allocated there (the vector form of Inventory.refuses giving None; a host without
        the class has no room)."""
        accepts = self._accepts.get(units)
        if accepts is None:
            if len(self._accepts) >= self.CACHED_COUNTS:
                self._accepts.clear()
            accepts = self._accepts[units] = self._takes(units, slice(None))
        return accepts[:size][rows] & (self.used[:size][rows] + units <= self.capacity[:size][rows])


def _widened(matrix, codes, rows):
    """A (codes, rows) boolean matrix holding ``matrix`` in its corner, the rest False."""
    wider = np.zeros((codes, rows), dtype=bool)
    wider[: matrix.shape[0], : matrix.shape[1]] = matrix
    return wider


class Categories:
    """The distinct values of one attribute, each with a code (its index in ``values``)."""

    def __init__(self, unset):
        self.values = [unset]
        self._codes = {unset: 0}
        self._answers = {}

    def code(self, value):
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self.values)
            self.values.append(value)
        return code

    def each(self, predicate, key):
        """``predicate(value)`` for every value, as a boolean array to index with codes.

        Cached under ``key``, which must name the predicate, until a new value appears.
        """
        answer = self._answers.get(key)
        if answer is None or len(answer) != len(self.values):
            if len(self._answers) > 1000:
                self._answers.clear()
            answer = self._answers[key] = np.fromiter(
                (predicate(v) for v in self.values), dtype=bool, count=len(self.values))
        return answer


def supported_instances(report):
    """The (architecture, hypervisor_type, vm_mode) triples a HostReport says the host runs.

    From ``supported_instances`` when the agent reports it, else from its
    ``cpu_arch``, ``hypervisor_type`` and ``vm_modes``; () when it says nothing.
    """
    triples = report.supported_instances
    if triples:
        return _given_triples(tuple(map(tuple, triples)))
    if not report.cpu_arch:
        return ()
    return _triples_of(report.cpu_arch, report.hypervisor_type, tuple(report.vm_modes or ("hvm",)))


# Hosts report the same few triples at every report: each is normalized once.
@functools.lru_cache(maxsize=256)
def _given_triples(triples):
    return tuple(sorted({tuple(str(part).lower() for part in t) for t in triples}))


@functools.lru_cache(maxsize=256)
def _triples_of(arch, hv_type, modes):
    return tuple(sorted({(str(arch).lower(), str(hv_type or "").lower(), str(m).lower()) for m in modes}))


def _column(name, cast=float):
    attribute = "_" + name

    def get(self):
        # item(): a Python number at once, where indexing makes a numpy scalar to convert.
        return cast(getattr(self._table, attribute).item(self._row))

    def set(self, value):
        getattr(self._table, attribute)[self._row] = value

    return property(get, set)


def _int_or_float(value):
    return int(value) if float(value).is_integer() else float(value)


class HostState:
    """One host of a HostTable, attribute by attribute (Nova's HostState shape)."""

    def __init__(self, host, nodename=None, table=None, row=None):
        if table is None:
            table = HostTable(capacity=1)
            row = table.add(host, nodename)
        self._table = table
        self._row = row
        self.host = host
        # Set by per-host filters written in Nova's style; the pipeline uses Filter.limits().
        self.limits = {}

    total_usable_ram_mb = _column("total_ram_mb", _int_or_float)
    free_ram_mb = _column("free_ram_mb", _int_or_float)
    total_usable_disk_gb = _column("total_disk_gb", _int_or_float)
    free_disk_gb = _column("free_disk_gb", _int_or_float)
    vcpus_total = _column("vcpus_total", _int_or_float)
    vcpus_used = _column("vcpus_used", _int_or_float)
    reserved_ram_mb = _column("reserved_ram_mb", _int_or_float)
    reserved_disk_mb = _column("reserved_disk_mb", _int_or_float)
    reserved_vcpus = _column("reserved_vcpus", _int_or_float)
    num_instances = _column("num_instances", int)
    num_io_ops = _column("num_io_ops", int)
    failed_builds = _column("failed_builds", int)
    disabled = _column("disabled", bool)
    # Reservation figures (NaN: not reported) and the measured load (scheduler.policy.host_load).
    cpu_reserved = _column("cpu_reserved")
    cpu_burst = _column("cpu_burst")
    cpu_undeployed = _column("cpu_undeployed")
    memory_reserved_mb = _column("memory_reserved_mb")
    memory_burst_mb = _column("memory_burst_mb")
    memory_undeployed_mb = _column("memory_undeployed_mb")
    cpu_util = _column("cpu_util")
    mem_util = _column("mem_util")
    util_at = _column("util_at")
    util_measured = _column("util_measured", bool)

    def recent_starts(self, window, now):
        """Placements the scheduler made on this host within ``window`` seconds before ``now``."""
        return host_load.recent_starts_of(self._table, self._row, window, now)

    @property
    def row(self):
        return self._row

    @property
    def table(self):
        return self._table

    @property
    def nodename(self):
        return self._table.nodenames[self._row]

    @property
    def updated(self):
        value = float(self._table._updated[self._row])
        return None if math.isinf(value) else value

    @updated.setter
    def updated(self, value):
        self._table._updated[self._row] = -np.inf if value is None else value

    @property
    def hypervisor_type(self):
        return self._table.category("hypervisor", self._row)

    @property
    def supported_instances(self):
        return self._table.category("instances", self._row)

    # Nova's HostState attributes that Berth keeps under another name or shape.

    @property
    def hypervisor_hostname(self):
        return self.nodename

    @property
    def free_disk_mb(self):
        return _int_or_float(self._table._free_disk_gb[self._row] * 1024)

    @property
    def disk_mb_used(self):
        return _int_or_float(self.disk_used_gb * 1024)

    @property
    def hypervisor_version(self):
        value = float(self._table._hypervisor_version[self._row])
        return None if math.isnan(value) else int(value)

    @property
    def cpu_info(self):
        """JSON text, as in Nova (its ComputeCapabilitiesFilter reads into it); None if not reported."""
        return self._table.category("cpu_info", self._row)

    @property
    def image_properties(self):
        """{property: {value: count}} of the images of the instances the host holds."""
        return self._table.extra.get(self._row, {}).get("image_properties", {})

    @property
    def stats(self):
        """Nova's compute node stats, as text: num_instances, io_workload, num_proj_<project>..."""
        return self._table.extra.get(self._row, {}).get("stats", {})

    @property
    def version(self):
        """The Berth version of the host's agent, as its last report says."""
        return self._table.extra.get(self._row, {}).get("version")

    @property
    def host_ip(self):
        return self._table.extra.get(self._row, {}).get("host_ip")

    @property
    def metrics(self):
        return self._table.extra.get(self._row, {}).get("metrics", {})

    @property
    def aggregates(self):
        return self._table.aggregate_index.of_row(self._row)

    @property
    def inventories(self):
        """{resource class: Inventory} as the last report gave them (VCPU, MEMORY_MB and DISK_GB
        included); {} from an agent that reports none."""
        return self._table.extra.get(self._row, {}).get("inventories", {})

    def used(self, resource_class):
        """Units of ``resource_class`` (not VCPU, MEMORY_MB or DISK_GB: see vcpus_used...) taken on
        the host: those its last report counts, and the placements it does not show yet."""
        columns = self._table.resource(resource_class)
        return 0.0 if columns is None else float(columns.used[self._row])

    @property
    def traits(self):
        """The host's traits (frozenset of names) as its last report gave them."""
        return self._table.extra.get(self._row, {}).get("traits", frozenset())

    @property
    def reported_at(self):
        return self._table.extra.get(self._row, {}).get("reported_at")

    @property
    def pending(self):
        return self._table.pending.get(self._row, {})

    @property
    def ram_used_mb(self):
        return self.total_usable_ram_mb - self.free_ram_mb

    @property
    def disk_used_gb(self):
        return self.total_usable_disk_gb - self.free_disk_gb

    def update_from_report(self, report, now=None, pending_ttl=None):
        """Take an agent's report (a HostReport) as the new base.

        Placements older than ``pending_ttl`` seconds that the agent still
        does not report are taken as lost and given back.
        """
        self._table.update_from_report(
            self._row, report, time.monotonic() if now is None else now, pending_ttl
        )

    def consume(self, instance_uuid, flavor):
        self._table.consume(self._row, instance_uuid, flavor)

    def release(self, instance_uuid):
        self._table.release(self._row, instance_uuid)

    def __repr__(self):
        return (
            f"<HostState {self.host} ram {self.free_ram_mb}/{self.total_usable_ram_mb} MB "
            f"disk {self.free_disk_gb}/{self.total_usable_disk_gb} GB "
            f"vcpus {self.vcpus_used}/{self.vcpus_total} instances {self.num_instances}>"
        )
