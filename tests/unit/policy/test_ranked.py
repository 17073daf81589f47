"""A request one column ranks is placed where filtering and weighing the whole fleet places it.

Without a detailed Decision asked for, the Selector looks only at the hosts with the most of
the column (scheduler.policy.ranked); asking for what each filter left filters and weighs
every host. Two Selectors of one seed, one of them asking, place the same requests on copies
of one fleet on the same hosts, one after the other.
"""

import copy
import dataclasses
import random

import numpy as np
import pytest

from scheduler.exception import NoValidHost
from scheduler.policy import filters, ranked, weighers
from scheduler.policy.selection import Selector
from scheduler.simulation.host_tables import random_fleet, random_spec

DEFAULT_WEIGHERS = ["RAMWeigher", "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher"]


@pytest.fixture
def ranked_picks(monkeypatch):
    """Counts the picks the ranked path made (None: it could not tell)."""
    made = []
    pick = ranked.Thresholds.pick

    def counted(self, *args):
        row = pick(self, *args)
        made.append(row is not None)
        return row

    monkeypatch.setattr(ranked.Thresholds, "pick", counted)
    return made


@pytest.fixture
def small_fleets_ranked(monkeypatch):
    """The ranked path for fleets under MIN_HOSTS as well."""
    monkeypatch.setattr(ranked, "MIN_HOSTS", 0)


def selectors(policy_conf, weigher_names=None, subset=1, seed=0):
    if weigher_names is not None:
        policy_conf.set_override("weighers", weigher_names, "filter_scheduler")
    return [Selector(filters.enabled_filters(policy_conf), weighers.enabled_weighers(policy_conf), subset,
                     random.Random(seed)) for _ in range(2)]


def place_both(quick, whole, table, specs, decisions=None):
    """The host each of ``specs`` goes to, placed by ``quick`` and by ``whole`` (asked for its
    detailed Decisions) on copies of ``table``: (quick's, whole's), NoValidHost's reason where none.
    ``decisions``: a list quick's Decisions are appended to."""
    tables = [table, copy.deepcopy(table)]
    tables[1]._bind_columns()
    found = ([], [])
    for spec in specs:
        for i, (selector, on) in enumerate(zip((quick, whole), tables, strict=True)):
            try:
                kept = decisions if i == 0 and decisions is not None else []
                host = selector.select(on, spec, decisions=kept, detail=i == 1)[0].host
            except NoValidHost as exc:
                host = str(exc)
            found[i].append(host)
    return found


def fleet(n=2000, seed=0):
    table = random_fleet(n, seed=seed)
    now = table.clock()
    table.updated[:] = np.where(np.isfinite(table.updated), now, table.updated)
    return table


@pytest.mark.parametrize("subset", [1, 4])
def test_the_default_policies_place_as_the_whole_fleet_does(policy_conf, ranked_picks, subset):
    quick, whole = selectors(policy_conf, subset=subset)
    specs = [random_spec(i) for i in range(400)]
    mine, reference = place_both(quick, whole, fleet(), specs)
    assert mine == reference
    assert sum(ranked_picks) > 300


def test_equal_values_across_the_threshold_place_as_the_whole_fleet_does(policy_conf, ranked_picks):
    table = fleet()
    table.free_ram_mb[:] = np.round(table.free_ram_mb / 65536) * 65536  # a few values, many hosts each
    quick, whole = selectors(policy_conf, subset=3)
    mine, reference = place_both(quick, whole, table, [random_spec(i) for i in range(300)])
    assert mine == reference
    assert any(ranked_picks)


def test_ignored_and_disabled_hosts_are_left_out_as_by_the_whole_fleet(policy_conf, ranked_picks):
    # Without ComputeFilter, which refuses disabled hosts too: only the candidates leave them out.
    names = policy_conf.filter_scheduler.enabled_filters
    policy_conf.set_override("enabled_filters", [n for n in names if n != "ComputeFilter"],
                             "filter_scheduler")
    table = fleet()
    first = np.argsort(-table.free_ram_mb, kind="stable")
    table.disabled[first[:20:2]] = True
    ignored = [table.names[int(r)] for r in first[1:20:2]]
    specs = [random_spec(i, ignore_hosts=ignored) for i in range(200)]
    quick, whole = selectors(policy_conf)
    mine, reference = place_both(quick, whole, table, specs)
    assert mine == reference
    assert not set(mine) & {table.names[int(r)] for r in first[:20]}
    assert sum(ranked_picks) > 150


def test_hosts_all_overcommitted_weigh_alike_and_the_first_passing_is_chosen(policy_conf, ranked_picks):
    # RAMWeigher scales from 0: hosts with no free RAM left (overcommitted) all weigh 0.
    policy_conf.set_override("ram_allocation_ratio", 4.0, "filter_scheduler")
    table = fleet()
    table.free_ram_mb[:] = -np.abs(table.free_ram_mb) - 1
    quick, whole = selectors(policy_conf, subset=2)
    mine, reference = place_both(quick, whole, table, [random_spec(i) for i in range(100)])
    assert mine == reference
    assert len(ranked_picks) == 100


