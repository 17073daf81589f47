"""The vector forms of filters and weighers agree with the plain per-host ones.

On random fleets and requests, a vectorized Selector and the per-host
reference (``vectorized=False``) keep the same candidates, give them the
same weights and, with the same seed, pick the same hosts.
"""

import copy
import dataclasses
import functools
import random
import time

import numpy as np
import pytest

from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector
from scheduler.simulation.host_tables import random_fleet as build_fleet
from scheduler.simulation.host_tables import random_spec, rich_spec

VECTOR_FILTERS = sorted(n for n, cls in filters.all_filters().items() if cls.filter_vector is not None)
VECTOR_WEIGHERS = sorted(n for n, cls in weighers.all_weighers().items() if cls.weigh_vector is not None)
SEEDS = range(5)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Weighers that work a chunk of rows at a time do so on these small fleets too."""
    monkeypatch.setattr(weighers, "CHUNK_ROWS", 128)


@functools.cache
def _built(n, seed, rich):
    return build_fleet(n, seed=seed, rich=rich), time.monotonic()


def random_fleet(n, seed=0, rich=False):
    """A fresh copy of the fleet of ``n`` hosts built once per seed, its reports as recent as when built."""
    table, built = _built(n, seed, rich)
    table = copy.deepcopy(table)
    table._bind_columns()  # the copy's column views must share the copied arrays
    table.updated += time.monotonic() - built
    return table


def pair(policy_conf, filter_names, weigher_names, subset=1, seed=0):
    policy_conf.set_override("enabled_filters", filter_names, "filter_scheduler")
    policy_conf.set_override("weighers", weigher_names, "filter_scheduler")
    return [
        Selector(filters.enabled_filters(policy_conf), weighers.enabled_weighers(policy_conf), subset,
                 random.Random(seed), vectorized=vectorized)
        for vectorized in (True, False)
    ]


#: Plugins whose per-host form is the only one, and why.
PER_HOST_ONLY = set()


def test_every_shipped_filter_and_weigher_has_a_vector_form():
    assert set(VECTOR_FILTERS) == set(filters.all_filters()) - PER_HOST_ONLY
    assert set(VECTOR_WEIGHERS) == set(weighers.all_weighers()) - PER_HOST_ONLY


def _mask(result, n):
    return np.broadcast_to(np.asarray(result, dtype=bool), (n,))


def _rich_conf(policy_conf):
    policy_conf.set_override("weight_setting", ["cpu.percent=-1.0", "memory.percent=0.5"], "metrics")
    policy_conf.set_override("isolated_hosts", ["host-000001", "host-000007"], "filter_scheduler")
    policy_conf.set_override("isolated_images", ["img-1"], "filter_scheduler")


@pytest.mark.parametrize("name", sorted(filters.all_filters()))
@pytest.mark.parametrize("seed", SEEDS)
def test_filter_keeps_the_same_hosts_on_rich_fleets(policy_conf, name, seed):
    _rich_conf(policy_conf)
    table = random_fleet(300, seed=seed, rich=True)
    spec = rich_spec(seed, table)
    # Members of this request pending on a host count for the server-group filters.
    table.consume(5, spec.instance_uuids[0], spec.flavor)
    vector, reference = pair(policy_conf, [name], [])
    [host_filter] = reference.filters
    rows = np.arange(len(table))
    expected = [r for r in rows if host_filter.host_passes(table.view(int(r)), spec)]
    if host_filter.filter_vector is not None:
        assert list(rows[_mask(host_filter.filter_vector(table, rows, spec), len(rows))]) == expected
        subset = rows[::3]
        kept = subset[_mask(host_filter.filter_vector(table, subset, spec), len(subset))]
        assert list(kept) == [r for r in expected if r % 3 == 0]


@pytest.mark.parametrize("name", sorted(weighers.all_weighers()))
@pytest.mark.parametrize("seed", SEEDS)
def test_weigher_gives_the_same_weights_on_rich_fleets(policy_conf, name, seed):
    _rich_conf(policy_conf)
    table = random_fleet(300, seed=seed, rich=True)
    spec = rich_spec(seed, table)
    table.consume(5, spec.instance_uuids[0], spec.flavor)
    vector, reference = pair(policy_conf, [], [name])
    rows = np.arange(len(table))
    assert np.allclose(vector.weigh(table, rows, spec), reference.weigh(table, rows, spec),
                       rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", VECTOR_FILTERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_filter_keeps_the_same_hosts(policy_conf, name, seed):
    table = random_fleet(300, seed=seed)
    spec = random_spec(seed, retry={"num_attempts": 1, "hosts": [["host-000003", "host-000003"]]})
    vector, reference = pair(policy_conf, [name], [])
    rows = np.arange(len(table))
    [host_filter] = vector.filters
    kept = rows[_mask(host_filter.filter_vector(table, rows, spec), len(rows))]
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


@pytest.mark.parametrize("subset", [1, 3])
def test_hosts_past_their_ram_tie_in_both_pipelines(policy_conf, subset):
    """Hosts past their RAM (free RAM below 0, room left under a ratio of 1.5) all weigh 0 to
    RAMWeigher. The vector pipeline, which orders the hosts by their free RAM alone, must tie them
    as the reference's scaled weights do: the earliest passing hosts, not the least overcommitted."""
    policy_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    names = policy_conf.filter_scheduler.enabled_filters
    tables = [random_fleet(400, seed=11) for _ in range(2)]
    for table in tables:
        table.free_ram_mb[:len(table)] = -16.0 * (1 + np.arange(len(table)) % 7)
    vector, reference = pair(policy_conf, names, ["RAMWeigher"], subset, 11)
    for i in range(12):
        spec = random_spec(1_100 + i)
        picked = [[h.host for h in selector.select(table, spec)]
                  for selector, table in zip((vector, reference), tables, strict=True)]
        assert picked[0] == picked[1]
    assert np.array_equal(tables[0].free_ram_mb, tables[1].free_ram_mb)


