"""balance and consolidate: valid plans (every step replayed through the filters), within their
limits, the figures they show, and the reasons they give when they find nothing."""

import dataclasses
import re
import time

import numpy as np
import pytest

from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.moves.rebalance import (
    NoPlan,
    PlannedMove,
    Resident,
    Snapshot,
    balance,
    consolidate,
    figures,
    make_room,
)
from scheduler.moves.rebalance.balance import MIN_GAIN
from scheduler.moves.rebalance.judge import Judge, replay, request_for
from scheduler.policy.host_state import HostTable
from scheduler.simulation import fragmented as bench
from tests.unit.moves.rebalance.test_make_room import assert_groups_apart, check_plan

SMALL = Flavor(memory_mb=8192, root_gb=40, ephemeral_gb=0, vcpus=4, name="m1.large")
BIG = Flavor(memory_mb=65536, root_gb=100, ephemeral_gb=0, vcpus=16, name="m1.huge")
HOST = (131072, 32, 2000)  # memory MB, vCPUs, disk GB; the fragmented fleets' ratios: cpu 4, ram 1


def fleet(conf, hosts, instances, hidden=None):
    """A snapshot of ``hosts`` (name -> (MB, vCPUs, GB)) holding ``instances``: (uuid, host,
    flavor, load, group or None, movable); ``hidden``: {host: busy vCPUs no instance accounts for}."""
    table = HostTable(capacity=len(hosts))
    now = time.monotonic()
    table.clock = lambda: now
    groups = {}
    residents = []
    for uuid, host, flavor, load, group, movable in instances:
        spec = RequestSpec(instance_uuids=[uuid], flavor=flavor)
        if group is not None:
            spec.group = groups.setdefault(group, {"uuid": group, "policy": "anti-affinity", "rules": {},
                                                   "members": [], "placed": [], "hosts": {}})
            spec.group["members"].append(uuid)
            spec.group["placed"].append(uuid)
            spec.group["hosts"][host] = spec.group["hosts"].get(host, 0) + 1
        residents.append(Resident(uuid, host, spec, movable=movable, load=load))
    for name, (memory, vcpus, disk) in hosts.items():
        on = [r for r in residents if r.host == name]
        row = table.add(name)
        table.update_from_report(row, HostReport.trusted({
            "host": name, "memory_mb": memory, "free_ram_mb": memory - sum(r.amounts[1] for r in on),
            "local_gb": disk, "free_disk_gb": disk - sum(r.amounts[2] for r in on), "vcpus": vcpus,
            "vcpus_used": sum(r.amounts[0] for r in on), "running_vms": 0, "instance_uuids": []}), now)
    hidden = hidden or {}
    load = [sum(r.load for r in residents if r.host == name) + hidden.get(name, 0.0) for name in hosts]
    return Snapshot.from_conf(table, residents, conf, load=load)


def skewed(conf, busy_on_hot=8, others=3, pinned=False):
    """4 hosts: h0 holds ``busy_on_hot`` busy instances (4 busy vCPUs each), the others one busy
    and ``others`` - 1 idle (0.2 busy vCPUs each)."""
    instances = [(f"hot-{i}", "h0", SMALL, 4.0, None, not pinned) for i in range(busy_on_hot)]
    for h in (1, 2, 3):
        instances.append((f"busy-{h}", f"h{h}", SMALL, 4.0, None, True))
        instances += [(f"idle-{h}-{i}", f"h{h}", SMALL, 0.2, None, True) for i in range(others - 1)]
    return fleet(conf, {f"h{i}": HOST for i in range(4)}, instances)


def loads_after(snapshot, migrations):
    with snapshot.moved(migrations):
        return snapshot.load.copy()


