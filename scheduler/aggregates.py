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


def min_number_vector(table, rows, key, default, parse=as_number):
    """:func:`min_number` of ``key`` over each row's aggregates, for ``rows`` at once.

    A scalar when no aggregate sets ``key`` (the common case).
    """
    index = table.aggregate_index

    def compute():
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

    found = index.memo(("min", key, default, parse.__name__), compute)
    return default if found is None else found[rows]


def zones_of_row(table, row, default_zone):
    """The availability zones of row ``row``: its aggregates' zones, or the default zone."""
    zones = {zone for a in table.aggregate_index.of_row(row) for zone in a.zones}
    return zones or {default_zone}


def zone_mask(table, rows, zone, default_zone):
    """Rows of ``rows`` in availability zone ``zone`` (cached per zone)."""
    index = table.aggregate_index

    def compute():
        in_zone = np.zeros(table.size, dtype=bool)
        zoned = np.zeros(table.size, dtype=bool)
        for aggregate in index.aggregates:
            if aggregate.zones:
                mask = index.mask(aggregate)
                zoned |= mask
                if zone in aggregate.zones:
                    in_zone |= mask
        if zone == default_zone:
            in_zone |= ~zoned
        return in_zone

    return index.memo(("zone", zone, default_zone), compute)[rows]
