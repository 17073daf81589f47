"""The planner's configuration (the fragmented fleets' ratios, scheduler.simulation.fragmented; the
filters that read them and the groups) and its enabled filters."""

import pytest

from scheduler import conf as berth_conf
from scheduler.conf import opts as conf_opts
from scheduler.policy import filters as filters_mod
from scheduler.simulation.fragmented import RATIOS

FILTERS = ["ComputeFilter", "RamFilter", "DiskFilter", "CoreFilter", "ServerGroupAntiAffinityFilter",
           "ServerGroupAffinityFilter"]


@pytest.fixture(scope="module")
def conf():
    conf = berth_conf.new_conf()
    conf_opts.register_plugin_opts(conf)
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("enabled_filters", FILTERS, "filter_scheduler")
    for resource, ratio in RATIOS.items():
        conf.set_override(f"{resource}_allocation_ratio", ratio, "filter_scheduler")
    yield conf
    conf.reset()


@pytest.fixture(scope="module")
def enabled(conf):
    return filters_mod.enabled_filters(conf)
