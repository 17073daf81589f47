"""[filter_scheduler] shuffle_best_same_weighed_hosts: the pick among equal-best hosts is random (Nova)."""

import collections
import random

import pytest

from scheduler.policy import weighers
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from tests.unit.policy.fakes import make_host, make_spec


def picks(selector, table, times=400):
    found = collections.Counter()
    for _ in range(times):
        spec = make_spec(memory_mb=1, root_gb=0)
        host = selector.select(table, spec)[0]
        table.release(host.row, spec.instance_uuids[0])
        found[host.host] += 1
    return found


def equal_fleet(rams):
    table = HostTable()
    for i, ram in enumerate(rams):
        make_host(f"h{i}", ram=ram, table=table)
    return table


def ram_weigher(policy_conf):
    return weighers.all_weighers()["RAMWeigher"](policy_conf)


def test_option_is_off_by_default(policy_conf):
    assert policy_conf.filter_scheduler.shuffle_best_same_weighed_hosts is False


@pytest.mark.parametrize("vectorized", [True, False])
def test_without_the_option_equal_best_hosts_go_to_the_earliest(policy_conf, vectorized):
    table = equal_fleet([8192, 8192, 8192, 4096])
    selector = Selector([], [ram_weigher(policy_conf)], 1, random.Random(1), vectorized=vectorized)
    assert picks(selector, table) == {"h0": 400}


@pytest.mark.parametrize("vectorized", [True, False])
def test_the_pick_is_uniform_among_the_equal_best(policy_conf, vectorized):
    table = equal_fleet([8192, 8192, 8192, 4096])
    selector = Selector([], [ram_weigher(policy_conf)], 1, random.Random(1), vectorized=vectorized,
                        shuffle_best_same_weighed_hosts=True)
    found = picks(selector, table, 600)
    assert set(found) == {"h0", "h1", "h2"}  # never h3, lighter
    assert all(150 < n < 250 for n in found.values())


def test_a_subset_smaller_than_the_tie_is_drawn_from_the_whole_tie(policy_conf):
    # Nova shuffles the 3 equal-best, takes 2, picks 1: uniform over the 3.
    table = equal_fleet([8192, 8192, 8192, 4096])
    selector = Selector([], [ram_weigher(policy_conf)], 2, random.Random(2),
                        shuffle_best_same_weighed_hosts=True)
    assert set(picks(selector, table)) == {"h0", "h1", "h2"}


def test_a_subset_larger_than_the_tie_is_unchanged(policy_conf):
    # 2 equal-best, subset 3: the subset is the 2 and the next heaviest, shuffled or not.
    table = equal_fleet([8192, 8192, 4096, 2048])
    for shuffle in (False, True):
        selector = Selector([], [ram_weigher(policy_conf)], 3, random.Random(3),
                            shuffle_best_same_weighed_hosts=shuffle)
        assert set(picks(selector, table)) == {"h0", "h1", "h2"}


def test_vector_and_per_host_pick_the_same(policy_conf):
    tables = [equal_fleet([8192] * 6 + [4096] * 3) for _ in range(2)]
    selectors = [Selector([], [ram_weigher(policy_conf)], 1, random.Random(5), vectorized=v,
                          shuffle_best_same_weighed_hosts=True) for v in (True, False)]
    for _ in range(10):
        spec = make_spec(memory_mb=1, root_gb=0, count=4)
        picked = [[h.host for h in s.select(t, spec)] for s, t in zip(selectors, tables, strict=True)]
        assert picked[0] == picked[1]
