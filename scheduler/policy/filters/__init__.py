"""Host filters: each decides whether one host can take the instance being placed.

A filter is a subclass of :class:`BaseHostFilter` that implements
``host_passes``; every other hook below has a default that does nothing, and
a filter overrides only those it needs. Plugins are found by
:mod:`scheduler.policy.plugins` and known by their class name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduler.policy import plugins

if TYPE_CHECKING:
    from oslo_config import cfg

    from berth_contract.request_spec import RequestSpec
    from scheduler.policy.host_state import HostState, HostTable

#: Rows of a HostTable: an index array, or a slice of the table (read ``table.free_ram_mb[rows]``).
Rows = NDArray[np.intp] | slice


class BaseHostFilter:
    """A filter: ``host_passes(host_state, spec)`` says whether one host fits.

    Berth builds each enabled filter once, at start, as ``cls(conf)``, and
    calls its hooks for every request; a filter keeps no state between
    requests.
    """

    abstract = True

    #: True: Berth runs the filter for the first instance of a multi-instance
    #: request only (its answer cannot change as the request's instances are placed).
    run_filter_once_per_request: ClassVar[bool] = False

    #: The scheduler hints this filter reads, and the server group policies it
    #: enforces: Berth refuses a request asking for one no enabled plugin
    #: honours (scheduler.policy.hints), naming the plugin to enable.
    reads_hints: ClassVar[tuple[str, ...]] = ()
    group_policies: ClassVar[tuple[str, ...]] = ()

    #: The flavor extra specs and image properties this filter reads (scheduler.policy.extra_specs):
    #: exact keys, ``scope:`` for every key of a scope, ``""`` for every unscoped extra spec,
    #: ``*`` for every image property. A request carrying a key no enabled filter reads, that is
    #: no resource and not the hypervisor's business, is refused, naming the key.
    reads_extra_specs: ClassVar[tuple[str, ...]] = ()
    reads_image_properties: ClassVar[tuple[str, ...]] = ()

    #: Aggregate metadata this filter reads as a number: {key: the value it must
    #: exceed, or None}; ``berth aggregate set-metadata`` refuses any other value.
    aggregate_numbers: ClassVar[dict[str, float | None]] = {}

    #: Optional ``filter_vector(table, rows, spec)``: the answers of ``host_passes``
    #: for many hosts at once, a boolean array with one entry per row of ``rows``,
    #: or a single True when the filter has nothing to check for this request.
    #: They must be exactly the answers ``host_passes`` gives. The Selector runs
    #: the filters that have one first, over the whole fleet, and ``host_passes``
    #: of the others only on their survivors. None: host by host only.
    filter_vector: Callable[[HostTable, Rows, RequestSpec], NDArray[np.bool_] | bool] | None = None

    #: Optional ``why_removed(table, rows, spec)``: when no host is left, what the NoValidHost
    #: reason adds to the count of hosts this filter removed (text naming what they lack, or
    #: None). ``rows``: the hosts the filters were given.
    why_removed: Callable[[HostTable, Rows, RequestSpec], str | None] | None = None

    #: Optional ``tier(host_state, spec)`` (an int, 0 best) and its vector form
    #: ``tier_vector(table, rows, spec)`` (an int array, one per row): hosts that
    #: pass but should be used only when no better tier has any. Called on the
    #: hosts that passed every filter; tiers of several plugins compose in order
    #: (the first decides, the next breaks its ties), each below selection.TIER_BASE.
    tier: Callable[[HostState, RequestSpec], int] | None = None
    tier_vector: Callable[[HostTable, Rows, RequestSpec], NDArray[np.int64]] | None = None

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @property
    def name(self) -> str:
        """The class name: how options, logs and NoValidHost reasons name the filter."""
        return type(self).__name__

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> bool:
        """Whether ``host_state`` can take the instance of ``spec`` being placed."""
        raise NotImplementedError

    def limits(self, host_state: HostState) -> dict[str, Any]:
        """Called on the host finally chosen: what the agent's claim must check against
        ({"memory_mb": ..., "disk_gb": ..., "vcpu": ...}); the limits of every filter
        are merged. Default: none."""
        return {}

    def check_hints(self, spec: RequestSpec) -> None:
        """Called before placing ``spec`` when the filter is enabled: raise ValueError
        saying why, to refuse a request whose hints it cannot read (a malformed query).
        Default: accepts every request."""


#: The entry point group of filters other distributions install.
ENTRY_POINTS = "berth.scheduler.filters"


def catalog() -> plugins.Catalog[BaseHostFilter]:
    """Every filter installed, Berth's and those of entry points, by class name."""
    return plugins.discover(sys.modules[__name__], BaseHostFilter, ENTRY_POINTS)


def all_filters() -> dict[str, type[BaseHostFilter]]:
    return catalog().classes


def available_filters(conf: cfg.ConfigOpts) -> plugins.Catalog[BaseHostFilter]:
    """The filters ``[filter_scheduler] available_filters`` lets enabled_filters name."""
    installed = catalog()
    allowed = plugins.load(conf.filter_scheduler.available_filters, installed, "filter",
                           "[filter_scheduler] available_filters")
    if len(allowed) == len(installed.classes):
        return installed
    return plugins.Catalog({cls.__name__: cls for cls in allowed}, installed.unusable)


def enabled_filters(conf: cfg.ConfigOpts) -> list[BaseHostFilter]:
    classes = plugins.load(
        conf.filter_scheduler.enabled_filters,
        available_filters(conf),
        "filter",
        "[filter_scheduler] enabled_filters",
    )
    return [cls(conf) for cls in classes]
