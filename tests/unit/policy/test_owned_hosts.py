"""One of several live schedulers prefers the hosts it owns, and weighs the whole fleet when that
preference could cost a placement: moves, requests whose spread matters, small fleets, none of
its own passing."""

import pytest

from scheduler.fleet.report_owner import ReportOwners, owner
from scheduler.policy import filters, owned_hosts, weighers
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from tests.unit.policy.fakes import make_host, make_spec

LIVE = ("s1", "s2")


def owners_of(me, live=LIVE):
    owners = ReportOwners(me)
    owners.set_live(live)
    return owners


def selector_of(policy_conf, rng, me, extra_weighers=()):
    selector = Selector(filters.enabled_filters(policy_conf),
                        weighers.enabled_weighers(policy_conf) + list(extra_weighers), 1, rng)
    selector.owners = None if me is None else owners_of(me)
    return selector


def descending(table, count, ram=65536, top=60000, step=100):
    """``count`` hosts h0, h1, ... each with ``step`` MB less free than the one before."""
    return [make_host(f"h{i}", table=table, ram=ram, free_ram=top - step * i) for i in range(count)]


def first_choice(selector, hosts, **kwargs):
    return selector.select(hosts, make_spec(memory_mb=1024), **kwargs)[0].host


def test_the_heaviest_is_the_others_in_these_fleets():
    # What the tests below rest on: h0, the heaviest, is s1's, so s2 shows what it prefers.
    assert owner("h0", LIVE) == "s1"


def test_each_of_two_live_schedulers_takes_the_heaviest_of_its_own_hosts(policy_conf, rng):
    chosen = {}
    for me in LIVE:
        table = HostTable()
        hosts = descending(table, 48)
        chosen[me] = first_choice(selector_of(policy_conf, rng, me), hosts)
        own = [h.host for h in hosts if owner(h.host, LIVE) == me]
        assert chosen[me] == own[0]
    assert chosen["s1"] == "h0" and chosen["s2"] != "h0"  # two different hosts: no claim conflict


def test_a_fleet_too_small_for_its_shares_is_weighed_whole(policy_conf, rng):
    # Two live schedulers: the preference needs 32 passing hosts.
    assert owned_hosts.smallest_fleet(len(LIVE), 1) == 32
    picks = {}
    for me in (None, "s2"):
        table = HostTable()
        hosts = descending(table, 31)
        selector = selector_of(policy_conf, rng, me)
        picks[me] = [first_choice(selector, hosts) for _ in range(10)]
    assert picks["s2"] == picks[None] and picks[None][0] == "h0"


def test_from_32_passing_hosts_on_it_prefers_its_own(policy_conf, rng):
    table = HostTable()
    hosts = descending(table, 32)
    assert owner(first_choice(selector_of(policy_conf, rng, "s2"), hosts), LIVE) == "s2"


def test_the_others_hosts_are_taken_when_none_of_its_own_passes(policy_conf, rng):
    table = HostTable()
    hosts = [make_host(f"h{i}", table=table, ram=8192,
                       free_ram=0 if owner(f"h{i}", LIVE) == "s2" else 8000 - 10 * i) for i in range(96)]
    assert sum(owner(h.host, LIVE) == "s1" for h in hosts) >= 32  # enough pass for the preference
    [chosen] = selector_of(policy_conf, rng, "s2").select(hosts, make_spec(memory_mb=6000))
    assert chosen.host == "h0"


def test_a_move_weighs_the_whole_fleet(policy_conf, rng):
    table = HostTable()
    hosts = descending(table, 48)
    selector = selector_of(policy_conf, rng, "s2")
    assert first_choice(selector, hosts, whole_fleet=True) == "h0"
    assert first_choice(selector, hosts) != "h0"


@pytest.mark.parametrize("policy", ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
def test_a_server_group_member_of_any_policy_weighs_the_whole_fleet(policy_conf, rng, policy):
    table = HostTable()
    hosts = descending(table, 48)
    spec = make_spec(memory_mb=1024)
    spec.group = {"uuid": "g", "policy": policy, "rules": {}, "members": [], "placed": [], "hosts": {}}
    [chosen] = selector_of(policy_conf, rng, "s2").select(hosts, spec)
    assert chosen.host == "h0"


def test_a_different_host_hint_weighs_the_whole_fleet(policy_conf, rng):
    table = HostTable()
    hosts = descending(table, 48)
    spec = make_spec(memory_mb=1024)
    spec.different_host_hosts = ["h47"]
    [chosen] = selector_of(policy_conf, rng, "s2").select(hosts, spec)
    assert chosen.host == "h0"


def test_a_server_group_goes_where_its_group_prefers_whoever_owns_it(policy_conf, rng):
    table = HostTable()
    hosts = descending(table, 48)
    theirs = [h.host for h in hosts if owner(h.host, LIVE) == "s1"]
    spec = make_spec(memory_mb=1024)
    spec.group = {"uuid": "g", "policy": "soft-affinity", "rules": {}, "members": [], "placed": [],
                  "hosts": {theirs[-1]: 1}}
    [chosen] = selector_of(policy_conf, rng, "s2").select(hosts, spec)
    assert chosen.host == theirs[-1]


class _Near(weighers.BaseHostWeigher):
    """Weighs the host a ``near`` hint names far above the others."""

    name = "Near"
    reads_hints = ("near",)
    minval = maxval = None
    weigh_vector = None
    tier_vector = None

    def __init__(self):
        pass

    def weigh(self, host, spec):
        return 1.0 if host.host == spec.scheduler_hints.get("near") else 0.0

    def weight_multiplier(self, host):
        return 10.0


def test_a_hint_a_weigher_reads_weighs_the_whole_fleet(policy_conf, rng):
    table = HostTable()
    hosts = descending(table, 48)
    theirs = [h.host for h in hosts if owner(h.host, LIVE) == "s1"]
    selector = selector_of(policy_conf, rng, "s2", [_Near()])
    [chosen] = selector.select(hosts, make_spec(memory_mb=1024, scheduler_hints={"near": theirs[-1]}))
    assert chosen.host == theirs[-1]
    assert owner(first_choice(selector, hosts), LIVE) == "s2"  # without the hint, its own
