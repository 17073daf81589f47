"""Cloud Director's capacity ranking and disk thresholds, CloudStack's balanced weighting."""

import random

import numpy as np
import pytest

from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.filters.disk_threshold import DiskThresholdFilter, parse_threshold
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from scheduler.policy.weighers import balanced, capacity
from scheduler.policy.weighers.balanced import BalancedWeigher
from scheduler.policy.weighers.capacity import CapacityWeigher
from tests.unit.policy.fakes import make_spec

NOW = 10_000.0


def add_host(
    table,
    name,
    ram=10_000,
    free_ram=None,
    disk=100,
    free_disk=None,
    vcpus=10,
    vcpus_used=0,
    instances=0,
    at=NOW,
    **extra,
):
    row = table.add(name)
    resources = {
        "host": name,
        "memory_mb": ram,
        "free_ram_mb": ram if free_ram is None else free_ram,
        "local_gb": disk,
        "free_disk_gb": disk if free_disk is None else free_disk,
        "vcpus": vcpus,
        "vcpus_used": vcpus_used,
        "running_vms": instances,
        "instance_uuids": [],
    }
    resources.update(extra)
    table.update_from_report(row, resources, at)
    return table.view(row)


@pytest.fixture
def fleet():
    table = HostTable()
    table.clock = lambda: NOW
    return table


def selector(policy_conf, filter_names, weigher_names, subset=1, seed=0):
    policy_conf.set_override("enabled_filters", filter_names, "filter_scheduler")
    policy_conf.set_override("weighers", weigher_names, "filter_scheduler")
    return Selector(
        filters.enabled_filters(policy_conf),
        weighers.enabled_weighers(policy_conf),
        subset,
        random.Random(seed),
    )


def both_weights(weigher, table, spec):
    """The per-host and vector weights (asserting they agree)."""
    rows = np.arange(len(table))
    vector = weigher.weigh_vector(table, rows, spec)
    per_host = [weigher.weigh(view, spec) for view in table.views()]
    if vector is None:  # weighs nothing for this request: every host the same
        assert len(set(per_host)) <= 1
        return per_host
    assert np.array_equal(vector, per_host)
    return list(vector)


def both_tiers(plugin, table, spec):
    rows = np.arange(len(table))
    vector = plugin.tier_vector(table, rows, spec)
    per_host = [plugin.tier(view, spec) for view in table.views()]
    assert list(vector) == per_host
    return per_host


# -- CapacityWeigher (Cloud Director) ------------------------------------------------


@pytest.fixture
def capacity_conf(policy_conf):
    for name, value in (
        ("cpu_allocation_ratio", 1.0),
        ("ram_allocation_ratio", 1.0),
        ("disk_allocation_ratio", 1.0),
    ):
        policy_conf.set_override(name, value, "filter_scheduler")
    return policy_conf


def test_capacity_scores_follow_the_seed(capacity_conf, fleet):
    # CPU: unreserved 100 - 20 = 80; current (80 - 10 * 0.67) / 2; future (80 - 40 * 0.5) / 2.
    # Memory: unreserved 10000 - 1000 = 9000 over 1000 MB; disk 100 GB free over 10 GB.
    add_host(
        fleet,
        "a",
        vcpus=100,
        cpu_reserved=20,
        cpu_burst=10,
        cpu_undeployed_reservation=40,
        ram=10_000,
        memory_reserved_mb=1000,
        memory_burst_mb=0,
        memory_undeployed_reservation_mb=0,
    )
    spec = make_spec(memory_mb=1000, root_gb=10, vcpus=2)
    cpu = 0.5 * (80 - 10 * 0.67) / 2 + 0.5 * (80 - 40 * 0.5) / 2
    assert both_weights(CapacityWeigher(capacity_conf), fleet, spec) == [pytest.approx(min(cpu, 9, 10))]


