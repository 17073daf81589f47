"""Host filters: each decides whether one host can take the instance being placed."""

import sys

from scheduler import plugins


class BaseHostFilter:
    """A filter: ``host_passes(host_state, spec)`` says whether the host fits.

    Filters are built once per scheduler with the configuration and may set
    ``host_state.limits`` for the agent's claim. ``run_filter_once_per_request``
    filters see only the first instance of a multi-instance request.
    """

    abstract = True
    run_filter_once_per_request = False

    def __init__(self, conf):
        self.conf = conf

    @property
    def name(self):
        return type(self).__name__

    def host_passes(self, host_state, spec):
        raise NotImplementedError

    def filter_all(self, hosts, spec):
        return [host for host in hosts if self.host_passes(host, spec)]


def all_filters():
    return plugins.discover(sys.modules[__name__], BaseHostFilter, "berth.scheduler.filters")


def enabled_filters(conf):
    classes = plugins.load(
        conf.filter_scheduler.enabled_filters,
        all_filters(),
        "filter",
        "[filter_scheduler] enabled_filters",
    )
    return [cls(conf) for cls in classes]
