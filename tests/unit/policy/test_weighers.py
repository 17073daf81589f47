import pytest

from scheduler.policy import weighers
from scheduler.policy.weighers.ram import RAMWeigher
from tests.unit.policy.fakes import make_host, make_spec


def test_normalize_scales_to_unit_range():
    assert list(weighers.normalize([10, 20, 30])) == [0.0, 0.5, 1.0]
    assert list(weighers.normalize([-100, 100])) == [0.0, 1.0]


def test_equal_weights_normalize_to_zero():
    assert list(weighers.normalize([7, 7, 7])) == [0.0, 0.0, 0.0]
    assert list(weighers.normalize([])) == []


def test_normalize_honours_fixed_bounds():
    assert list(weighers.normalize([5], minval=0, maxval=10)) == [0.5]


def test_ram_weigher_prefers_free_ram(policy_conf):
    hosts = [make_host("a", free_ram=100), make_host("b", free_ram=-50), make_host("c", free_ram=900)]
    assert [RAMWeigher(policy_conf).weigh(h, make_spec()) for h in hosts] == [100, -50, 900]


@pytest.mark.parametrize(("multiplier", "expected"), [(1.0, 1.0), (-2.0, -2.0)])
def test_ram_weigher_multiplier_is_read_from_config(policy_conf, multiplier, expected):
    policy_conf.set_override("ram_weight_multiplier", multiplier, "filter_scheduler")
    assert RAMWeigher(policy_conf).weight_multiplier(make_host("a")) == expected


def test_unknown_weigher_names_the_option(policy_conf):
    policy_conf.set_override("weighers", ["RAMWeigher", "NoSuchWeigher"], "filter_scheduler")
    with pytest.raises(ValueError, match=r"\[filter_scheduler\] weighers: unknown weigher 'NoSuchWeigher'"):
        weighers.enabled_weighers(policy_conf)