def test_missing_burst_and_undeployed_figures_fall_back_to_the_reservation_score(capacity_conf, fleet):
    add_host(fleet, "a", vcpus=100, vcpus_used=20)  # no reserved figure: what is allocated
    add_host(fleet, "b", vcpus=100, cpu_reserved=20, cpu_burst=30)  # no undeployed figure
    spec = make_spec(memory_mb=1, root_gb=0, vcpus=4)
    weights = both_weights(CapacityWeigher(capacity_conf), fleet, spec)
    assert weights[0] == pytest.approx(80 / 4)
    assert weights[1] == pytest.approx(0.5 * (80 - 30 * 0.67) / 4 + 0.5 * 80 / 4)


@pytest.mark.parametrize(("current", "expected"), [(1.0, (80 - 30 * 0.67) / 4), (0.0, (80 - 40 * 0.5) / 4)])
def test_current_score_weight_picks_between_current_and_future(capacity_conf, fleet, current, expected):
    capacity_conf.set_override("capacity_current_score_weight", current, "filter_scheduler")
    add_host(fleet, "a", vcpus=100, cpu_reserved=20, cpu_burst=30, cpu_undeployed_reservation=40)
    spec = make_spec(memory_mb=1, root_gb=0, vcpus=4)
    assert both_weights(CapacityWeigher(capacity_conf), fleet, spec) == [pytest.approx(expected)]


def test_the_most_constrained_resource_decides(capacity_conf, fleet):
    add_host(fleet, "cpu-bound", vcpus=10, vcpus_used=9, ram=100_000)
    add_host(fleet, "ram-bound", vcpus=100, ram=10_000, free_ram=2000)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    assert both_weights(CapacityWeigher(capacity_conf), fleet, spec) == [1.0, 2.0]


def test_negative_unreserved_under_overcommit_ranks_last(capacity_conf, fleet):
    add_host(fleet, "over", free_ram=-5000)
    add_host(fleet, "full", free_ram=0)
    add_host(fleet, "roomy", free_ram=8000)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    weights = both_weights(CapacityWeigher(capacity_conf), fleet, spec)
    assert weights[0] < 0 and weights[0] < weights[1] < weights[2]
    chosen = selector(capacity_conf, [], ["CapacityWeigher"]).select(fleet, spec)
    assert chosen[0].host == "roomy"


def test_capacity_equal_weights_keep_the_first_host(capacity_conf, fleet):
    for name in ("a", "b", "c"):
        add_host(fleet, name)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    assert len(set(both_weights(CapacityWeigher(capacity_conf), fleet, spec))) == 1
    assert selector(capacity_conf, [], ["CapacityWeigher"]).select(fleet, spec)[0].host == "a"


def test_hosts_without_totals_have_no_room_on_what_the_flavor_asks_for(capacity_conf, fleet):
    add_host(fleet, "blank", ram=0, free_ram=0, disk=0, free_disk=0, vcpus=0)
    add_host(fleet, "diskless", disk=0, free_disk=0)
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    # blank: CPU (0 - 0) / 1 = 0, memory (0 - 0) / 1000 = 0; diskless: min(10 / 1, 10000 / 1000).
    assert both_weights(CapacityWeigher(capacity_conf), fleet, spec) == [0.0, 10.0]
    # No disk is asked for: the diskless host keeps its headroom; the blank one has none on CPU.
    assert both_tiers(CapacityWeigher(capacity_conf), fleet, spec) == [capacity.NO_HEADROOM,
                                                                       capacity.ACCEPTABLE]


def test_tiers_are_preferred_acceptable_no_headroom_avoid(capacity_conf, fleet):
    add_host(fleet, "pref")
    add_host(fleet, "ok")
    add_host(fleet, "tight", free_ram=1500)  # 1500 MB available of 10000: not above 20%
    add_host(fleet, "pref-tight", free_ram=1500)
    add_host(fleet, "avoid")
    add_host(fleet, "avoid-pref")
    spec = make_spec(
        memory_mb=1000,
        root_gb=0,
        vcpus=1,
        scheduler_hints={
            "preferred_hosts": ["pref", "pref-tight", "avoid-pref"],
            "avoid_hosts": "avoid,avoid-pref",
        },
    )
    tiers = both_tiers(CapacityWeigher(capacity_conf), fleet, spec)
    assert tiers == [
        capacity.PREFERRED,
        capacity.ACCEPTABLE,
        capacity.NO_HEADROOM,
        capacity.NO_HEADROOM,
        capacity.AVOID,
        capacity.AVOID,
    ]


