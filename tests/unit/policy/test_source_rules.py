"""Five rules on which the Cloud Director and CloudStack plugins follow their sources.

VMware Cloud Director's placement engine (CapacityWeigher,
DiskThresholdFilter) and CloudStack's balancedweighted proposal
(BalancedWeigher, its moving average of measured load). Every case is worked
by hand; the arithmetic is written next to it.
"""


import numpy as np
import pytest

from scheduler.policy.filters.resources import CoreFilter
from scheduler.policy.host_state import HostTable
from scheduler.policy.weighers import balanced, capacity
from scheduler.policy.weighers.balanced import BalancedWeigher
from scheduler.policy.weighers.capacity import CapacityWeigher
from scheduler.simulation.host_tables import random_fleet, random_spec
from tests.unit.policy.fakes import make_spec
from tests.unit.policy.test_placement_policies import (
    NOW,
    add_host,
    both_passes,
    both_tiers,
    both_weights,
    measured_host,
    score,
    selector,
    threshold_filter,
)


@pytest.fixture
def hosts():
    table = HostTable()
    table.clock = lambda: NOW
    return table


@pytest.fixture
def cd_conf(policy_conf):
    """Cloud Director's defaults (headroom 0.2 per resource), no overcommit."""
    for name in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio"):
        policy_conf.set_override(name, 1.0, "filter_scheduler")
    return policy_conf


@pytest.fixture
def cs_conf(policy_conf):
    """CloudStack's simulation: CPU overcommitted 10 times, memory 4 times."""
    policy_conf.set_override("cpu_allocation_ratio", 10.0, "filter_scheduler")
    policy_conf.set_override("ram_allocation_ratio", 4.0, "filter_scheduler")
    return policy_conf


def picks(pick, table, times=40, **flavor):
    """The hosts ``pick`` chooses for ``times`` one-instance requests, each given back after."""
    chosen = []
    for _ in range(times):
        spec = make_spec(**({"memory_mb": 1, "root_gb": 0} | flavor))
        host = pick.select(table, spec)[0]
        table.release(host.row, spec.instance_uuids[0])
        chosen.append(host.host)
    return chosen


# -- 11. Headroom is tested on what is available now ----------------------------------------


def test_headroom_is_tested_on_what_is_available_now(cd_conf, hosts):
    add_host(hosts, "quarter-free", vcpus=40, vcpus_used=30)  # RAM 10000 MB, disk 100 GB: all free
    add_host(hosts, "fifth-free", vcpus=40, vcpus_used=32)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=8)
    # Headroom is ok when total * 0.2 < available now:
    # quarter-free: CPU 40 * 0.2 = 8 < 40 - 30 = 10, yes (placing 8 would leave 2, 5%: the reading
    #   of what the placement leaves puts it in noHeadRoom); memory 2000 < 10000; disk 20 < 100.
    # fifth-free: CPU 8 < 40 - 32 = 8, no.
    assert both_tiers(CapacityWeigher(cd_conf), hosts, spec) == [capacity.ACCEPTABLE, capacity.NO_HEADROOM]


def test_headroom_after_the_placement_is_an_option(cd_conf, hosts):
    add_host(hosts, "quarter-free", vcpus=40, vcpus_used=30)
    cd_conf.set_override("capacity_headroom_after_placement", True, "filter_scheduler")
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=8)
    # CPU after the placement: 10 - 8 = 2, not above 40 * 0.2 = 8.
    assert both_tiers(CapacityWeigher(cd_conf), hosts, spec) == [capacity.NO_HEADROOM]


def test_a_host_with_headroom_now_wins_over_a_roomier_one_without(cd_conf, hosts):
    add_host(hosts, "quarter-free", vcpus=40, vcpus_used=30)
    add_host(hosts, "big-but-short", vcpus=1000, vcpus_used=810)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=8)
    # quarter-free: min(CPU 10 / 8, memory 10000 / 1000) = 1.25, headroom ok (8 < 10).
    # big-but-short: min(190 / 8 = 23.75, 10) = 10, but 1000 * 0.2 = 200 < 190 is false: noHeadRoom.
    assert both_weights(CapacityWeigher(cd_conf), hosts, spec) == [1.25, 10.0]
    pick = selector(cd_conf, ["CoreFilter"], ["CapacityWeigher"])
    assert pick.select(hosts, spec)[0].host == "quarter-free"