def test_balance_lowers_the_skew_of_a_skewed_fleet_to_its_target(conf, enabled):
    snapshot = skewed(conf)
    before = figures.skew(snapshot.load)
    assert before == pytest.approx(32 / ((32 + 3 * 4.4) / 4))
    plan = balance(snapshot, enabled, target_skew=1.15, max_migrations=10)
    assert plan, plan
    after = figures.skew(loads_after(snapshot, plan.moves))
    assert after <= 1.15 < before
    assert (plan.before.skew, plan.after.skew) == (pytest.approx(before), pytest.approx(after))
    assert all(m.source == "h0" and m.destination != "h0" for m in plan.moves)
    assert plan.moves[0].reason.startswith("h0 is the busiest host that can be helped (100% of 32 vCPUs, "
                                           "2.83 x the fleet's): an instance busy on 4 vCPUs goes to h")
    check_plan(snapshot, enabled, plan, SMALL, 0)
    assert figures.skew(snapshot.load) == pytest.approx(before)  # the snapshot is left as it was


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_balance_never_makes_more_migrations_than_its_limit_and_says_so(conf, enabled, limit):
    snapshot = skewed(conf, busy_on_hot=12)
    plan = balance(snapshot, enabled, target_skew=1.0, max_migrations=limit)
    assert len(plan.moves) == limit
    assert f"the limit of {limit} migrations reached" in plan.note
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_balance_moves_no_instance_to_a_host_the_filters_refuse(conf, enabled):
    # h1 is the least loaded but has no RAM left for one more instance; h2 holds the other
    # member of the hot instance's anti-affinity group
    instances = [("hot-a", "h0", SMALL, 4.0, "g", True), ("hot-b", "h0", SMALL, 4.0, None, True),
                 ("hot-c", "h0", SMALL, 4.0, None, True),
                 ("full", "h1", Flavor(memory_mb=131072, root_gb=10, ephemeral_gb=0, vcpus=1, name="full"),
                  0.0, None, True),
                 ("member", "h2", SMALL, 1.0, "g", True), ("other", "h3", SMALL, 6.0, None, True)]
    snapshot = fleet(conf, {f"h{i}": HOST for i in range(4)}, instances)
    plan = balance(snapshot, enabled, target_skew=1.0, max_migrations=1)
    assert [(m.instance, m.destination) for m in plan.moves] == [("hot-b", "h2")]
    check_plan(snapshot, enabled, plan, SMALL, 0)


def brute_force_skew(snapshot, judge):
    """The lowest skew any single migration the filters accept (no host over its limits) reaches."""
    best = figures.skew(snapshot.load)
    for resident in snapshot.residents.values():
        for host in snapshot.table.names:
            if host == resident.host or not resident.movable:
                continue
            step = [PlannedMove(resident.uuid, resident.host, host, "", resident.amounts[1])]
            if replay(snapshot, judge, step, request_for(SMALL, 1), []) is None:
                best = min(best, figures.skew(loads_after(snapshot, step)))
    return best


@pytest.mark.parametrize("seed", range(10))
def test_one_balancing_migration_is_the_best_single_migration(conf, enabled, seed):
    rng = np.random.default_rng(seed)
    instances = []
    for h in range(4):
        for i in range(int(rng.integers(1, 6))):
            group = "g" if rng.random() < 0.2 else None
            if group and any(x[1] == f"h{h}" and x[4] for x in instances):
                group = None
            load = float(rng.choice([0.2, 2.0, 4.0]))
            instances.append((f"{h}-{i}", f"h{h}", SMALL, load, group, bool(rng.random() > 0.1)))
    snapshot = fleet(conf, {f"h{h}": (49152, 8, 500) for h in range(4)}, instances,
                     hidden={"h0": float(rng.integers(0, 8))})
    best = brute_force_skew(snapshot, Judge(enabled))
    plan = balance(snapshot, enabled, target_skew=1.0, max_migrations=1)
    mean = snapshot.load.sum() / snapshot.capacity().sum()
    if best > figures.skew(snapshot.load) - MIN_GAIN / mean + 1e-9:  # no move gains enough to be planned
        assert isinstance(plan, NoPlan), plan
        return
    assert plan, plan
    assert figures.skew(loads_after(snapshot, plan.moves)) == pytest.approx(best)
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_balance_says_why_it_has_no_plan(conf, enabled):
    unmeasured = fleet(conf, {"h0": HOST, "h1": HOST}, [("a", "h0", SMALL, 0.0, None, True)])
    assert balance(unmeasured, enabled, 1.15).reason == "no host has measured load: the skew is not defined"
    pinned = balance(skewed(conf, pinned=True), enabled, 1.15)
    assert isinstance(pinned, NoPlan)
    assert pinned.reason == ("the skew is 2.832 (target 1.15) and no migration lowers it: h0: 100% of its "
                             "32 vCPUs busy: none of its instances with measured load may move")
    nowhere = fleet(conf, {"h0": HOST, "h1": HOST}, [("a", "h0", SMALL, 4.0, None, True)], hidden={"h1": 3.0})
    # on h1 it would make h1 the most loaded: 7 > 4
    assert balance(nowhere, enabled, target_skew=1.0).reason.endswith(
        "h0: 12% of its 32 vCPUs busy: none of its 1 instances with measured load has a host the filters "
        "accept with room where moving it lowers the busiest of the two by 1% of its vCPUs or more")
    even = balance(skewed(conf, busy_on_hot=1, others=1), enabled, 1.15)
    assert even and not even.moves
    assert even.note == "the skew 1.000 is at or below the target 1.15: nothing to move"


