"""The figures a plan shows before and after its migrations, and ``berth simulate`` reports.

* skew: measured utilisation (busy vCPUs over the host's vCPUs), the highest over the fleet's
  (its total load over its total vCPUs, which no migration changes): 1.0 even, NaN no load
  measured. On hosts of one size it is max / mean of their load;
* peak: the highest utilisation;
* hosts used: hosts holding an instance;
* overloaded: hosts whose measured use is past their vCPUs or their memory;
* the largest flavor that fits anywhere: the largest of the flavors asked (or in use) that the
  filters accept on some host;
* stranded capacity: the share of the free RAM on hosts that cannot take the smallest of
  those flavors in some class (full of vCPUs or disk, or with less RAM than it takes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from berth_contract.request_spec import Flavor
from scheduler.moves.rebalance.judge import Judge, request_for
from scheduler.moves.rebalance.snapshot import PlannedMove, Snapshot, amounts_of


def skew(load: ArrayLike, capacity: ArrayLike | None = None) -> float:
    """The highest utilisation (``load`` over ``capacity``, host by host) over the fleet's (total
    load over total capacity); hosts of no capacity left out. Without ``capacity``: max / mean of
    ``load``. NaN when nothing is loaded."""
    values = np.asarray(load, dtype=float)
    sizes = np.ones_like(values) if capacity is None else np.asarray(capacity, dtype=float)
    sized = sizes > 0
    if not sized.any():
        return float("nan")
    values, sizes = values[sized], sizes[sized]
    mean = values.sum() / sizes.sum()
    return float((values / sizes).max() / mean) if mean > 0 else float("nan")


def stranded(free: NDArray[np.float64], smallest: ArrayLike) -> float:
    """The share of the free RAM on hosts that cannot take ``smallest``: ``free`` holds a row per
    host and a column per class (vCPU, memory MB, disk GB), ``smallest`` what it takes of each."""
    stuck = (free < np.asarray(smallest, dtype=float)).any(axis=1)
    ram = np.clip(free[:, 1], 0, None)
    total = ram.sum()
    return float(ram[stuck].sum() / total) if total > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Figures:
    skew: float
    hosts_used: int
    largest_fit: str | None  # None: not one of the flavors fits anywhere
    stranded: float
    peak: float = float("nan")  # the highest utilisation; NaN: no load measured
    overloaded: int = 0

    def summary(self) -> dict[str, object]:
        return {"skew": None if self.skew != self.skew else round(self.skew, 4),
                "hosts_used": self.hosts_used, "largest_fit": self.largest_fit,
                "stranded": round(self.stranded, 4),
                "peak": None if self.peak != self.peak else round(self.peak, 4),
                "overloaded": self.overloaded}


def flavors_in_use(snapshot: Snapshot) -> list[Flavor]:
    """The distinct flavors of the snapshot's instances."""
    by_object = {id(r.spec.flavor): r.spec.flavor for r in snapshot.residents.values()}
    seen: dict[tuple[object, ...], Flavor] = {}
    for flavor in by_object.values():
        seen.setdefault((flavor.name, flavor.memory_mb, flavor.vcpus, flavor.root_gb, flavor.ephemeral_gb,
                         repr(sorted(flavor.extra_specs.items()))), flavor)
    return list(seen.values())


def measure(snapshot: Snapshot, judge: Judge, flavors: Sequence[Flavor] | None = None) -> Figures:
    """The figures of the snapshot as it stands (``flavors``: those in use when not given)."""
    kinds = list(flavors) if flavors is not None else flavors_in_use(snapshot)
    enabled = np.flatnonzero(~np.asarray(snapshot.table.disabled, dtype=bool)).astype(np.intp)
    used = sum(1 for residents in snapshot.on_host.values() if residents)
    smallest = np.min([amounts_of(f) for f in kinds], axis=0) if kinds else np.zeros(3)
    return Figures(skew(snapshot.load, snapshot.capacity()), used,
                   _largest_fit(snapshot, judge, kinds, enabled),
                   stranded(snapshot.room()[enabled], smallest), peak(snapshot), len(overloaded(snapshot)))


def peak(snapshot: Snapshot) -> float:
    """The highest utilisation of a host (NaN: no load measured)."""
    if not (snapshot.load > 0).any():
        return float("nan")
    return float(snapshot.utilisation().max())


def overloaded(snapshot: Snapshot, ceiling: float = 1.0) -> list[int]:
    """The rows whose measured use is past ``ceiling`` of their vCPUs or of their memory."""
    tolerance = 1e-6
    over = (snapshot.load > ceiling * snapshot.capacity() + tolerance) | \
        (snapshot.memory_load > ceiling * snapshot.memory() + tolerance)
    return [int(row) for row in np.flatnonzero(over)]


def _largest_fit(snapshot: Snapshot, judge: Judge, flavors: Iterable[Flavor],
                 rows: NDArray[np.intp]) -> str | None:
    room = snapshot.room()
    for flavor in sorted(flavors, key=lambda f: tuple(amounts_of(f)[[1, 0, 2]]), reverse=True):
        wanted = amounts_of(flavor)
        roomy = rows[(room[rows] >= wanted - 1e-9).all(axis=1)]
        if len(judge.passing(snapshot, roomy, request_for(flavor, 1))):
            return flavor.name or "/".join(f"{v:g}" for v in wanted)
    return None


def before_after(snapshot: Snapshot, judge: Judge, migrations: Sequence[PlannedMove],
                 flavors: Sequence[Flavor] | None = None) -> tuple[Figures, Figures]:
    """The figures now and once ``migrations`` are done; the snapshot is left as it was."""
    kinds = list(flavors) if flavors is not None else flavors_in_use(snapshot)
    before = measure(snapshot, judge, kinds)
    with snapshot.moved(migrations):
        after = measure(snapshot, judge, kinds)
    return before, after


def shown(figures: Figures) -> Iterator[tuple[str, str]]:
    """(name, value) of each figure, as a plan prints them."""
    yield "skew", "-" if figures.skew != figures.skew else f"{figures.skew:.3f}"
    yield "busiest host", "-" if figures.peak != figures.peak else f"{figures.peak:.1%} of its vCPUs"
    yield "hosts used", str(figures.hosts_used)
    yield "hosts past their vCPUs or memory", str(figures.overloaded)
    yield "largest flavor that fits", figures.largest_fit or "none"
    yield "stranded RAM", f"{figures.stranded:.1%}"