@pytest.mark.parametrize(
    ("resource", "kwargs"),
    [
        # Available now, of 10 vCPUs, 10000 MB, 100 GB: 2, 2000, 20, each not above 20%.
        ("capacity_cpu_headroom", {"vcpus_used": 8}),
        ("capacity_memory_headroom", {"free_ram": 2000}),
        ("capacity_storage_headroom", {"free_disk": 20}),
    ],
)
def test_headroom_is_per_resource(capacity_conf, fleet, resource, kwargs):
    add_host(fleet, "a", **kwargs)
    spec = make_spec(memory_mb=1000, root_gb=10, vcpus=1)
    assert both_tiers(CapacityWeigher(capacity_conf), fleet, spec) == [capacity.NO_HEADROOM]
    capacity_conf.set_override(resource, 0.0, "filter_scheduler")
    assert both_tiers(CapacityWeigher(capacity_conf), fleet, spec) == [capacity.ACCEPTABLE]


@pytest.mark.parametrize(
    ("policy", "tier"),
    [
        ("soft-affinity", capacity.PREFERRED),
        ("affinity", capacity.PREFERRED),
        ("soft-anti-affinity", capacity.AVOID),
        ("anti-affinity", capacity.AVOID),
    ],
)
def test_server_groups_make_their_members_hosts_preferred_or_avoided(capacity_conf, fleet, policy, tier):
    add_host(fleet, "member")
    add_host(fleet, "other")
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    spec.group = {"uuid": "g", "policy": policy, "rules": {}, "hosts": {"member": 1}}
    assert both_tiers(CapacityWeigher(capacity_conf), fleet, spec) == [tier, capacity.ACCEPTABLE]


def test_groups_in_other_shapes_are_read_too(capacity_conf, fleet):
    add_host(fleet, "member")
    add_host(fleet, "other")
    spec = make_spec(memory_mb=1000, root_gb=0, vcpus=1)
    spec.group = {"policy": "soft_anti_affinity", "hosts": ["member"]}
    assert both_tiers(CapacityWeigher(capacity_conf), fleet, spec) == [capacity.AVOID, capacity.ACCEPTABLE]


def test_capacity_tiers_steer_the_choice(capacity_conf, fleet):
    add_host(fleet, "roomy-avoided", ram=100_000)
    add_host(fleet, "tight", free_ram=1500)
    add_host(fleet, "small-preferred", ram=5000)
    spec = make_spec(
        memory_mb=1000,
        root_gb=0,
        vcpus=1,
        scheduler_hints={"preferred_hosts": ["small-preferred"], "avoid_hosts": ["roomy-avoided"]},
    )
    pick = selector(capacity_conf, ["RamFilter"], ["CapacityWeigher"])
    assert pick.select(fleet, spec)[0].host == "small-preferred"
    fleet.disabled[2] = True  # a filter would remove it: next the host without headroom
    pick = selector(capacity_conf, ["RamFilter", "ComputeFilter"], ["CapacityWeigher"])
    fleet.updated[:] = fleet.clock()  # reported just now, by the table's clock
    assert pick.select(fleet, spec)[0].host == "tight"


# -- DiskThresholdFilter ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50GB", (50 * 2**30, False)),
        ("50 GiB", (50 * 2**30, False)),
        ("512MiB", (512 * 2**20, False)),
        ("1T", (2**40, False)),
        ("1073741824", (2**30, False)),
        ("2kb", (2048, False)),
        ("10%", (10.0, True)),
        ("12.5 %", (12.5, True)),
        ("0", (0, False)),
    ],
)
def test_thresholds_parse_bytes_and_percent(text, expected):
    assert parse_threshold(text) == expected


