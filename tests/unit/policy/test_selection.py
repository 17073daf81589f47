import collections
import time

import pytest

from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from tests.unit.policy.fakes import make_host, make_spec


@pytest.fixture
def selector(policy_conf, rng):
    return Selector(filters.enabled_filters(policy_conf), weighers.enabled_weighers(policy_conf), 1, rng)


def test_the_host_with_most_free_ram_wins(selector, table):
    hosts = [make_host(name, table=table, free_ram=free)
             for name, free in (("a", 2000), ("b", 6000), ("c", 4000))]
    [chosen] = selector.select(hosts, make_spec(memory_mb=1024))
    assert chosen.host == "b"
    assert chosen.free_ram_mb == 6000 - 1024


def test_instances_of_one_request_see_each_others_consumption(selector, table):
    hosts = [make_host("a", table=table, ram=8192), make_host("b", table=table, ram=8192, free_ram=6000)]
    chosen = selector.select(hosts, make_spec(memory_mb=4096, count=2))
    assert [h.host for h in chosen] == ["a", "b"]
    assert hosts[0].free_ram_mb == 4096 and hosts[1].free_ram_mb == 1904


def test_chosen_host_carries_the_limits_for_the_claim(selector, table):
    [chosen] = selector.select([make_host("a", table=table, ram=4096, disk=50, vcpus=2)], make_spec())
    assert chosen.limits == {"memory_mb": 4096.0, "disk_gb": 50.0, "vcpu": 8.0}  # ratios 1.0, 1.0, 4.0


class _Passes(filters.BaseHostFilter):
    """A plugin's filter without limits (BaseHostFilter's: none)."""

    def host_passes(self, host_state, spec):
        return True


class _Gpus(_Passes):
    """A plugin's filter with limits of its own."""

    def limits(self, host_state):
        return {"gpus": 2, "vcpu": 3.0}


def test_a_plugin_filters_limits_are_merged_with_the_others_in_filter_order(policy_conf, rng, table):
    enabled = filters.enabled_filters(policy_conf)
    given = _Passes(policy_conf)
    given.limits = lambda host_state: {"pci": 1}  # limits set on the filter itself count too
    selector = Selector([_Passes(policy_conf), *enabled, _Gpus(policy_conf), given],
                        weighers.enabled_weighers(policy_conf), 1, rng)
    [chosen] = selector.select([make_host("a", table=table, ram=4096, disk=50, vcpus=2)], make_spec())
    assert chosen.limits == {"memory_mb": 4096.0, "disk_gb": 50.0, "vcpu": 3.0, "gpus": 2, "pci": 1}


def test_random_choice_among_the_best_subset(policy_conf, rng):
    selector = Selector(filters.enabled_filters(policy_conf), weighers.enabled_weighers(policy_conf), 2, rng)
    picks = collections.Counter()
    for _ in range(200):
        table = HostTable()
        hosts = [make_host(name, table=table, free_ram=free)
                 for name, free in (("a", 3000), ("b", 2900), ("c", 100))]
        picks[selector.select(hosts, make_spec(memory_mb=1))[0].host] += 1
    assert set(picks) == {"a", "b"}
    assert min(picks.values()) > 50


def test_subset_larger_than_fleet_is_clamped(policy_conf, rng, table):
    selector = Selector(filters.enabled_filters(policy_conf), [], 50, rng)
    [chosen] = selector.select([make_host("only", table=table)], make_spec())
    assert chosen.host == "only"


def test_no_valid_host_says_what_each_filter_removed(selector, policy_conf, table):
    silent_since = time.monotonic() - policy_conf.scheduler.service_down_time - 5
    down = make_host("down", table=table, now=silent_since)
    small = [make_host(f"small{i}", ram=1024, table=table) for i in range(2)]
    with pytest.raises(NoValidHost) as info:
        selector.select([down] + small, make_spec(memory_mb=4096))
    message = str(info.value)
    assert "3 hosts considered" in message
    assert "ComputeFilter removed 1" in message
    assert "RamFilter removed 2" in message