# -- 12. No capacity ranks last on that resource, and CoreFilter refuses it -------------------


def test_a_host_with_no_cpus_ranks_last_on_cpu_in_the_capacity_ranking(cd_conf, hosts):
    add_host(hosts, "no-cpus", vcpus=0)  # RAM 10000 MB free
    add_host(hosts, "no-cpus-some-used", vcpus=0, vcpus_used=2)
    add_host(hosts, "roomy", vcpus=10, free_ram=9000)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    # no-cpus: CPU unreserved 0 * 1 - 0 = 0, 0 / 1 = 0 (left out, it would weigh 10000 / 1000 = 10).
    # no-cpus-some-used: (0 - 2) / 1 = -2. roomy: min(10 / 1, 9000 / 1000) = 9.
    assert both_weights(CapacityWeigher(cd_conf), hosts, spec) == [0.0, -2.0, 9.0]
    # Headroom: 0 * 0.2 < 0 is false for both hosts without CPUs.
    assert both_tiers(CapacityWeigher(cd_conf), hosts, spec) == [
        capacity.NO_HEADROOM,
        capacity.NO_HEADROOM,
        capacity.ACCEPTABLE,
    ]
    pick = selector(cd_conf, ["RamFilter"], ["CapacityWeigher"])
    assert pick.select(hosts, spec)[0].host == "roomy"


def test_a_host_with_no_memory_ranks_last_on_memory_in_the_capacity_ranking(cd_conf, hosts):
    add_host(hosts, "no-memory", ram=0, free_ram=0)
    add_host(hosts, "some-memory", ram=2000, free_ram=1500)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    # no-memory: min(CPU 10 / 1, memory 0 / 1000) = 0; some-memory: min(10, 1500 / 1000) = 1.5.
    assert both_weights(CapacityWeigher(cd_conf), hosts, spec) == [0.0, 1.5]


def test_a_host_with_no_cpus_counts_as_fully_allocated_in_the_balanced_score(cs_conf, hosts):
    measured_host(hosts, "no-cpus", 0.1, 0.1, vcpus=0)
    measured_host(hosts, "ten-used", 0.1, 0.1, vcpus=10, vcpus_used=10)
    # no-cpus: cpu_alloc 1 (no CPUs: full); mem_alloc 0; cpu_util, mem_util 0.1; no VMs, no starts:
    #   mean = (1 * 1 + 2 * 0.1 + 1 * 0 + 2 * 0.1 + 1 * 0 + 2 * 0) / 9 = 1.4 / 9, dominant 1.
    #   (At 0 it would score (0.4 / 9 + 0.1) / 2, the best of the two.)
    # ten-used: cpu_alloc 10 / (10 * 10) = 0.1: mean = (0.1 + 0.2 + 0.2) / 9 = 0.5 / 9, dominant 0.1.
    assert score(BalancedWeigher(cs_conf), hosts) == [
        pytest.approx((1.4 / 9 + 1) / 2),
        pytest.approx((0.5 / 9 + 0.1) / 2),
    ]
    cs_conf.set_override("balanced_selection_spread", 1, "filter_scheduler")
    assert selector(cs_conf, [], ["BalancedWeigher"]).select(hosts, make_spec())[0].host == "ten-used"


def test_a_host_with_no_memory_counts_as_fully_allocated_in_the_balanced_score(cs_conf, hosts):
    add_host(hosts, "no-memory", ram=0, free_ram=0)  # no memory: no usable load sample either
    add_host(hosts, "quarter", ram=10_000, free_ram=0)
    # Unmeasured: the mean weighs cpu_alloc 1, mem_alloc 1, vm_count 1, recent 2 (sum 5); CPUs idle.
    # no-memory: mem_alloc 1: mean 1 / 5 = 0.2, dominant 1: (0.2 + 1) / 2 = 0.6 (at 0 it scored 0).
    # quarter: mem_alloc 10000 / (10000 * 4) = 0.25: mean 0.05, dominant 0.25: (0.05 + 0.25) / 2.
    assert score(BalancedWeigher(cs_conf), hosts) == [pytest.approx(0.6), pytest.approx(0.15)]


