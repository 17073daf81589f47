"""The vector forms of filters and weighers agree with the plain per-host ones.

On random fleets and requests, a vectorized Selector and the per-host
reference (``vectorized=False``) keep the same candidates, give them the
same weights and, with the same seed, pick the same hosts.
"""

import random

import numpy as np
import pytest

from scheduler import filters, weighers
from scheduler.bench.fleet import random_fleet, random_spec
from scheduler.selection import Selector

VECTOR_FILTERS = sorted(n for n, cls in filters.all_filters().items() if cls.filter_vector is not None)
VECTOR_WEIGHERS = sorted(n for n, cls in weighers.all_weighers().items() if cls.weigh_vector is not None)
SEEDS = range(5)


def pair(policy_conf, filter_names, weigher_names, subset=1, seed=0):
    policy_conf.set_override("enabled_filters", filter_names, "filter_scheduler")
    policy_conf.set_override("weighers", weigher_names, "filter_scheduler")
    return [
        Selector(filters.enabled_filters(policy_conf), weighers.enabled_weighers(policy_conf), subset,
                 random.Random(seed), vectorized=vectorized)
        for vectorized in (True, False)
    ]


def test_every_shipped_filter_and_weigher_has_a_vector_form():
    assert set(VECTOR_FILTERS) == set(filters.all_filters())
    assert set(VECTOR_WEIGHERS) == set(weighers.all_weighers())


@pytest.mark.parametrize("name", VECTOR_FILTERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_filter_keeps_the_same_hosts(policy_conf, name, seed):
    table = random_fleet(300, seed=seed)
    spec = random_spec(seed, retry={"num_attempts": 1, "hosts": [["host-000003", "host-000003"]]})
    vector, reference = pair(policy_conf, [name], [])
    rows = np.arange(len(table))
    [host_filter] = vector.filters
    kept = rows[host_filter.filter_vector(table, rows, spec)]
    expected = [r for r in rows if host_filter.host_passes(table.view(int(r)), spec)]
    assert list(kept) == expected


@pytest.mark.parametrize("name", VECTOR_WEIGHERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_weigher_gives_the_same_weights(policy_conf, name, seed):
    table = random_fleet(300, seed=seed)
    spec = random_spec(seed)
    vector, reference = pair(policy_conf, [], [name])
    rows = np.arange(len(table))
    assert np.array_equal(vector.weigh(table, rows, spec), reference.weigh(table, rows, spec))


@pytest.mark.parametrize("subset", [1, 3, 50])
@pytest.mark.parametrize("seed", SEEDS)
def test_default_pipeline_picks_the_same_hosts(policy_conf, subset, seed):
    names = policy_conf.filter_scheduler.enabled_filters
    tables = [random_fleet(400, seed=seed) for _ in range(2)]
    vector, reference = pair(policy_conf, names, policy_conf.filter_scheduler.weighers, subset, seed)
    for i in range(20):
        spec = random_spec(seed * 100 + i, count=1 + i % 3)
        picked = [[h.host for h in selector.select(table, spec)]
                  for selector, table in zip((vector, reference), tables, strict=True)]
        assert picked[0] == picked[1]
    assert np.array_equal(tables[0].free_ram_mb, tables[1].free_ram_mb)


def test_ties_at_the_subset_boundary_keep_the_earlier_hosts(policy_conf):
    from scheduler.selection import top

    weights = np.array([1.0, 3.0, 2.0, 2.0, 2.0, 0.0])
    assert list(top(weights, 3)) == [1, 2, 3]
    assert list(top(weights, 1)) == [1]
    assert list(top(weights, 10)) == [1, 2, 3, 4, 0, 5]