def test_a_fleet_filled_up_refuses_as_the_whole_fleet_does(policy_conf, ranked_picks, small_fleets_ranked):
    quick, whole = selectors(policy_conf)
    specs = [random_spec(i) for i in range(1500)]
    mine, reference = place_both(quick, whole, fleet(300), specs)
    assert mine == reference
    assert any(host.startswith("No valid host") for host in mine)
    assert sum(ranked_picks) > 300


def test_a_fleet_under_min_hosts_is_filtered_whole(policy_conf, ranked_picks):
    quick, _ = selectors(policy_conf)
    decisions = []
    quick.select(fleet(ranked.MIN_HOSTS - 1), random_spec(0), decisions=decisions)
    quick.select(fleet(ranked.MIN_HOSTS), random_spec(1), decisions=decisions)
    assert [(d.ranked_by, d.looked is None) for d in decisions] == [(None, True), ("free_ram_mb", False)]
    assert decisions[1].looked < decisions[1].considered
    assert ranked_picks == [True]


def test_disk_ranked_requests_place_as_the_whole_fleet_does(policy_conf, ranked_picks):
    quick, whole = selectors(policy_conf, ["DiskWeigher"], subset=2)
    mine, reference = place_both(quick, whole, fleet(), [random_spec(i) for i in range(300)])
    assert mine == reference
    assert sum(ranked_picks) > 250


@pytest.mark.parametrize("weigher_names, multiplier", [
    (["RAMWeigher", "DiskWeigher"], 1.0),  # two columns
    (["RAMWeigher", "CPUWeigher"], 1.0),  # a weigher without a column
    (["RAMWeigher"], -1.0),  # stacking: the lightest hosts first
])
def test_requests_no_column_ranks_alone_are_weighed_on_the_whole_fleet(policy_conf, ranked_picks,
                                                                       weigher_names, multiplier):
    policy_conf.set_override("ram_weight_multiplier", multiplier, "filter_scheduler")
    quick, whole = selectors(policy_conf, weigher_names)
    mine, reference = place_both(quick, whole, fleet(), [random_spec(i) for i in range(50)])
    assert mine == reference
    assert not ranked_picks


def test_a_server_group_request_is_weighed_on_the_whole_fleet(policy_conf, ranked_picks):
    quick, whole = selectors(policy_conf, DEFAULT_WEIGHERS)
    table = fleet()
    hosts = {table.names[int(r)]: 1 for r in np.argsort(-table.free_ram_mb)[:5]}
    group = {"uuid": "g1", "policy": "soft-anti-affinity", "rules": {}, "hosts": hosts}
    specs = [dataclasses.replace(random_spec(i), group=group) for i in range(20)]
    mine, reference = place_both(quick, whole, table, specs)
    assert mine == reference
    assert not ranked_picks


def test_a_ranked_decision_says_how_many_hosts_the_filters_ran_on_and_passed(policy_conf, caplog):
    from scheduler.planning.applier import log_decision

    quick, whole = selectors(policy_conf)
    table = fleet()
    decisions, detailed = [], []
    other = copy.deepcopy(table)
    other._bind_columns()
    [host] = quick.select(table, random_spec(0), decisions=decisions)
    assert whole.select(other, random_spec(0), decisions=detailed, detail=True)[0].host == host.host
    [decision], [reference] = decisions, detailed
    assert (decision.considered, decision.ranked_by) == (reference.considered, "free_ram_mb")
    assert 0 < decision.passed <= decision.looked < decision.considered
    with caplog.at_level("INFO", logger="scheduler.planning.applier"):
        log_decision("u1", host.host, decision)
    assert caplog.messages == [
        f"Placed instance u1 on host {host.host} ({decision.considered} hosts considered; the filters "
        f"ran on the {decision.looked} hosts with the most free_ram_mb, {decision.passed} passed)"]


def test_a_fleet_of_equal_hosts_is_filtered_once_a_decision_on_its_heaviest(policy_conf, monkeypatch,
                                                                           small_fleets_ranked):
    # Equal hosts tie at the threshold: the lightest of the subset weighs what one at the threshold
    # would. The greatest value below it tells that no host below weighs as much.
    looks = []
    passing = Selector.passing

    def counted(self, table, rows, spec):
        looks.append(len(rows))
        return passing(self, table, rows, spec)

    monkeypatch.setattr(Selector, "passing", counted)
    table = fleet(1000)
    for column in ("total_ram_mb", "free_ram_mb", "total_disk_gb", "free_disk_gb", "vcpus_total"):
        getattr(table, column)[:] = getattr(table, column).max()
    table.vcpus_used[:] = 0
    quick, whole = selectors(policy_conf)
    decisions = []
    mine, reference = place_both(quick, whole, table, [random_spec(i) for i in range(300)], decisions)
    assert mine == reference
    assert len(looks) == 300  # one batch each, never the whole fleet after it
    assert sum(decision.looked < decision.considered for decision in decisions) > 250