def test_core_filter_refuses_a_host_that_reports_no_cpus(policy_conf, hosts):
    add_host(hosts, "no-cpus", vcpus=0)
    add_host(hosts, "eight", vcpus=8)
    # Nova's CoreFilter passed the first ("fail safe"); Berth refuses it: it has no CPUs to give.
    assert both_passes(CoreFilter(policy_conf), hosts, make_spec(vcpus=1)) == [False, True]


# -- 13. The random pick is among the first N healthy hosts only ------------------------------


def loaded_hosts(table, small=(), loads=(0.1, 0.2, 0.3, 0.4, 0.5)):
    """h0 .. h4, measured, scoring in that order; those in ``small`` have 2000 MB, the rest 10000."""
    for i, load in enumerate(loads):
        name = f"h{i}"
        measured_host(table, name, load, load, ram=2000 if name in small else 10_000)


def test_with_no_host_measured_the_best_is_taken(cs_conf, hosts):
    for i in range(5):
        add_host(hosts, f"u{i}", vcpus=10, vcpus_used=10 * i)
    # Unmeasured (tier 1): cpu_alloc 10 * i / 100, every other term 0: u0 scores 0, the best.
    # CloudStack shuffles healthy hosts only: the unmeasured follow in score order.
    assert set(both_tiers(BalancedWeigher(cs_conf), hosts, make_spec())) == {balanced.UNMEASURED}
    pick = selector(cs_conf, [], ["BalancedWeigher"])
    assert set(picks(pick, hosts)) == {"u0"}


def test_with_every_host_held_back_the_best_is_taken(cs_conf, hosts):
    for i in range(5):
        measured_host(hosts, f"b{i}", 0.9 + 0.01 * i, 0.1)  # cpu_util above 0.85: held back
    pick = selector(cs_conf, [], ["BalancedWeigher"])
    assert set(picks(pick, hosts)) == {"b0"}


def test_when_the_two_best_healthy_hosts_do_not_fit_the_third_is_taken(cs_conf, hosts):
    loaded_hosts(hosts, small={"h0", "h1"})
    # Shuffled: h0, h1, h2 (spread 3); then h3, h4. 5000 MB fits none of h0, h1 (2000 * 1.5 = 3000),
    # so the first that fits, whatever the shuffle, is h2.
    cs_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    pick = selector(cs_conf, ["RamFilter"], ["BalancedWeigher"])
    assert set(picks(pick, hosts, memory_mb=5000)) == {"h2"}


def test_the_pick_is_random_among_those_of_the_first_hosts_that_fit(cs_conf, hosts):
    loaded_hosts(hosts, small={"h0"})
    # Shuffled: h0, h1, h2; h0 does not fit: the first that fits is h1 or h2, each half the time.
    cs_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    pick = selector(cs_conf, ["RamFilter"], ["BalancedWeigher"])
    chosen = picks(pick, hosts, times=60, memory_mb=5000)
    assert set(chosen) == {"h1", "h2"}


def test_hosts_the_request_may_not_use_take_no_place_among_the_first(cs_conf, hosts):
    loaded_hosts(hosts, small={"h1"})
    hosts.disabled[0] = True  # ComputeFilter, run once per request: h0 is not a host for it at all
    hosts.updated[:] = hosts.clock()  # reported just now, by the table's clock
    cs_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    pick = selector(cs_conf, ["ComputeFilter", "RamFilter"], ["BalancedWeigher"])
    # Shuffled: h1, h2, h3 (the hosts the request may use, as CloudStack ranks the up and enabled
    # hosts); h1 does not fit 5000 MB (RamFilter, run for each instance): h2 or h3.
    assert set(picks(pick, hosts, times=60, memory_mb=5000)) == {"h2", "h3"}


def test_spread_rows_are_the_first_healthy_hosts_in_score_order(cs_conf, hosts):
    measured_host(hosts, "busy", 0.95, 0.1)  # held back
    add_host(hosts, "unmeasured")  # scores 0: better than any measured host here
    loaded_hosts(hosts, loads=(0.4, 0.1, 0.3, 0.2))
    weigher = BalancedWeigher(cs_conf)
    rows = np.arange(len(hosts))
    # Healthy: h0 .. h3 (rows 2 .. 5), by load: h1 (row 3), h3 (row 5), h2 (row 4), h0 (row 2).
    assert list(weigher.spread_rows(hosts, rows, make_spec(), 3)) == [3, 5, 4]
    assert list(weigher.spread_rows(hosts, rows[:2], make_spec(), 3)) == []


