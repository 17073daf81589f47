"""Host aggregates as the policy layer sees them, and their cached row masks.

An aggregate is a named set of hosts with metadata (``key -> string``) and
an optional availability zone. The scheduler keeps them in memory beside
its HostTable: :class:`AggregateIndex` answers "which rows are in this
aggregate" as a boolean mask, "which aggregates is this row in" as a list,
and caches both until the aggregates or the table's rows change. Filters and
weighers read aggregate metadata through :func:`values_per_row` and
:func:`min_number` (Nova's ``aggregate_values_from_key`` and
``validate_num_values(..., based_on=min)``).
"""

import dataclasses
import math

import numpy as np

#: Metadata key that holds an aggregate's availability zone (as in Nova).
AZ_KEY = "availability_zone"


@dataclasses.dataclass(frozen=True)
class Aggregate:
    name: str
    hosts: frozenset = frozenset()
    metadata: dict = dataclasses.field(default_factory=dict)
    availability_zone: str | None = None

    @classmethod
    def from_dict(cls, value):
        metadata = {str(k): str(v) for k, v in (value.get("metadata") or {}).items()}
        zone = value.get("availability_zone") or metadata.get(AZ_KEY) or None
        if zone:
            metadata[AZ_KEY] = zone
        return cls(
            name=value["name"],
            hosts=frozenset(value.get("hosts") or ()),
            metadata=metadata,
            availability_zone=zone,
        )

    @property
    def zones(self):
        """The zones its hosts are in: its zone split on commas (``az1,az2`` is both, as in Nova)."""
        if not self.availability_zone:
            return ()
        return tuple(pieces(self.availability_zone))

    def to_dict(self):
        return {
            "name": self.name,
            "hosts": sorted(self.hosts),
            "metadata": dict(self.metadata),
            "availability_zone": self.availability_zone,
        }

    def __hash__(self):
        return hash(self.name)


class AggregateIndex:
    """The aggregates of one HostTable, with per-aggregate row masks cached.

    The cache is keyed by the table's size (a new host may belong to an
    aggregate already) and dropped whenever the aggregates are replaced.
    """

    def __init__(self, table):
        self._table = table
        self._aggregates = ()
        self._version = 0
        self._cache_key = None
        self._masks = {}
        self._per_row = {}
        self._memo = {}

    @property
    def aggregates(self):
        return self._aggregates

    @property
    def version(self):
        return self._version

    def set(self, aggregates):
        """Replace every aggregate (a list of Aggregate, or of their dicts)."""
        self._aggregates = tuple(
            a if isinstance(a, Aggregate) else Aggregate.from_dict(a) for a in aggregates
        )
        self._version += 1
        self._cache_key = None

    def _fresh(self):
        key = (self._version, self._table.size)
        if self._cache_key != key:
            self._cache_key = key
            self._masks = {}
            self._per_row = {}
            self._memo = {}
            index = self._table.index
            for aggregate in self._aggregates:
                mask = np.zeros(self._table.size, dtype=bool)
                for host in aggregate.hosts:
                    row = index.get(host)
                    if row is not None:
                        mask[row] = True
                        self._per_row.setdefault(row, []).append(aggregate)
                self._masks[aggregate.name] = mask

    def mask(self, aggregate):
        """Boolean mask over every row of the table: the rows in ``aggregate``."""
        self._fresh()
        return self._masks[aggregate.name]

    def rows_in(self, aggregates):
        """Boolean mask over every row of the table: the rows in any of ``aggregates``."""
        self._fresh()
        found = np.zeros(self._table.size, dtype=bool)
        for aggregate in aggregates:
            found |= self._masks[aggregate.name]
        return found

    def of_row(self, row):
        """The aggregates row ``row`` belongs to."""
        self._fresh()
        return self._per_row.get(int(row), [])

    def memo(self, key, compute):
        """``compute()``, cached until the aggregates or the rows change."""
        self._fresh()
        if key not in self._memo:
            if len(self._memo) >= 4096:  # keys from requests (zones, projects) are unbounded
                self._memo.clear()
            self._memo[key] = compute()
        return self._memo[key]


def pieces(value):
    """A metadata value as Nova reads it: split on commas, each piece stripped."""
    return [piece.strip() for piece in value.split(",")]


