"""What ``/status.json`` holds: the scheduler's view of the fleet, read from its host table
under the lock (columns copied, no per-host objects made), the instances by state from the
database, and what the page remembers (scheduler.status_page.recent)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from scheduler.utils.masking import mask_url

LOG = logging.getLogger(__name__)

UP, DOWN, DISABLED = 0, 1, 2
_COLUMNS = ("total_ram_mb", "free_ram_mb", "total_disk_gb", "free_disk_gb", "vcpus_total", "vcpus_used")


#: The allocation ratios of a page told none: each host's total is what it can take.
PHYSICAL = {"ram": 1.0, "vcpus": 1.0, "disk": 1.0}


def fleet(host_manager: Any, default_zone: str, down_after_s: float,
          ratios: dict[str, float] | None = None) -> dict[str, Any]:
    """Every host the scheduler knows (but those deleted), in the order of their names,
    columnar: its zone (an index into ``zones``), its aggregates (an index into
    ``memberships``, the distinct lists of aggregate names), its state (0 up, 1 down,
    2 disabled) and its RAM, disk and vCPUs used and in all; and the allocation ``ratios``
    ({"ram", "vcpus", "disk"}) the filters multiply each total by: what a host can take."""
    hosts = host_manager
    with hosts.lock:
        table = hosts.table
        order, membership, memberships = table.aggregate_index.memo(_LAYOUT, lambda: _layout(table))
        deleted = [table.index[name] for name in hosts.deleted if name in table.index]
        columns = {name: np.array(getattr(table, name), dtype=float) for name in _COLUMNS}
        updated = np.array(table.updated, dtype=float)
        disabled = np.array(table.disabled, dtype=bool)
        names = table.names[:]  # rows are only ever added: a row's name stays
    if deleted:
        gone = np.zeros(len(names), dtype=bool)
        gone[deleted] = True
        order = order[~gone[order]]
    zone_of: dict[str, int] = {}
    zone_names = [",".join(sorted({z for a in member_of for z in a.zones})) or default_zone
                  for member_of in memberships]
    zone_of_set = [zone_of.setdefault(zone, len(zone_of)) for zone in zone_names]
    state = np.where(time.monotonic() - updated[order] > down_after_s, DOWN,
                     np.where(disabled[order], DISABLED, UP))
    kept = membership[order]

    def whole(name: str) -> list[int]:
        return np.rint(columns[name][order]).astype(int).tolist()

    def used(total: str, free: str) -> list[int]:
        return np.rint(columns[total][order] - columns[free][order]).astype(int).tolist()

    return {
        "zones": list(zone_of),
        "names": [names[row] for row in order.tolist()],
        "zone": np.asarray(zone_of_set, dtype=int)[kept].tolist() if memberships else [],
        "memberships": [sorted(a.name for a in member_of) for member_of in memberships],
        "membership": kept.tolist(),
        "state": state.astype(int).tolist(),
        "ram_used_mb": used("total_ram_mb", "free_ram_mb"),
        "ram_mb": whole("total_ram_mb"),
        "disk_used_gb": used("total_disk_gb", "free_disk_gb"),
        "disk_gb": whole("total_disk_gb"),
        "vcpus_used": whole("vcpus_used"),
        "vcpus": whole("vcpus_total"),
        "ratios": dict(ratios or PHYSICAL),
    }


_LAYOUT = ("status page layout",)


def _layout(table: Any) -> tuple[np.ndarray, np.ndarray, list[list[Any]]]:
    """(the rows in the order of their names, each row's index into the distinct lists of
    aggregates, those lists): kept until a host joins or the aggregates change."""
    index = table.aggregate_index
    code: dict[tuple[str, ...], int] = {}
    memberships: list[list[Any]] = []
    membership = np.empty(table.size, dtype=np.intp)
    for row in range(table.size):
        member_of = index.of_row(row)
        key = tuple(a.name for a in member_of)
        found = code.get(key)
        if found is None:
            found = code[key] = len(memberships)
            memberships.append(member_of)
        membership[row] = found
    names = table.names
    order = np.asarray(sorted(range(table.size), key=names.__getitem__), dtype=np.intp)
    return order, membership, memberships


#: What the page shows of each move under way.
MOVE_FIELDS = ("id", "instance_uuid", "kind", "status", "source_host", "dest_host", "created_at")


class StatusSource:
    """The status of one scheduler process: ``snapshot()`` is ``/status.json``."""

    def __init__(self, host: str, host_manager: Any, count_instances: Callable[[], dict[str, int]],
                 default_zone: Callable[[], str], down_after_s: Callable[[], float], refusals: Any,
                 dead_letters: Any, scaling_history: Any | None,
                 moves: Callable[[], list[dict[str, Any]]] = list,
                 ratios: Callable[[], dict[str, float]] = lambda: PHYSICAL) -> None:
        self._host = host
        self._hosts = host_manager
        self._count_instances = count_instances
        self._default_zone = default_zone
        self._down_after_s = down_after_s
        self._refusals = refusals
        self._dead_letters = dead_letters
        self._scaling = scaling_history
        self._moves = moves  # the moves under way, newest first
        self._ratios = ratios  # the allocation ratios the filters apply

    def snapshot(self) -> dict[str, Any]:
        try:
            instances: dict[str, int] | None = dict(sorted(self._count_instances().items()))
            instances_error = None
        except Exception as exc:  # the page still shows the fleet
            LOG.warning("Status page: cannot count the instances: %s", mask_url(str(exc).splitlines()[0]))
            instances, instances_error = None, "the database cannot be read now"
        try:
            moves: list[dict[str, Any]] | None = [
                {key: move[key] for key in MOVE_FIELDS} for move in self._moves()]
        except Exception as exc:
            LOG.warning("Status page: cannot read the moves: %s", mask_url(str(exc).splitlines()[0]))
            moves = None
        return {
            "scheduler": self._host,
            "generated_at": time.time(),
            "hosts": fleet(self._hosts, self._default_zone(), self._down_after_s(), self._ratios()),
            "instances": instances,
            "instances_error": instances_error,
            "moves": moves,
            "refusals": list(reversed(self._refusals.items())),
            "dead_letters": list(reversed(self._dead_letters.items())),
            "scaling_groups": None if self._scaling is None else self._scaling.groups(),
        }