@pytest.mark.parametrize("fleet_number", range(3))
def test_spread_rows_agree_with_the_per_host_forms(cs_conf, fleet_number):
    table = random_fleet(300, fleet_number, rich=True)  # measured, stale and unmeasured hosts
    spec = random_spec(fleet_number)
    weigher = BalancedWeigher(cs_conf)
    rows = np.arange(len(table))[::2]
    healthy = [(-weigher.weigh(view, spec), view.row) for view in table.views(rows)
               if weigher.tier(view, spec) == balanced.HEALTHY]
    expected = [row for _, row in sorted(healthy)[:5]]  # heaviest first, ties to the earlier row
    assert len(healthy) > 5
    assert list(weigher.spread_rows(table, rows, spec, 5)) == expected


# -- 14. A sample after a silence is folded in ----------------------------------------------


def load_report(cpu, in_use, stamp):
    return {
        "host": "h", "memory_mb": 1000, "free_ram_mb": 1000, "local_gb": 100, "free_disk_gb": 100,
        "vcpus": 10, "vcpus_used": 0, "instance_uuids": [],
        "cpu_utilization": cpu, "memory_mb_in_use": in_use, "utilization_sampled_at": stamp,
    }


def test_a_sample_after_a_silence_is_folded_in(cs_conf):
    table = HostTable()
    table.add("h")
    table.update_from_report(0, load_report(0.9, 500, "t0"), now=0.0)
    weigher = BalancedWeigher(cs_conf)  # load_stale_after 600 s
    table.clock = lambda: 900.0
    assert both_tiers(weigher, table, make_spec()) == [balanced.UNMEASURED]  # silent 900 s
    table.update_from_report(0, load_report(0.1, 100, "t1"), now=900.0)
    # alpha = 1 - exp(-900 * ln 2 / 300) = 1 - 2 ** -3 = 0.875 (half-life 300 s):
    # cpu 0.9 + 0.875 * (0.1 - 0.9) = 0.2; memory 0.5 + 0.875 * (0.1 - 0.5) = 0.15 (not 0.1 and 0.1).
    assert table.cpu_util[0] == pytest.approx(0.2)
    assert table.mem_util[0] == pytest.approx(0.15)
    assert both_tiers(weigher, table, make_spec()) == [balanced.HEALTHY]


# -- 15. Kept: yellow ranks last for every placement, 0 turns a threshold off ------------------
# These pin Berth's reading, which the change keeps (they passed before it too).


@pytest.mark.parametrize("root_gb", [0, 1, 40])
def test_a_yellow_host_ranks_last_for_every_placement(policy_conf, hosts, root_gb):
    # Cloud Director applies yellow to its background template copies, and says yellow clusters get
    # lower preference; Berth ranks yellow hosts behind the others for every instance.
    add_host(hosts, "yellow", disk=1000, free_disk=100, free_ram=10_000)  # 10%: not above 20%
    add_host(hosts, "green", disk=1000, free_disk=900, free_ram=1000)
    host_filter = threshold_filter(policy_conf, yellow="20%")
    assert both_tiers(host_filter, hosts, make_spec(root_gb=root_gb)) == [1, 0]
    pick = selector(policy_conf, ["DiskThresholdFilter"], ["RAMWeigher"])
    assert pick.select(hosts, make_spec(memory_mb=100, root_gb=root_gb))[0].host == "green"


def test_a_threshold_of_zero_is_off(policy_conf, hosts):
    # Read as Cloud Director's "free space above the threshold", 0 would still drop a host with
    # 0 GB free (0 > 0 is false); in Berth 0 means no threshold.
    add_host(hosts, "full", free_disk=0)
    add_host(hosts, "over", free_disk=-20)
    host_filter = threshold_filter(policy_conf, red="0", yellow="0")
    assert both_passes(host_filter, hosts, make_spec(root_gb=0)) == [True, True]
    assert both_tiers(host_filter, hosts, make_spec(root_gb=0)) == [0, 0]
