"""IsolatedHostsFilter: isolated images run only on isolated hosts (and, optionally, vice versa).

The image is named by the request's ``image.id``. As in Nova, with no
isolated_images the isolated_hosts take nothing when restricted, everything
otherwise; with no isolated_hosts, isolated images run nowhere.
"""

import numpy as np
from oslo_config import cfg

from scheduler.policy import filters

opts = [
    cfg.ListOpt(
        "isolated_hosts",
        default=[],
        help="IsolatedHostsFilter: hosts reserved for the isolated_images.",
    ),
    cfg.ListOpt(
        "isolated_images",
        default=[],
        help="IsolatedHostsFilter: image ids that run only on the isolated_hosts.",
    ),
    cfg.BoolOpt(
        "restrict_isolated_hosts_to_isolated_images",
        default=True,
        help="IsolatedHostsFilter: whether the isolated_hosts take only isolated images.",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


class IsolatedHostsFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def __init__(self, conf):
        super().__init__(conf)
        options = conf.filter_scheduler
        self.hosts = set(options.isolated_hosts)
        self.images = set(options.isolated_images)
        self.restrict = options.restrict_isolated_hosts_to_isolated_images

    def _passes(self, image_isolated, host_isolated):
        if self.restrict:
            return image_isolated == host_isolated
        return (not image_isolated) | host_isolated

    def host_passes(self, host_state, spec):
        return self._passes(spec.image_id in self.images, host_state.host in self.hosts)

    def filter_vector(self, table, rows, spec):
        if not self.hosts and not self.images:
            return True
        isolated_rows = [table.index[h] for h in self.hosts if h in table.index]
        host_isolated = np.isin(table.row_numbers(rows), isolated_rows)
        return self._passes(spec.image_id in self.images, host_isolated)
