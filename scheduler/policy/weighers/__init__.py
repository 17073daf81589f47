"""Host weighers: each ranks the hosts that passed the filters.

A weigher is a subclass of :class:`BaseHostWeigher` that implements
``weigh``; every other hook below has a default, and a weigher overrides only
those it needs. A weigher returns a raw weight per host; the pipeline
normalizes the raw weights of one weigher to [0, 1] over the candidates
(min-max) and adds them up, each times the weigher's multiplier. Higher is
better. Plugins are found by :mod:`scheduler.policy.plugins` and known by their
class name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray
from oslo_config import cfg

from scheduler.policy import aggregates, plugins

if TYPE_CHECKING:
    from berth_contract.request_spec import RequestSpec
    from scheduler.policy.filters import Rows
    from scheduler.policy.host_state import HostState, HostTable


class BaseHostWeigher:
    """A weigher: ``weigh(host_state, spec)`` is one host's raw weight.

    Berth builds each enabled weigher once, at start, as ``cls(conf)``, and
    calls its hooks for every request.
    """

    abstract = True

    #: The scheduler hints this weigher reads, and the server group policies it
    #: enforces (see BaseHostFilter.reads_hints).
    reads_hints: ClassVar[tuple[str, ...]] = ()
    group_policies: ClassVar[tuple[str, ...]] = ()

    #: Fixed bounds for normalization; None means the candidates' own min or max.
    #: A weight outside them counts as the bound (as Nova's weigh_objects).
    minval: float | None = None
    maxval: float | None = None

    #: Optional ``weigh_vector(table, rows, spec)``: the weights ``weigh`` gives,
    #: for every row of ``rows`` at once (a float array), or None when the
    #: weigher weighs nothing for this request (every host alike, which
    #: normalizes to 0 anyway): the pipeline then skips it. None: host by host only.
    weigh_vector: Callable[[HostTable, Rows, RequestSpec], NDArray[np.float64] | None] | None = None

    #: The HostTable column that is this weigher's raw weight of every host for every request
    #: (``weigh`` and ``weigh_vector`` give its values: a number in every row, never NaN), or
    #: None. When the only weigher weighing a request has one, the Selector looks for the
    #: heaviest hosts among those with the most of it instead of filtering and weighing the
    #: whole fleet (scheduler.policy.ranked).
    ranks_by: ClassVar[str | None] = None

    #: Optional ``idle(spec)``: True when the weigher weighs nothing for ``spec``
    #: (``weigh_vector`` gives None), said without looking at any host. A weigher without
    #: it counts as weighing every request.
    idle: Callable[[RequestSpec], bool] | None = None

    #: Optional ``tier`` / ``tier_vector``, as BaseHostFilter's: the Selector
    #: picks among the hosts of the best tier only, by weight within it.
    tier: Callable[[HostState, RequestSpec], int] | None = None
    tier_vector: Callable[[HostTable, Rows, RequestSpec], NDArray[np.int64]] | None = None

    #: The Selector picks at random among the ``host_subset_size`` heaviest
    #: hosts, where host_subset_size is at least the largest ``subset_size`` of
    #: its weighers (read once, when the Selector is built).
    subset_size: int = 1

    #: Optional ``spread_rows(table, rows, spec, size)``: the rows (an index
    #: array, at most ``size``) among which the random pick is made, given the
    #: rows that pass the filters run once per request; the Selector picks
    #: among those of them that pass every filter, and takes the heaviest host
    #: when none does. Only the first enabled weigher that has one is used.
    spread_rows: Callable[[HostTable, NDArray[np.intp], RequestSpec, int], NDArray[np.intp]] | None = None

    #: The option holding the multiplier (in ``multiplier_group``); None: 1.0. A host's
    #: aggregates override it with metadata ``aggregate_key`` (default: the option's
    #: name, e.g. ``ram_weight_multiplier=2.0``), the smallest winning, as Nova's
    #: get_weight_multiplier does.
    multiplier_option: ClassVar[str | None] = None
    multiplier_group: ClassVar[str] = "filter_scheduler"
    aggregate_key: ClassVar[str | None] = None
    #: Aggregate metadata read as a number (see BaseHostFilter.aggregate_numbers): the
    #: multiplier's key, set for every subclass from the two above.
    aggregate_numbers: ClassVar[dict[str, float | None]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        key = cls.aggregate_key or cls.multiplier_option
        cls.aggregate_numbers = {key: None} if key else {}

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @property
    def name(self) -> str:
        """The class name: how options and logs name the weigher."""
        return type(self).__name__

    def weigh(self, host_state: HostState, spec: RequestSpec) -> float:
        """The raw weight of ``host_state`` for the instance of ``spec`` (higher is better)."""
        raise NotImplementedError

    def check_hints(self, spec: RequestSpec) -> None:
        """As BaseHostFilter.check_hints: raise ValueError to refuse ``spec``. Default: accepts."""

    def default_multiplier(self) -> float:
        """The multiplier where no aggregate sets one: ``multiplier_option``'s value, or 1.0."""
        if self.multiplier_option is None:
            return 1.0
        value: float = getattr(getattr(self.conf, self.multiplier_group), self.multiplier_option)
        return value

    def _aggregate_key(self) -> str | None:
        return self.aggregate_key or self.multiplier_option

    def weight_multiplier(self, host_state: HostState | None) -> float:
        """The multiplier of one host (used host by host); the default for None."""
        default = self.default_multiplier()
        if host_state is None or self.multiplier_option is None:
            return default
        values = aggregates.metadata_values(host_state.aggregates, self._aggregate_key())
        return aggregates.min_number(values, default)

    def multipliers(self, table: HostTable, rows: Rows) -> NDArray[np.float64] | float:
        """The multiplier of every row (a scalar when it is the same for all), used with
        ``weigh_vector``: it must agree with ``weight_multiplier``."""
        if self.multiplier_option is None:
            return self.weight_multiplier(None)
        return aggregates.min_number_vector(table, rows, self._aggregate_key(), self.default_multiplier())