@pytest.mark.parametrize("text", ["", "ten", "-5GB", "10 parsecs", "150%", "5%%"])
def test_bad_thresholds_name_the_option(policy_conf, text):
    policy_conf.set_override("disk_red_threshold", text, "filter_scheduler")
    with pytest.raises(ValueError, match="disk_red_threshold"):
        DiskThresholdFilter(policy_conf)


def threshold_filter(policy_conf, red="0", yellow="0"):
    policy_conf.set_override("disk_red_threshold", red, "filter_scheduler")
    policy_conf.set_override("disk_yellow_threshold", yellow, "filter_scheduler")
    return DiskThresholdFilter(policy_conf)


def both_passes(host_filter, table, spec):
    rows = np.arange(len(table))
    vector = list(np.broadcast_to(host_filter.filter_vector(table, rows, spec), len(rows)))
    per_host = [host_filter.host_passes(view, spec) for view in table.views()]
    assert vector == per_host
    return per_host


def test_red_threshold_in_bytes_needs_free_space_strictly_above_it(policy_conf, fleet):
    # Cloud Director's example: 5 GB free, red threshold 4 GB: a 2 GB subject still goes there.
    add_host(fleet, "five", free_disk=5)
    add_host(fleet, "four", free_disk=4)
    add_host(fleet, "three", free_disk=3)
    spec = make_spec(root_gb=2)
    assert both_passes(threshold_filter(policy_conf, red="4GB"), fleet, spec) == [True, False, False]


def test_red_threshold_in_percent_of_the_hosts_disk(policy_conf, fleet):
    add_host(fleet, "big", disk=1000, free_disk=150)  # 15%
    add_host(fleet, "small", disk=100, free_disk=5)  # 5%
    add_host(fleet, "exactly", disk=100, free_disk=10)  # 10%: not above
    add_host(fleet, "no-disk", disk=0, free_disk=0)  # reports no disk: no percentage to miss
    spec = make_spec(root_gb=1)
    assert both_passes(threshold_filter(policy_conf, red="10%"), fleet, spec) == [True, False, False, True]


def test_negative_free_disk_under_overcommit_is_below_any_threshold(policy_conf, fleet):
    add_host(fleet, "over", free_disk=-20)
    add_host(fleet, "fine", free_disk=50)
    spec = make_spec(root_gb=1)
    assert both_passes(threshold_filter(policy_conf, red="1B"), fleet, spec) == [False, True]
    assert both_passes(threshold_filter(policy_conf, red="1%"), fleet, spec) == [False, True]


def test_zero_thresholds_disable_the_filter(policy_conf, fleet):
    add_host(fleet, "over", free_disk=-20)
    spec = make_spec(root_gb=1)
    host_filter = threshold_filter(policy_conf)
    assert both_passes(host_filter, fleet, spec) == [True]
    assert both_tiers(host_filter, fleet, spec) == [0]


def test_yellow_hosts_pass_but_rank_last(policy_conf, fleet):
    add_host(fleet, "yellow", disk=1000, free_disk=100, free_ram=10_000)  # 10%: not above 20%
    add_host(fleet, "green", disk=1000, free_disk=900, free_ram=1000)
    spec = make_spec(memory_mb=100, root_gb=1)
    host_filter = threshold_filter(policy_conf, red="50GB", yellow="20%")
    assert both_passes(host_filter, fleet, spec) == [True, True]
    assert both_tiers(host_filter, fleet, spec) == [1, 0]
    policy_conf.set_override("enabled_filters", ["DiskThresholdFilter"], "filter_scheduler")
    pick = selector(policy_conf, ["DiskThresholdFilter"], ["RAMWeigher"])
    assert pick.select(fleet, spec)[0].host == "green"  # though yellow has far more free RAM
    fleet.free_disk_gb[1] = 40  # green falls past red: yellow is all that is left
    assert pick.select(fleet, spec)[0].host == "yellow"
    fleet.free_disk_gb[0] = 10
    with pytest.raises(NoValidHost, match="DiskThresholdFilter removed 2"):
        pick.select(fleet, spec)