def metadata_values(aggregates, key):
    """The set of values ``key`` has in ``aggregates`` (Nova's aggregate_values_from_key)."""
    return {a.metadata[key] for a in aggregates if key in a.metadata}


def as_number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def min_number(values, default, parse=as_number):
    """The smallest of ``values`` read by ``parse``; ``default`` when none, or when one is not a number."""
    if not values:
        return default
    numbers = [parse(v) for v in values]
    if any(n is None for n in numbers):
        return default
    return min(numbers)


#: Bound of what min_number_vector keeps of a number: float() of a larger int overflows.
_CLIP = 10**300


def cached_rows(table, rows, key, compute, otherwise=True):
    """``compute(index)``, an array over every row of ``table``, for ``rows``.

    The array is cached under ``key`` in the table's AggregateIndex until the
    aggregates or the rows change; ``key`` must name everything ``compute``
    reads besides the aggregates. When ``compute`` gives None: ``otherwise``.
    """
    index = table.aggregate_index
    found = index.memo(key, lambda: compute(index))
    return otherwise if found is None else found[rows]


def admitted_rows(table, rows, key, restricts, admits):
    """Rows of ``rows`` in no aggregate that ``restricts``, or in one of those that ``admits``.

    True when no aggregate restricts; cached as :func:`cached_rows`.
    """

    def compute(index):
        restricting = [a for a in index.aggregates if restricts(a)]
        if not restricting:
            return None
        return ~index.rows_in(restricting) | index.rows_in(a for a in restricting if admits(a))

    return cached_rows(table, rows, key, compute)


def min_number_vector(table, rows, key, default, parse=as_number):
    """:func:`min_number` of ``key`` over each row's aggregates, for ``rows`` at once.

    A scalar when no aggregate sets ``key`` (the common case).
    """

    def compute(index):
        with_key = [a for a in index.aggregates if key in a.metadata]
        if not with_key:
            return None
        lowest = np.full(table.size, np.inf)
        invalid = np.zeros(table.size, dtype=bool)
        for aggregate in with_key:
            mask = index.mask(aggregate)
            number = parse(aggregate.metadata[key])
            if number is None:
                invalid |= mask
            else:
                lowest[mask] = np.minimum(lowest[mask], float(max(-_CLIP, min(number, _CLIP))))
        return np.where(invalid | np.isinf(lowest), float(default), lowest)

    return cached_rows(table, rows, ("min", key, default, parse.__name__), compute, otherwise=default)


def memberships(table, rows):
    """[(aggregates, how many of ``rows`` belong to exactly those)], one entry per distinct set:
    what a refusal says of many hosts, read once per set rather than once per host."""
    index = table.aggregate_index
    rows = np.asarray(rows, dtype=np.intp)
    if not len(rows):
        return []
    if not index.aggregates:
        return [([], len(rows))]
    if len(index.aggregates) < 64:  # each row's set as the bits of one number: a 1-D unique
        key = np.zeros(len(rows), dtype=np.int64)
        for bit, aggregate in enumerate(index.aggregates):
            key |= index.mask(aggregate)[rows].astype(np.int64) << bit
        _, first, counts = np.unique(key, return_index=True, return_counts=True)
    else:
        matrix = np.stack([index.mask(aggregate)[rows] for aggregate in index.aggregates])
        _, first, counts = np.unique(matrix, axis=1, return_index=True, return_counts=True)
    return [(index.of_row(int(rows[i])), int(n)) for i, n in zip(first, counts, strict=True)]


def zones_of_row(table, row, default_zone):
    """The availability zones of row ``row``: its aggregates' zones, or the default zone."""
    zones = {zone for a in table.aggregate_index.of_row(row) for zone in a.zones}
    return zones or {default_zone}


def zone_mask(table, rows, zone, default_zone):
    """Rows of ``rows`` in availability zone ``zone`` (cached per zone), or True when all are."""

    def in_zone(aggregate):
        return zone in aggregate.zones

    if zone == default_zone:  # a host in no zone is in the default one
        return admitted_rows(table, rows, ("zone", zone, default_zone), lambda a: a.zones, in_zone)

    def compute(index):
        return index.rows_in(a for a in index.aggregates if in_zone(a))

    return cached_rows(table, rows, ("zone", zone, default_zone), compute)