def multiplier_opt(name: str, help: str, default: float = 1.0, **bounds: float) -> cfg.FloatOpt:
    """The option a weigher names as its ``multiplier_option``."""
    return cfg.FloatOpt(name, default=default, help=help, **bounds)


def normalize(values, minval=None, maxval=None):
    """Min-max scale to [0, 1]; all-equal weights carry no information and become 0.

    A weigher's fixed ``minval`` / ``maxval`` bound its weights first (a weight
    below ``minval`` counts as ``minval``), as Nova's weigh_objects does.
    """
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return values
    values = bounded(values, minval, maxval)
    low = values.min() if minval is None else minval
    high = values.max() if maxval is None else maxval
    if high == low:
        return np.zeros(len(values))
    return (values - low) / float(high - low)


def bounded(values, minval=None, maxval=None):
    """``values`` held within a weigher's fixed bounds: one below ``minval`` counts as ``minval``,
    one above ``maxval`` as ``maxval``."""
    if minval is not None and maxval is not None:
        return np.clip(values, minval, maxval)
    if minval is not None:  # as np.clip, without its cost for one bound
        return np.maximum(values, minval)
    if maxval is not None:
        return np.minimum(values, maxval)
    return values


def divide(numerator, denominator, fill):
    """``numerator / denominator`` where the denominator is positive, ``fill`` elsewhere.

    The same as ``np.divide(..., where=denominator > 0)``, which is several times slower.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / denominator, fill)


#: Rows per chunk for :func:`chunked`: a chunk's temporaries stay in the CPU cache.
CHUNK_ROWS = 8192


def chunked(compute, table, rows, *per_row):
    """``compute(rows, *per_row)`` over ``rows`` a chunk at a time, concatenated.

    For element-wise formulas over many columns: the same result as one call
    over every row, several times faster on large fleets. ``per_row`` are
    arrays with one entry per row of ``rows``, cut along with them.
    """
    rows = table.row_numbers(rows)
    if len(rows) <= CHUNK_ROWS:
        return compute(rows, *per_row)
    return np.concatenate([
        compute(rows[i : i + CHUNK_ROWS], *(a[i : i + CHUNK_ROWS] for a in per_row))
        for i in range(0, len(rows), CHUNK_ROWS)
    ])


class Columns(dict):
    """Columns of a HostTable by name, each read by ``read(name)`` when first asked for."""

    def __init__(self, read):
        super().__init__()
        self._read = read

    def __missing__(self, name):
        value = self[name] = self._read(name)
        return value

    @classmethod
    def of_rows(cls, table, rows):
        """The columns of ``table`` at ``rows``."""
        return cls(lambda name: getattr(table, name)[rows])

    @classmethod
    def of_host(cls, host_state):
        """The columns of ``host_state``'s row, as arrays of one."""
        table, row = host_state.table, host_state.row
        return cls(lambda name: getattr(table, "_" + name)[row : row + 1])


#: The entry point group of weighers other distributions install.
ENTRY_POINTS = "berth.scheduler.weighers"


def catalog() -> plugins.Catalog[BaseHostWeigher]:
    """Every weigher installed, Berth's and those of entry points, by class name."""
    return plugins.discover(sys.modules[__name__], BaseHostWeigher, ENTRY_POINTS)


def all_weighers() -> dict[str, type[BaseHostWeigher]]:
    return catalog().classes


def enabled_weighers(conf: cfg.ConfigOpts) -> list[BaseHostWeigher]:
    classes = plugins.load(
        conf.filter_scheduler.weighers, catalog(), "weigher", "[filter_scheduler] weighers"
    )
    return [cls(conf) for cls in classes]