# -- BalancedWeigher (CloudStack) ------------------------------------------------------------


@pytest.fixture
def balanced_conf(policy_conf):
    policy_conf.set_override("cpu_allocation_ratio", 10.0, "filter_scheduler")
    policy_conf.set_override("ram_allocation_ratio", 4.0, "filter_scheduler")
    return policy_conf


def measured_host(table, name, cpu, mem, at=NOW, **kwargs):
    ram = kwargs.pop("ram", 10_000)
    return add_host(
        table,
        name,
        ram=ram,
        cpu_utilization=cpu,
        memory_mb_in_use=mem * ram,
        utilization_sampled_at=name,
        at=at,
        **kwargs,
    )


def score(weigher, table, spec=None):
    return [round(1.0 - w, 12) for w in both_weights(weigher, table, spec or make_spec())]


def test_balanced_score_follows_the_seed(balanced_conf, fleet):
    # cpu_alloc 50 / (10 * 10) = 0.5; mem_alloc 20000 / (10000 * 4) = 0.5; vm_count 10 / 50.
    measured_host(fleet, "a", 0.3, 0.6, vcpus=10, vcpus_used=50, free_ram=-10_000, instances=10)
    fleet.consume(0, "r1", make_spec().flavor, now=NOW - 100)  # a recent start (and allocation)
    fleet.release(0, "r1")
    fleet.consume(0, "r2", make_spec(memory_mb=1, root_gb=0, vcpus=1).flavor, now=NOW - 10)
    c_alloc, m_alloc = 51 / 100, (20_001) / 40_000
    mean = (1 * c_alloc + 2 * 0.3 + 1 * m_alloc + 2 * 0.6 + 1 * 11 / 50 + 2 * 1 / 50) / 9
    dominant = max(c_alloc, 0.3, m_alloc, 0.6)
    assert score(BalancedWeigher(balanced_conf), fleet) == [pytest.approx((mean + dominant) / 2)]


def test_allocation_is_measured_against_the_overcommitted_total(balanced_conf, fleet):
    add_host(fleet, "a", vcpus=10, vcpus_used=20)  # 20 of 100: 0.2, not clamped to 1
    balanced_conf.set_override("balanced_memory_allocated_weight", 0, "filter_scheduler")
    balanced_conf.set_override("balanced_vm_count_weight", 0, "filter_scheduler")
    balanced_conf.set_override("balanced_recent_starts_weight", 0, "filter_scheduler")
    assert score(BalancedWeigher(balanced_conf), fleet) == [pytest.approx((0.2 + 0.2) / 2)]


def test_a_busy_host_ranks_behind_a_quiet_one_at_equal_allocation(balanced_conf, fleet):
    measured_host(fleet, "busy", 0.7, 0.3)
    measured_host(fleet, "quiet", 0.1, 0.3)
    weights = both_weights(BalancedWeigher(balanced_conf), fleet, make_spec())
    assert weights[1] > weights[0]


def test_each_term_counts_in_its_direction(balanced_conf, fleet):
    measured_host(fleet, "base", 0.2, 0.2)
    measured_host(fleet, "more-mem-used", 0.2, 0.5)
    measured_host(fleet, "more-vms", 0.2, 0.2, instances=20)
    measured_host(fleet, "more-cpu-alloc", 0.2, 0.2, vcpus_used=40)
    base, *others = score(BalancedWeigher(balanced_conf), fleet)
    assert all(other > base for other in others)


