"""Host filters: each decides whether one host can take the instance being placed."""

import sys

from scheduler import plugins


class BaseHostFilter:
    """A filter: ``host_passes(host_state, spec)`` says whether one host fits.

    A filter may also provide ``filter_vector(table, rows, spec)``: a boolean
    numpy array, one entry per row of ``rows`` (an index array into the
    HostTable, or a slice of it: read columns as ``table.free_ram_mb[rows]``),
    with exactly the answers ``host_passes`` would give (or a single bool when
    the answer is the same for every host). The pipeline runs
    vector filters first over the whole fleet and per-host ones only on
    their survivors.

    ``limits(host_state)`` gives what the agent's claim must check against
    on the host finally chosen. ``run_filter_once_per_request`` filters see
    only the first instance of a multi-instance request.
    """

    abstract = True
    run_filter_once_per_request = False
    #: The scheduler hints this filter reads, and the server group policies it enforces
    #: (scheduler.hints refuses a request asking for one that no enabled plugin honours).
    reads_hints = ()
    group_policies = ()
    #: Aggregate metadata this filter reads as a number: {key: the value it must exceed,
    #: or None} (berth aggregate set-metadata refuses any other value).
    aggregate_numbers = {}
    filter_vector = None
    #: Optional ``tier(host_state, spec) -> int`` / ``tier_vector(table, rows, spec)``:
    #: hosts that pass but should be used only when no better tier (0 best) has any.
    tier = None
    tier_vector = None

    def __init__(self, conf):
        self.conf = conf

    @property
    def name(self):
        return type(self).__name__

    def host_passes(self, host_state, spec):
        raise NotImplementedError

    def filter_all(self, hosts, spec):
        return [host for host in hosts if self.host_passes(host, spec)]

    def limits(self, host_state):
        return {}


def all_filters():
    return plugins.discover(sys.modules[__name__], BaseHostFilter, "berth.scheduler.filters")


def available_filters(conf):
    """{name: class} of the filters ``[filter_scheduler] available_filters`` lets enabled_filters name."""
    installed = all_filters()
    allowed = plugins.load(conf.filter_scheduler.available_filters, installed, "filter",
                           "[filter_scheduler] available_filters")
    return {cls.__name__: cls for cls in allowed} if len(allowed) < len(installed) else installed


def enabled_filters(conf):
    classes = plugins.load(
        conf.filter_scheduler.enabled_filters,
        available_filters(conf),
        "filter",
        "[filter_scheduler] enabled_filters",
    )
    return [cls(conf) for cls in classes]