def test_a_request_that_does_not_fit_whole_consumes_nothing(selector, table):
    hosts = [make_host("a", table=table, ram=4096), make_host("b", table=table, ram=4096)]
    with pytest.raises(NoValidHost, match="instance 3 of 3"):
        selector.select(hosts, make_spec(memory_mb=4096, count=3))  # each host's limit is 6144
    assert [h.free_ram_mb for h in hosts] == [4096, 4096]
    assert [h.num_instances for h in hosts] == [0, 0]


def test_forced_host_skips_the_filters(selector, table):
    hosts = [make_host("big", table=table, ram=65536),
             make_host("full", table=table, ram=1024, free_ram=0)]
    [chosen] = selector.select(hosts, make_spec(memory_mb=4096, force_hosts=["full"]))
    assert chosen.host == "full"
    assert chosen.limits == {}


def test_forced_unknown_host_is_no_valid_host(selector, table):
    with pytest.raises(NoValidHost, match="forced host nowhere"):
        selector.select([make_host("a", table=table)], make_spec(force_hosts=["nowhere"]))


def test_ignored_hosts_are_never_chosen(selector, table):
    hosts = [make_host("a", table=table, free_ram=8000), make_host("b", table=table, free_ram=10)]
    [chosen] = selector.select(hosts, make_spec(memory_mb=1, ignore_hosts=["a"]))
    assert chosen.host == "b"
    hosts.append(make_host("c", table=table, free_ram=5))
    [chosen] = selector.select(hosts, make_spec(memory_mb=1, ignore_hosts=["a", "b", "gone"]))
    assert chosen.host == "c"


def test_no_hosts_at_all(selector, table):
    with pytest.raises(NoValidHost, match="no compute host has reported"):
        selector.select([], make_spec())


class _Tiered(weighers.BaseHostWeigher):
    """A weigher that sorts hosts into tiers by name, for the selection stage."""

    name = "Tiered"
    minval = maxval = None
    weigh_vector = None
    tier_vector = None

    def __init__(self, tiers):
        self._tiers = tiers

    def weigh(self, host, spec):
        return 0

    def weight_multiplier(self, host):
        return 1.0

    def tier(self, host, spec):
        return self._tiers[host.host]


@pytest.mark.parametrize("vectorized", [True, False])
def test_the_best_tier_wins_whatever_the_weights(policy_conf, rng, table, vectorized):
    hosts = [make_host("roomy", table=table, free_ram=8000), make_host("tight", table=table, free_ram=100)]
    selector = Selector(filters.enabled_filters(policy_conf),
                        weighers.enabled_weighers(policy_conf) + [_Tiered({"roomy": 1, "tight": 0})],
                        1, rng, vectorized=vectorized)
    assert selector.select(hosts, make_spec(memory_mb=1))[0].host == "tight"
    # A host of a worse tier is used when nothing better passes the filters.
    assert selector.select(hosts, make_spec(memory_mb=5000))[0].host == "roomy"


def test_tiers_of_several_plugins_compose_in_order(policy_conf, rng, table):
    hosts = [make_host(n, table=table) for n in ("a", "b", "c")]
    first = _Tiered({"a": 1, "b": 0, "c": 0})
    second = _Tiered({"a": 0, "b": 2, "c": 1})
    selector = Selector([], [first, second], 1, rng)
    assert selector.select(hosts, make_spec(memory_mb=1))[0].host == "c"



def test_a_later_instance_says_it_chose_among_the_hosts_that_passed_for_the_one_before(selector, table):
    hosts = [make_host("a", table=table, ram=4096), make_host("b", table=table, ram=1024)]
    with pytest.raises(NoValidHost) as info:
        selector.select(hosts, make_spec(memory_mb=2048, count=3))
    assert str(info.value) == ("No valid host was found for instance 3 of 3: of the 1 host that passed "
                               "the filters for instance 2, RamFilter removed 1; none left (none booted: "
                               "2 of 3 fit, and a request is placed whole or not at all)")