def test_recent_starts_within_the_window_count(balanced_conf, fleet):
    measured_host(fleet, "a", 0.2, 0.2)
    measured_host(fleet, "b", 0.2, 0.2)
    balanced_conf.set_override("balanced_recent_window", 60.0, "filter_scheduler")
    flavor = make_spec(memory_mb=1, root_gb=0, vcpus=1).flavor
    fleet.consume(0, "long-ago", flavor, now=NOW - 120)
    fleet.consume(1, "long-ago-too", flavor, now=NOW - 120)
    a, b = score(BalancedWeigher(balanced_conf), fleet)
    assert a == b
    fleet.consume(0, "just-now", flavor, now=NOW - 5)
    a, b = score(BalancedWeigher(balanced_conf), fleet)
    assert a > b


def test_the_dominant_term_catches_one_exhausted_resource(balanced_conf, fleet):
    balanced_conf.set_override("balanced_dominant_weight", 0.0, "filter_scheduler")
    measured_host(fleet, "even", 0.45, 0.45)
    measured_host(fleet, "lopsided", 0.9, 0.0)  # the same mean
    even, lopsided = score(BalancedWeigher(balanced_conf), fleet)
    assert even == pytest.approx(lopsided)
    balanced_conf.set_override("balanced_dominant_weight", 1.0, "filter_scheduler")
    even, lopsided = score(BalancedWeigher(balanced_conf), fleet)
    assert lopsided > even


def test_unmeasured_hosts_drop_the_used_terms_and_rank_behind_measured_ones(balanced_conf, fleet):
    measured_host(fleet, "measured", 0.5, 0.5)
    add_host(fleet, "never-measured")
    measured_host(fleet, "stale", 0.0, 0.0, at=NOW - 601)
    weigher = BalancedWeigher(balanced_conf)
    # Unmeasured: only allocation, counts and starts, all 0 here; not assumed idle for the tiers.
    assert score(weigher, fleet) == [pytest.approx((2 / 9 + 0.5) / 2), 0.0, 0.0]
    assert both_tiers(weigher, fleet, make_spec()) == [
        balanced.HEALTHY,
        balanced.UNMEASURED,
        balanced.UNMEASURED,
    ]
    assert selector(balanced_conf, [], ["BalancedWeigher"]).select(fleet, make_spec())[0].host == "measured"


def test_stale_after_is_an_option(balanced_conf, fleet):
    measured_host(fleet, "a", 0.5, 0.5, at=NOW - 100)
    balanced_conf.set_override("load_stale_after", 50.0, "filter_scheduler")
    assert both_tiers(BalancedWeigher(balanced_conf), fleet, make_spec()) == [balanced.UNMEASURED]


@pytest.mark.parametrize(("cpu", "mem"), [(0.86, 0.1), (0.1, 0.91)])
def test_too_busy_hosts_are_held_back_unless_nothing_else_fits(balanced_conf, fleet, cpu, mem):
    measured_host(fleet, "too-busy", cpu, mem, ram=100_000)
    measured_host(fleet, "healthy", 0.5, 0.5, ram=2000)
    add_host(fleet, "unmeasured", ram=2000)
    weigher = BalancedWeigher(balanced_conf)
    assert both_tiers(weigher, fleet, make_spec()) == [
        balanced.HELD_BACK,
        balanced.HEALTHY,
        balanced.UNMEASURED,
    ]
    pick = selector(balanced_conf, ["RamFilter"], ["BalancedWeigher"], seed=3)
    for _ in range(10):
        assert pick.select(fleet, make_spec(memory_mb=1, root_gb=0))[0].host == "healthy"
    # Too large for the others: the held-back host is used rather than failing.
    assert pick.select(fleet, make_spec(memory_mb=50_000, root_gb=0))[0].host == "too-busy"


def test_thresholds_are_options(balanced_conf, fleet):
    measured_host(fleet, "a", 0.7, 0.1)
    balanced_conf.set_override("balanced_cpu_util_threshold", 0.6, "filter_scheduler")
    assert both_tiers(BalancedWeigher(balanced_conf), fleet, make_spec()) == [balanced.HELD_BACK]


