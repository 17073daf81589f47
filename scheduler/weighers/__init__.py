"""Host weighers: each ranks the hosts that passed the filters.

A weigher returns a raw weight per host; the pipeline normalizes the raw
weights of one weigher to [0, 1] over the candidates (min-max) and adds
them up, each times the weigher's multiplier. Higher is better.
"""

import sys

from scheduler import plugins


class BaseHostWeigher:
    abstract = True
    #: Fixed bounds for normalization; None means the candidates' own min or max.
    minval = None
    maxval = None

    def __init__(self, conf):
        self.conf = conf

    @property
    def name(self):
        return type(self).__name__

    def weight_multiplier(self, host_state):
        return 1.0

    def weigh(self, host_state, spec):
        raise NotImplementedError

    def weigh_all(self, hosts, spec):
        return [self.weigh(host, spec) for host in hosts]


def normalize(values, minval=None, maxval=None):
    """Min-max scale to [0, 1]; all-equal weights carry no information and become 0."""
    if not values:
        return []
    low = min(values) if minval is None else minval
    high = max(values) if maxval is None else maxval
    if high == low:
        return [0.0] * len(values)
    span = float(high - low)
    return [(value - low) / span for value in values]


def all_weighers():
    return plugins.discover(sys.modules[__name__], BaseHostWeigher, "berth.scheduler.weighers")


def enabled_weighers(conf):
    classes = plugins.load(
        conf.filter_scheduler.weighers, all_weighers(), "weigher", "[filter_scheduler] weighers"
    )
    return [cls(conf) for cls in classes]
