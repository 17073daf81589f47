"""What agents report of their hosts' reservations and measured load.

Two placement policies read more than allocation:

* VMware Cloud Director's capacity ranking reads
  per host the reserved, burst and undeployed-reservation figures of CPU
  and memory. A figure the agent does not report is NaN in the HostTable;
  the CapacityWeigher then falls back to the reservation score.
* CloudStack's balanced weighting (section 4) reads the measured CPU
  utilisation and memory in use, kept as a moving average weighted by
  elapsed time::

      alpha = 1 - exp(-dt * ln 2 / half_life)
      value = value + alpha * (sample - value)   # the first sample as is

  A reading identical to the previous one (same values, same sample
  stamp) is not folded twice, and a host whose last folded sample is older
  than ``stale_after`` counts as unmeasured until its next sample, which is
  folded in like any other: weighted by the time elapsed since the last
  one, it all but replaces an average that old (after 600 s with a
  half-life of 300 s the old average keeps a quarter of its weight). Only
  the very first sample is taken as is. It also counts the placements the
  scheduler made on each host recently.

Everything here is pure: times are passed in (the HostTable's clock).
"""

import math

import numpy as np

from scheduler.policy import instance_load

#: HostLoad field -> HostTable column for the reservation figures (NaN when not reported).
RESERVATION_FIELDS = {
    "cpu_reserved": "cpu_reserved",
    "cpu_burst": "cpu_burst",
    "cpu_undeployed_reservation": "cpu_undeployed",
    "memory_reserved_mb": "memory_reserved_mb",
    "memory_burst_mb": "memory_burst_mb",
    "memory_undeployed_reservation_mb": "memory_undeployed_mb",
}

_RESERVATION_COLUMNS = tuple((field, "_" + column) for field, column in RESERVATION_FIELDS.items())

#: HostTable columns this module keeps: name -> dtype.
COLUMNS = {
    **{column: np.float64 for column in RESERVATION_FIELDS.values()},
    "cpu_util": np.float64,  # moving average of measured CPU use, fraction of real cores
    "mem_util": np.float64,  # moving average of memory in use, fraction of real memory
    "util_at": np.float64,  # table time of the last folded sample; -inf before the first
    "util_measured": np.bool_,  # at least one sample has been folded
}
#: Initial value of the columns that do not start at 0.
FILL = {
    **{column: np.nan for column in RESERVATION_FIELDS.values()},
    "util_at": -np.inf,
}

DEFAULT_HALF_LIFE = 300.0
DEFAULT_STALE_AFTER = 600.0
#: Placements older than this are forgotten (the longest recent-starts window).
STARTS_HORIZON = 3600.0


def weight(dt, half_life):
    """The weight of a sample ``dt`` seconds after the previous one (1: it replaces the average)."""
    if half_life <= 0:
        return 1.0
    return 1.0 - math.exp(-max(dt, 0.0) * math.log(2) / half_life)


def read_report(table, row, report, now):
    """Take the reservation figures and the load sample of ``report`` (a HostReport) into ``row``."""
    load = report.load
    if load is None:  # most of a fleet: its columns stay NaN, but after a report that had some
        if row in table.reserving:
            table.reserving.discard(row)
            for _, attribute in _RESERVATION_COLUMNS:
                getattr(table, attribute)[row] = np.nan
        return
    for field, attribute in _RESERVATION_COLUMNS:
        value = getattr(load, field)
        getattr(table, attribute)[row] = np.nan if value is None else value
    table.reserving.add(row)
    cpu, in_use, memory = load.cpu_utilization, load.memory_mb_in_use, report.memory_mb or 0
    if cpu is None or in_use is None or memory <= 0:
        return  # no usable sample: the average ages until it goes stale
    reading = (cpu, in_use, load.utilization_sampled_at)
    if table.readings.get(row) == reading:
        return  # the same reading again is not a new sample
    table.readings[row] = reading
    mem = in_use / memory
    last = table._util_at[row]
    if not table._util_measured[row]:
        table._cpu_util[row], table._mem_util[row] = cpu, mem
        alpha = 1.0
    else:
        alpha = weight(now - last, table.load_half_life)
        table._cpu_util[row] += alpha * (cpu - table._cpu_util[row])
        table._mem_util[row] += alpha * (mem - table._mem_util[row])
    table._util_at[row] = now
    table._util_measured[row] = True
    if report.instance_usage is None:
        table.instance_load.pop(row, None)
    else:
        table.instance_load[row] = instance_load.folded(
            table.instance_load.get(row), report.instance_usage, cpu * float(table._vcpus_total[row]),
            float(in_use), alpha)


def measured(util_measured, util_at, now, stale_after):
    """Whether hosts have a usable average (works on scalars and arrays alike)."""
    return util_measured & (now - util_at <= stale_after)


def record_start(table, row, instance_uuid, now):
    """The scheduler placed ``instance_uuid`` on ``row`` at ``now``."""
    starts = table.starts.setdefault(row, {})
    starts[instance_uuid] = now
    table.start_log.put(row, instance_uuid, now)
    # A row's starts are kept in the order they were placed, the oldest first: the ones past the
    # horizon are at the front (one a clock stepped back put behind a later one goes once it is
    # first). Looking at the front alone keeps a placement's cost the same however many a host took.
    oldest = now - STARTS_HORIZON
    while True:
        first = next(iter(starts))
        if starts[first] >= oldest:
            break
        del starts[first]
        table.start_log.drop(row, first)


def forget_start(table, row, instance_uuid):
    starts = table.starts.get(row)
    if starts and starts.pop(instance_uuid, None) is not None:
        table.start_log.drop(row, instance_uuid)
        if not starts:
            del table.starts[row]


def recent_starts(table, rows, window, now):
    """How many placements each row of ``rows`` took within ``window`` seconds before ``now``."""
    return table.start_log.counts(len(table), now - window, now)[rows]


def recent_starts_of(table, row, window, now):
    since = now - window
    return sum(1 for t in table.starts.get(row, {}).values() if since <= t <= now)


class StartLog:
    """The starts of ``table.starts`` as two arrays (row, time), to count them with numpy.

    A forgotten start leaves a NaN time in its slot; slots are reclaimed when the arrays are full.
    """

    def __init__(self, capacity=64):
        self._slots = {}  # (row, uuid) -> slot
        self._rows = np.zeros(capacity, dtype=np.intp)
        self._times = np.full(capacity, np.nan)
        self._used = 0

    def put(self, row, uuid, now):
        slot = self._slots.get((row, uuid))
        if slot is None:
            if self._used == len(self._times):
                self._compact()
            slot = self._slots[(row, uuid)] = self._used
            self._used += 1
        self._rows[slot] = row
        self._times[slot] = now

    def drop(self, row, uuid):
        slot = self._slots.pop((row, uuid), None)
        if slot is not None:
            self._times[slot] = np.nan

    def _compact(self):
        live = np.fromiter(self._slots.values(), dtype=np.intp, count=len(self._slots))
        capacity = max(64, 2 * len(live))
        rows, times = np.zeros(capacity, dtype=np.intp), np.full(capacity, np.nan)
        rows[: len(live)], times[: len(live)] = self._rows[live], self._times[live]
        self._rows, self._times, self._used = rows, times, len(live)
        self._slots = dict(zip(self._slots, range(len(live)), strict=True))

    def counts(self, size, since, now):
        """Starts per row (0 .. size - 1) within [since, now], as floats."""
        times = self._times[: self._used]
        hit = (since <= times) & (times <= now)
        return np.bincount(self._rows[: self._used][hit], minlength=size).astype(np.float64)
