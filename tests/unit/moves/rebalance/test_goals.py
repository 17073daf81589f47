"""balance and consolidate: valid plans (every step replayed through the filters), within their
limits, the figures they show, and the reasons they give when they find nothing."""

import dataclasses
import re
import time

import numpy as np
import pytest

from benchmarks import make_room as bench
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
from scheduler.moves.rebalance.judge import Judge, replay, request_for
from scheduler.policy.host_state import HostTable
from tests.unit.moves.rebalance.test_make_room import assert_groups_apart, check_plan

SMALL = Flavor(memory_mb=8192, root_gb=40, ephemeral_gb=0, vcpus=4, name="m1.large")
BIG = Flavor(memory_mb=65536, root_gb=100, ephemeral_gb=0, vcpus=16, name="m1.huge")
HOST = (131072, 32, 2000)  # memory MB, vCPUs, disk GB; ratios of benchmarks.make_room: cpu 4, ram 1


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
    assert "h0 is the most loaded host (32.0 busy vCPUs" in plan.moves[0].reason
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
    if best >= figures.skew(snapshot.load) - 1e-9:
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
    assert pinned.reason.startswith("the skew is 2.832 (target 1.15) and no migration lowers it: the most "
                                    "loaded host h0 (32.0 busy vCPUs) has no instance with measured load")
    nowhere = fleet(conf, {"h0": HOST, "h1": HOST}, [("a", "h0", SMALL, 4.0, None, True)], hidden={"h1": 3.0})
    # on h1 it would make h1 the most loaded: 7 > 4
    assert ("none of the 1 instances with measured load on the most loaded host h0 (4.0 busy vCPUs) has a "
            "host") in balance(nowhere, enabled, target_skew=1.0).reason
    even = balance(skewed(conf, busy_on_hot=1, others=1), enabled, 1.15)
    assert even and not even.moves
    assert even.note == "the skew 1.000 is at or below the target 1.15: nothing to move"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_migrations": 0}, "max_migrations must be at least 1, got 0"),
    ({"target_skew": 0.9}, "the target skew is max / mean, at least 1.0, got 0.9"),
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
    # h1 takes h0's instances (best fit among equals: the first), then h2's and h3's
    assert hosts_used(snapshot, plan.moves) == 1 and plan.note == "empties h0, h2, h3"
    assert len(plan.moves) == 12
    assert {m.destination for m in plan.moves} == {"h1"}  # never the empty h4
    assert (plan.before.hosts_used, plan.after.hosts_used) == (4, 1)
    assert plan.moves[0].reason == "empties h0 (4 instances): best fit on a host in use"
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
                              "with room for it")


def test_consolidate_stops_at_its_limit_and_respects_headroom(conf, enabled):
    snapshot = spread(conf)
    plan = consolidate(snapshot, enabled, max_migrations=5)
    assert len(plan.moves) == 4 and plan.note == "empties h0"
    # keeping 80% of every limit free, a host a quarter full takes nothing
    refused = consolidate(snapshot, enabled, max_migrations=12, headroom=0.8)
    assert isinstance(refused, NoPlan)
    assert re.fullmatch("none of the 4 hosts in use can be emptied; h0, the one with the fewest instances: "
                        "instance 0-[0-3] finds no other host in use that the filters accept with room for "
                        "it and the headroom", refused.reason), refused.reason
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
    assert shown == figures.Figures(skew=1.25, hosts_used=4, largest_fit="m1.huge", stranded=0.0)
    # every host but one full of memory: the 8 GB left on h0 cannot take m1.huge, and h1..h4 none
    x = Flavor(memory_mb=122880, root_gb=10, ephemeral_gb=0, vcpus=1, name="x")
    y = Flavor(memory_mb=131072, root_gb=10, ephemeral_gb=0, vcpus=1, name="y")
    full = fleet(conf, {"h0": HOST, "h1": HOST},
                 [("a", "h0", x, 1.0, None, True), ("b", "h1", y, 1.0, None, True)])
    assert figures.measure(full, judge, [SMALL, BIG]).largest_fit == "m1.large"
    assert figures.measure(full, judge, [BIG]) == figures.Figures(1.0, 2, None, 1.0)
    assert list(figures.shown(figures.Figures(1.25, 4, None, 0.125))) == [
        ("skew", "1.250"), ("hosts used", "4"), ("largest flavor that fits", "none"),
        ("stranded RAM", "12.5%")]


def test_skew_is_max_over_mean_and_undefined_without_load():
    assert figures.skew([1.0, 1.0, 4.0]) == 2.0
    assert figures.skew([0.0, 0.0]) != figures.skew([0.0, 0.0])


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