def test_negative_weights_count_as_zero(balanced_conf, fleet):
    measured_host(fleet, "busy", 0.9, 0.8)
    measured_host(fleet, "idle", 0.0, 0.0)
    for name in balanced.WEIGHTS:
        balanced_conf.set_override(f"balanced_{name}_weight", -5.0, "filter_scheduler")
    balanced_conf.set_override("balanced_cpu_used_weight", 1.0, "filter_scheduler")
    busy, idle = score(BalancedWeigher(balanced_conf), fleet)
    assert busy == pytest.approx(0.9) and idle == 0.0


def test_all_zero_weights_score_every_host_alike(balanced_conf, fleet):
    measured_host(fleet, "busy", 0.8, 0.8)
    measured_host(fleet, "idle", 0.0, 0.0)
    for name in balanced.WEIGHTS:
        balanced_conf.set_override(f"balanced_{name}_weight", 0.0, "filter_scheduler")
    assert score(BalancedWeigher(balanced_conf), fleet) == [0.0, 0.0]


def test_equal_scores_normalize_to_zero_and_keep_the_first_host(balanced_conf, fleet):
    for name in ("a", "b"):
        measured_host(fleet, name, 0.3, 0.3)
    balanced_conf.set_override("balanced_selection_spread", 1, "filter_scheduler")
    pick = selector(balanced_conf, [], ["BalancedWeigher"])
    assert list(pick.weigh(fleet, np.arange(2), make_spec())) == [0.0, 0.0]
    assert pick.select(fleet, make_spec())[0].host == "a"


def test_the_first_spread_healthy_hosts_share_the_placements(balanced_conf, fleet):
    for i, load in enumerate([0.1, 0.2, 0.3, 0.4, 0.5]):
        measured_host(fleet, f"h{i}", load, load)
    pick = selector(balanced_conf, [], ["BalancedWeigher"], subset=1, seed=1)
    assert pick.host_subset_size == 3
    chosen = set()
    for _ in range(60):
        spec = make_spec(memory_mb=1, root_gb=0)
        host = pick.select(fleet, spec)[0]
        fleet.release(host.row, spec.instance_uuids[0])
        chosen.add(host.host)
    assert chosen == {"h0", "h1", "h2"}


def test_held_back_hosts_never_join_the_spread(balanced_conf, fleet):
    measured_host(fleet, "healthy", 0.5, 0.5)
    measured_host(fleet, "busy-1", 0.95, 0.1)
    measured_host(fleet, "busy-2", 0.1, 0.95)
    pick = selector(balanced_conf, [], ["BalancedWeigher"], seed=2)
    for _ in range(30):
        spec = make_spec(memory_mb=1, root_gb=0)
        assert pick.select(fleet, spec)[0].host == "healthy"
        fleet.release(0, spec.instance_uuids[0])


def test_the_selector_keeps_a_larger_host_subset_size(balanced_conf):
    balanced_conf.set_override("weighers", ["BalancedWeigher"], "filter_scheduler")
    balanced_conf.set_override("balanced_selection_spread", 2, "filter_scheduler")
    assert Selector([], weighers.enabled_weighers(balanced_conf), 5).host_subset_size == 5
    assert Selector([], weighers.enabled_weighers(balanced_conf), 1).host_subset_size == 2


def test_tiers_compose_across_plugins(balanced_conf, fleet):
    """DiskThresholdFilter's yellow tier decides first, BalancedWeigher's breaks its ties."""
    measured_host(fleet, "yellow-healthy", 0.1, 0.1, free_disk=5)
    measured_host(fleet, "green-busy", 0.95, 0.1)
    add_host(fleet, "green-unmeasured")
    balanced_conf.set_override("disk_yellow_threshold", "10GB", "filter_scheduler")
    pick = selector(balanced_conf, ["DiskThresholdFilter"], ["BalancedWeigher"])
    assert pick.select(fleet, make_spec(root_gb=1))[0].host == "green-unmeasured"