def test_ties_at_the_subset_boundary_keep_the_earlier_hosts(policy_conf):
    from scheduler.policy.selection import top

    weights = np.array([1.0, 3.0, 2.0, 2.0, 2.0, 0.0])
    assert list(top(weights, 3)) == [1, 2, 3]
    assert list(top(weights, 1)) == [1]
    assert list(top(weights, 10)) == [1, 2, 3, 4, 0, 5]


TIERERS = sorted(
    [n for n, cls in filters.all_filters().items() if cls.tier is not None or cls.tier_vector is not None]
    + [n for n, cls in weighers.all_weighers().items() if cls.tier is not None or cls.tier_vector is not None]
)


def _load_policy(policy_conf):
    policy_conf.set_override("disk_red_threshold", "5%", "filter_scheduler")
    policy_conf.set_override("disk_yellow_threshold", "200GB", "filter_scheduler")


@pytest.mark.parametrize("rich", [False, True])
@pytest.mark.parametrize("name", TIERERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_tiers_are_the_same(policy_conf, name, seed, rich):
    _load_policy(policy_conf)
    table = random_fleet(300, seed=seed, rich=rich)
    if rich:  # server groups (soft affinity / anti-affinity), members of this request pending
        spec = rich_spec(seed, table)
        table.consume(5, spec.instance_uuids[0], spec.flavor)
    else:
        spec = random_spec(seed, scheduler_hints={"preferred_hosts": ["host-000004", "host-000009"],
                                                  "avoid_hosts": "host-000009,host-000011"})
    is_filter = name in filters.all_filters()
    vector, reference = pair(policy_conf, [name] if is_filter else [], [] if is_filter else [name])
    rows = np.arange(len(table))
    for subset in (rows, rows[::3], slice(None)):
        tiers = vector.tiers(table, subset, spec)
        expected = reference.tiers(table, table.row_numbers(subset), spec)
        assert np.array_equal(tiers, expected)
    assert len(set(vector.tiers(table, rows, spec))) > 1  # the fleets exercise several tiers


@pytest.mark.parametrize("seed", SEEDS)
def test_load_policies_pick_the_same_hosts(policy_conf, seed):
    _load_policy(policy_conf)
    policy_conf.set_override("cpu_allocation_ratio", 4.0, "filter_scheduler")
    names = ["RamFilter", "CoreFilter", "DiskThresholdFilter"]
    tables = [random_fleet(400, seed=seed) for _ in range(2)]
    vector, reference = pair(policy_conf, names, ["BalancedWeigher", "CapacityWeigher", "RAMWeigher"],
                             1, seed)
    assert vector.host_subset_size == 3  # balanced_selection_spread
    for i in range(20):
        spec = random_spec(seed * 100 + i, count=1 + i % 3)
        picked = [[h.host for h in selector.select(table, spec)]
                  for selector, table in zip((vector, reference), tables, strict=True)]
        assert picked[0] == picked[1]
    assert np.array_equal(tables[0].free_ram_mb, tables[1].free_ram_mb)


@pytest.mark.parametrize("subset", [1, 3])
def test_hosts_left_out_of_most_of_the_fleet_leave_the_same_picks_counts_and_refusals(policy_conf, subset):
    """Disabled hosts and a request's ignored hosts leave the filters most of the fleet, whose
    columns they then read in place, the hosts left out masked: the same picks, the same count of
    hosts each filter left, and the same NoValidHost, as the per-host reference."""
    names = policy_conf.filter_scheduler.enabled_filters
    tables = [random_fleet(400, seed=5) for _ in range(2)]
    for table in tables:
        table.disabled[::9] = True
    vector, reference = pair(policy_conf, names, policy_conf.filter_scheduler.weighers, subset, 5)
    ignored = [tables[0].names[r] for r in (1, 2, 50, 51)]
    for i in range(16):
        spec = random_spec(500 + i, count=1 + i % 2)
        spec.ignore_hosts = ignored[:i % 5]
        made = [[], []]
        picked = [[h.host for h in selector.select(table, spec, decisions=decisions, detail=True)]
                  for selector, table, decisions in zip((vector, reference), tables, made, strict=True)]
        assert picked[0] == picked[1] and not set(picked[0]) & set(ignored[:i % 5])
        assert [(d.considered, d.passed, d.filters) for d in made[0]] == [
            (d.considered, d.passed, d.filters) for d in made[1]]
    assert np.array_equal(tables[0].free_ram_mb, tables[1].free_ram_mb)
    too_big = random_spec(600)
    too_big.flavor = dataclasses.replace(too_big.flavor, memory_mb=10 ** 9)
    refusals = []
    for selector, table in zip((vector, reference), tables, strict=True):
        with pytest.raises(NoValidHost) as refused:
            selector.select(table, too_big)
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1] and "RamFilter" in refusals[0]
