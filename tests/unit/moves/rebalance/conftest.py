"""The planner's configuration (benchmarks.make_room's filters and ratios) and its enabled filters."""

import pytest

from benchmarks import make_room as bench
from scheduler.policy import filters as filters_mod


@pytest.fixture(scope="module")
def conf():
    conf = bench.make_conf()
    yield conf
    conf.reset()


@pytest.fixture(scope="module")
def enabled(conf):
    return filters_mod.enabled_filters(conf)