def test_an_idle_fleet_gets_no_migration_whose_gain_rounds_to_nothing(conf, enabled):
    # Idle instances: the skew is high (the busiest host's 0.3 % over the fleet's 0.2 %), but moving
    # one would lower h0 by 0.16 % of its vCPUs: no migration is worth it.
    idle = fleet(conf, {"h0": HOST, "h1": HOST},
                 [("a", "h0", SMALL, 0.05, None, True), ("b", "h0", SMALL, 0.05, None, True),
                  ("c", "h1", SMALL, 0.01, None, True)])
    plan = balance(idle, enabled, 1.15)
    assert isinstance(plan, NoPlan), plan
    assert plan.reason.startswith("the skew is 1.818 (target 1.15) and no migration lowers it: h0: 0% of "
                                  "its 32 vCPUs busy: none of its 2 instances with measured load has a host")


def test_each_balancing_migration_says_how_much_the_busiest_host_gains(conf, enabled):
    plan = balance(skewed(conf), enabled, 1.15, max_migrations=1)
    [move] = plan.moves
    assert move.reason.endswith("; h0 100% -> 88%")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_migrations": 0}, "max_migrations must be at least 1, got 0"),
    ({"target_skew": 0.9}, "the target skew is the busiest host's utilisation over the fleet's, "
                           "at least 1.0, got 0.9"),
    ({"target_skew": float("nan")}, "at least 1.0, got nan"),
])
def test_balance_refuses_bad_arguments(conf, enabled, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        balance(skewed(conf), enabled, **{"target_skew": 1.15, **kwargs})


def spread(conf, extra=()):
    """5 hosts of HOST: h0..h3 a quarter full (four m1.large each), h4 empty."""
    instances = [(f"{h}-{i}", f"h{h}", SMALL, 1.0, None, True) for h in range(4) for i in range(4)]
    return fleet(conf, {f"h{h}": HOST for h in range(5)}, [*instances, *extra])


def hosts_used(snapshot, migrations):
    with snapshot.moved(migrations):
        return sum(1 for residents in snapshot.on_host.values() if residents)


def test_consolidate_empties_hosts_into_the_others_in_use(conf, enabled):
    snapshot = spread(conf)
    plan = consolidate(snapshot, enabled, max_migrations=12)
    assert plan, plan
    # h3, the last to be emptied, takes h0's instances, then h1's and h2's
    assert hosts_used(snapshot, plan.moves) == 1
    assert plan.note == ("empties h0, h1, h2; no destination past its allocation limits, nor its vCPUs or "
                         "memory in measured use")
    assert len(plan.moves) == 12
    assert {m.destination for m in plan.moves} == {"h3"}  # never the empty h4
    assert (plan.before.hosts_used, plan.after.hosts_used) == (4, 1)
    assert plan.moves[0].reason == "empties h0 (4 instances) into a host that stays in use"
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_consolidate_keeps_anti_affinity_members_apart(conf, enabled):
    snapshot = spread(conf, [("m0", "h0", SMALL, 1.0, "g", True), ("m1", "h1", SMALL, 1.0, "g", True)])
    plan = consolidate(snapshot, enabled, max_migrations=20)
    assert plan, plan
    assert plan.after.hosts_used == 2
    check_plan(snapshot, enabled, plan, SMALL, 0)  # the group apart at every step
    with snapshot.moved(plan.moves):
        assert_groups_apart(snapshot)
        assert snapshot.residents["m0"].host != snapshot.residents["m1"].host
    # a member on every host in use: none can be emptied into another
    everywhere = spread(conf, [(f"m{h}", f"h{h}", SMALL, 1.0, "g", True) for h in range(4)])
    refused = consolidate(everywhere, enabled, max_migrations=20)
    assert isinstance(refused, NoPlan)
    assert refused.reason == ("none of the 4 hosts in use can be emptied; h0, the one with the fewest "
                              "instances: instance m0 finds no other host in use that the filters accept "
                              "with room for it (no destination past its allocation limits, nor its vCPUs "
                              "or memory in measured use)")


def test_consolidate_stops_at_its_limit_and_respects_headroom(conf, enabled):
    snapshot = spread(conf)
    plan = consolidate(snapshot, enabled, max_migrations=5)
    assert len(plan.moves) == 4 and plan.note.startswith("empties h0; ")
    # keeping 80% of every limit free, a host a quarter full takes nothing
    refused = consolidate(snapshot, enabled, max_migrations=12, headroom=0.8)
    assert isinstance(refused, NoPlan)
    assert re.fullmatch("none of the 4 hosts in use can be emptied; h0, the one with the fewest instances: "
                        "instance 0-[0-3] finds no other host in use that the filters accept with room for "
                        r"it \(each destination keeps 80% of its allocation limits free, and of its vCPUs "
                        r"and memory in measured use\)", refused.reason), refused.reason
    few = consolidate(snapshot, enabled, max_migrations=3)
    assert isinstance(few, NoPlan) and "its 4 instances need more migrations than the 3 left" in few.reason
    alone = fleet(conf, {"h0": HOST, "h1": HOST}, [("a", "h0", SMALL, 1.0, None, True)])
    assert consolidate(alone, enabled).reason == ("1 host holds instances: there is no host to empty into "
                                                  "another")
    with pytest.raises(ValueError, match="headroom is the share of each limit kept free"):
        consolidate(snapshot, enabled, headroom=1.0)


def test_the_figures_say_what_fits_and_what_is_stranded(conf, enabled):
    snapshot = spread(conf)
    judge = Judge(enabled)
    shown = figures.measure(snapshot, judge, [SMALL, BIG])
    # 4 busy vCPUs on each of h0..h3, none on h4: 12.5 % of 32 vCPUs, the fleet's 10 %
    assert shown == figures.Figures(skew=1.25, hosts_used=4, largest_fit="m1.huge", stranded=0.0, peak=0.125)
    # every host but one full of memory: the 8 GB left on h0 cannot take m1.huge, and h1..h4 none
    x = Flavor(memory_mb=122880, root_gb=10, ephemeral_gb=0, vcpus=1, name="x")
    y = Flavor(memory_mb=131072, root_gb=10, ephemeral_gb=0, vcpus=1, name="y")
    full = fleet(conf, {"h0": HOST, "h1": HOST},
                 [("a", "h0", x, 1.0, None, True), ("b", "h1", y, 1.0, None, True)])
    assert figures.measure(full, judge, [SMALL, BIG]).largest_fit == "m1.large"
    assert figures.measure(full, judge, [BIG]) == figures.Figures(1.0, 2, None, 1.0, 1 / 32)
    assert list(figures.shown(figures.Figures(1.25, 4, None, 0.125, 0.5, 1))) == [
        ("skew", "1.250"), ("busiest host", "50.0% of its vCPUs"), ("hosts used", "4"),
        ("hosts past their vCPUs or memory", "1"), ("largest flavor that fits", "none"),
        ("stranded RAM", "12.5%")]


def test_skew_is_max_over_mean_and_undefined_without_load():
    assert figures.skew([1.0, 1.0, 4.0]) == 2.0
    assert figures.skew([0.0, 0.0]) != figures.skew([0.0, 0.0])


def test_skew_on_hosts_of_mixed_sizes_is_the_busiest_utilisation_over_the_fleets():
    # the smallest case: a 32-vCPU host 27 % busy and a 64-vCPU host 19 % busy; the large
    # one is busier in vCPUs, the small one in utilisation
    load, capacity = [0.27 * 32, 0.19 * 64], [32, 64]
    fleet_utilisation = sum(load) / sum(capacity)
    assert figures.skew(load, capacity) == pytest.approx(0.27 / fleet_utilisation)
    assert figures.skew(load) == pytest.approx(0.19 * 64 / (sum(load) / 2))  # busy vCPUs alone
    assert figures.skew([0.0, 8.0], [0, 32]) == 1.0  # a host of no vCPUs is left out


def test_a_resident_load_moves_with_it(conf):
    snapshot = skewed(conf)
    moved = dataclasses.replace(snapshot.residents["hot-0"])
    with snapshot.moved([PlannedMove(moved.uuid, "h0", "h1", "", 0)]):
        assert snapshot.load[:2].tolist() == [28.0, 8.4]
    assert snapshot.load[:2].tolist() == [32.0, 4.4]


def test_a_make_room_plan_shows_its_flavor_fitting_only_after_its_migrations(conf, enabled):
    snapshot = bench.fragmented_fleet(60, 0, conf)
    plan = make_room(snapshot, bench.LARGE, 1, enabled)
    assert plan and plan.moves, plan
    assert (plan.before.largest_fit, plan.after.largest_fit) == ("m1.xlarge", "m1.huge")
    assert plan.before.hosts_used == plan.after.hosts_used == 60


def gb(memory_gb, vcpus=1):
    return Flavor(memory_mb=memory_gb * 1024, root_gb=10, ephemeral_gb=0, vcpus=vcpus, name=f"{memory_gb}g")


def test_balance_helps_a_small_busy_host_beside_a_large_one_whose_load_cannot_move(conf, enabled):
    # the smallest case: a 32-vCPU host 27 % busy with its instances' load, a 64-vCPU host 19 %
    # busy with load no instance accounts for. In busy vCPUs the large host is the hottest and
    # nothing on it may move; in utilisation the small one is, and it can be helped
    instances = [(f"s{i}", "small", SMALL, 0.27 * 32 / 4, None, True) for i in range(4)]
    snapshot = fleet(conf, {"small": (131072, 32, 2000), "large": (262144, 64, 4000)}, instances,
                     hidden={"large": 0.19 * 64})
    plan = balance(snapshot, enabled, target_skew=1.05, max_migrations=3)
    assert plan, plan
    assert [(m.source, m.destination) for m in plan.moves] == [("small", "large")]
    assert plan.before.skew == pytest.approx(0.27 / ((0.27 * 32 + 0.19 * 64) / 96))
    assert plan.after.skew < 1.05 and plan.after.peak < 0.27
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_balance_passes_over_a_host_it_cannot_help_and_says_so(conf, enabled):
    # h0 is the busiest, its one instance pinned; h1 is next and can be helped
    instances = [("pinned", "h0", SMALL, 30.0, None, False),
                 *[(f"b{i}", "h1", SMALL, 5.0, None, True) for i in range(4)],
                 ("idle-2", "h2", SMALL, 0.2, None, True), ("idle-3", "h3", SMALL, 0.2, None, True)]
    snapshot = fleet(conf, {f"h{i}": HOST for i in range(4)}, instances)
    plan = balance(snapshot, enabled, target_skew=1.0, max_migrations=10)
    assert plan, plan
    assert {m.source for m in plan.moves} == {"h1"} and len(plan.moves) >= 2
    assert plan.left["h0"] == "94% of its 32 vCPUs busy: none of its instances with measured load may move"
    assert plan.note.endswith("host(s) could not be helped")
    with snapshot.moved(plan.moves):
        assert max(snapshot.load[1:]) < 20.0  # h1 no longer far above the others
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_consolidate_empties_into_a_host_that_must_stay_in_use_first(conf, enabled):
    # the smallest case: 3 hosts, 4 instances; a has a pinned instance, so it stays in use: b and c
    # empty into it, and one host is left in use, not two
    instances = [("pinned", "a", SMALL, 0.5, None, False), ("b1", "b", SMALL, 0.5, None, True),
                 ("c1", "c", SMALL, 0.5, None, True), ("c2", "c", SMALL, 0.5, None, True)]
    snapshot = fleet(conf, {name: HOST for name in "abc"}, instances)
    plan = consolidate(snapshot, enabled, max_migrations=10)
    assert plan, plan
    assert {m.destination for m in plan.moves} == {"a"} and plan.after.hosts_used == 1
    assert plan.left == {"a": "an instance on it may not be moved"}
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_consolidate_keeps_each_destination_within_its_measured_cpu(conf, enabled):
    # 8-vCPU hosts (allocation 32 at ratio 4): h1 already has 6 vCPUs busy; h0's instance, busy on
    # 4, fits h1's allocation but would take it to 10 busy vCPUs of 8
    eight = (131072, 8, 2000)
    busy = fleet(conf, {"h0": eight, "h1": eight},
                 [("hot", "h0", SMALL, 4.0, None, True), ("x1", "h1", SMALL, 3.0, None, True),
                  ("x2", "h1", SMALL, 3.0, None, True)])
    refused = consolidate(busy, enabled, max_migrations=10)
    assert isinstance(refused, NoPlan), refused
    assert "instance hot finds no other host in use" in refused.reason
    calm = fleet(conf, {"h0": eight, "h1": eight},
                 [("hot", "h0", SMALL, 4.0, None, True), ("x1", "h1", SMALL, 2.0, None, True),
                  ("x2", "h1", SMALL, 2.0, None, True)])
    plan = consolidate(calm, enabled, max_migrations=10)
    assert plan and plan.after.hosts_used == 1 and plan.after.overloaded == 0
    # keeping 20 % of each host's vCPUs in measured use free: 8 of 8 busy is past 6.4
    assert isinstance(consolidate(calm, enabled, max_migrations=10, headroom=0.2), NoPlan)


def test_consolidate_places_an_anti_affinity_member_before_the_rest_of_its_host(conf, enabled):
    # h0 (emptied first: fewest instances) holds member m0 (16 GB) and two of 32 GB; m0 may not
    # go to h1, which holds m1. h2 (the last in the order, preferred) has 40 GB free, h1 72 GB.
    # The 32 GB ones first would take h2's room (40 -> 8) and leave m0 nowhere to go
    instances = [("m0", "h0", gb(16), 0.1, "g", True), ("l1", "h0", gb(32), 0.1, None, True),
                 ("l2", "h0", gb(32), 0.1, None, True),
                 ("m1", "h1", gb(16), 0.1, "g", True),
                 *[(f"f1-{i}", "h1", gb(size), 0.1, None, True) for i, size in enumerate((8, 8, 8, 16))],
                 *[(f"f2-{i}", "h2", gb(size), 0.1, None, True)
                   for i, size in enumerate((16, 16, 16, 16, 16, 8))]]
    snapshot = fleet(conf, {f"h{i}": HOST for i in range(3)}, instances)
    plan = consolidate(snapshot, enabled, max_migrations=3)
    assert plan, plan
    assert plan.note.startswith("empties h0;") and plan.after.hosts_used == 2
    assert {m.instance: m.destination for m in plan.moves} == {"m0": "h2", "l1": "h1", "l2": "h1"}
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_balance_sends_an_instance_where_the_host_is_least_busy_once_it_holds_it(conf, enabled):
    # the least busy host now is the small one (1 of 32 vCPUs busy against 4 of 96), but an 8-vCPU
    # busy instance takes it to 28 %, the large one to 12.5 %
    busy = Flavor(memory_mb=8192, root_gb=40, ephemeral_gb=0, vcpus=8, name="c1.xlarge")
    idle = Flavor(memory_mb=4096, root_gb=40, ephemeral_gb=0, vcpus=2, name="m1.medium")
    hosts = {"hot": (262144, 64, 4000), "small": (131072, 32, 2000), "large": (393216, 96, 6000)}
    instances = [*[(f"busy-{i}", "hot", busy, 8.0, None, True) for i in range(3)],
                 ("idle-s", "small", idle, 1.0, None, True), ("idle-l", "large", idle, 4.0, None, True)]
    snapshot = fleet(conf, hosts, instances)
    plan = balance(snapshot, enabled, target_skew=1.15, max_migrations=1)
    [move] = plan.moves
    assert move.destination == "large"
    assert plan.after.skew == pytest.approx((16 / 64) / (29 / 192))  # hot is the busiest after
    check_plan(snapshot, enabled, plan, SMALL, 0)


def test_a_host_refused_for_room_is_a_destination_again_once_a_move_frees_it(conf, enabled):
    full = Flavor(memory_mb=126976, root_gb=10, ephemeral_gb=0, vcpus=1, name="full")
    snapshot = fleet(conf, {"h0": HOST, "h1": HOST, "h2": HOST},
                     [("mover", "h0", SMALL, 1.0, None, True), ("big", "h1", full, 0.0, None, True)])
    judge = Judge(enabled)
    mover = snapshot.residents["mover"]
    assert judge.destinations(snapshot, mover).tolist() == [False, False, True]  # h1: 4 GB free
    snapshot.move("big", "h2")
    assert judge.destinations(snapshot, mover).tolist() == [False, True, False]  # h2 full now
