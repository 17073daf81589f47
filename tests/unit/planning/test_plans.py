"""What the planner and the move planner decide, read off the Plans they hand the applier: whole
placements and moves run in memory by the Harness (tests/unit/planning/harness.py) on hosts that
reported (h1 8 GB, h2 16 GB, h3 4 GB; 100 GB of disk and 8 vCPUs each), with the filters and
weighers of the default configuration (RAMWeigher: the most free RAM first)."""

import pytest

from berth_contract import traits
from berth_contract.request_spec import Flavor
from scheduler import states
from scheduler.exception import NoValidHost
from scheduler.moves.planner import LIVE_MIGRATION, MIGRATION, RESIZE, MoveRefused
from tests.unit.planning.harness import Harness, Placed, placed, refused, request, sent_back

FLEET = {"h1": 8192, "h2": 16384, "h3": 4096}
#: Each host's limits, as RamFilter, DiskFilter and CoreFilter (4 vCPUs a core) give them.
LIMITS = {host: {"memory_mb": float(ram), "disk_gb": 100.0, "vcpu": 32.0} for host, ram in FLEET.items()}


@pytest.fixture
def harness(policy_conf):
    harness = Harness(policy_conf)
    for host, ram in FLEET.items():
        harness.report(host, ram, nodename=f"{host}-node")
    return harness


def on(host, attempt=1):
    return Placed(host, f"{host}-node", LIMITS[host], attempt)


def active(harness, memory_mb, host, **hints):
    """The uuid of an instance of ``memory_mb`` booted on ``host`` (forced) and ACTIVE there."""
    [uuid], request_ = request(memory_mb, hints=hints, force_hosts=[host])
    [plan] = harness.run(request_)
    assert {u: p.host for u, p in placed(plan).items()} == {uuid: host}
    harness.activate(uuid)
    return uuid


# -- placements -----------------------------------------------------------------------------


def test_a_request_goes_to_the_host_with_the_most_free_ram_with_the_limits_its_agent_claims_against(harness):
    [uuid], request_ = request(1024)
    [plan] = harness.run(request_)
    assert placed(plan) == {uuid: on("h2")}
    assert (plan.refusals, plan.invalid, plan.resends, plan.deleted) == ([], [], [], [])
    [row] = plan.creates
    assert (row["state"], row["memory_mb"]) == (states.SCHEDULED, 1024)
    assert row["scheduled_at"] == row["created_at"] == harness.store.time
    [build] = plan.builds
    assert (build.decision.considered, build.decision.passed, build.decision.forced) == (3, 3, False)
    assert harness.free_ram("h2") == 16384 - 1024  # consumed in the table as it was chosen


def test_a_request_that_fits_nowhere_is_refused_with_the_filter_that_removed_the_hosts(harness):
    [uuid], request_ = request(100_000)
    [plan] = harness.run(request_)
    reason = "No valid host was found: 3 hosts considered; RamFilter removed 3; none left"
    assert refused(plan) == {uuid: reason}
    assert plan.refusals[0].removed == (("RamFilter", 3),)
    assert (plan.builds, placed(plan)) == ([], {})
    [row] = plan.creates
    assert (row["uuid"], row["state"], row["fault_reason"], row["host"]) == (uuid, states.ERROR, reason, None)
    assert {host: harness.free_ram(host) for host in FLEET} == FLEET


def test_a_refusal_by_fragmentation_says_which_hosts_migrations_would_free(policy_conf):
    harness = Harness(policy_conf)
    for host in ("a", "b"):
        harness.report(host, 8192)
    active(harness, 3072, "a"), active(harness, 3072, "b")
    [uuid], request_ = request(6144)  # 5 GB free on each: room in total, on neither alone
    [plan] = harness.run(request_)
    assert refused(plan) == {uuid: "No valid host was found: 2 hosts considered; RamFilter removed 2; none "
                                   "left; fragmentation: 2 hosts would have room after moving instances off "
                                   "them (fewest: 1 migration, 3 GB)"}


def test_a_request_for_several_instances_places_each_on_the_host_with_the_most_ram_left(harness):
    uuids, request_ = request(6000, count=3)
    [plan] = harness.run(request_)
    # h2 16384 -> 10384 (still more than h1's 8192) -> 4384; then h1.
    assert placed(plan) == dict(zip(uuids, [on("h2"), on("h2"), on("h1")], strict=True))
    assert [build.instance_uuid for build in plan.builds] == uuids


def test_a_request_for_several_instances_that_do_not_all_fit_is_refused_whole(harness):
    uuids, request_ = request(6000, count=4)
    [plan] = harness.run(request_)
    reason = ("No valid host was found for instance 4 of 4: of the 1 host that passed the filters for "
              "instance 3, RamFilter removed 1; none left (none booted: 3 of 4 fit, and a request is placed "
              "whole or not at all)")
    assert refused(plan) == dict.fromkeys(uuids, reason)
    assert plan.builds == [] and [row["state"] for row in plan.creates] == [states.ERROR] * 4
    assert {host: harness.free_ram(host) for host in FLEET} == FLEET  # the three that fit given back


def test_a_request_for_as_many_as_fit_places_those_that_fit_and_deletes_the_others(harness):
    uuids, request_ = request(6000, count=4)
    request_[0]["min_num_instances"] = 2
    [plan] = harness.run(request_)
    assert placed(plan) == dict(zip(uuids[:3], [on("h2"), on("h2"), on("h1")], strict=True))
    assert list(refused(plan)) == [uuids[3]]
    assert refused(plan)[uuids[3]].startswith("Not placed: 3 of 4 fit, and the request asked for as many as "
                                              "fit (at least 2); No valid host was found for instance 4 of 4")
    [left_out] = [row for row in plan.creates if row["uuid"] == uuids[3]]
    assert left_out["state"] == states.DELETED


# -- server groups and host hints ------------------------------------------------------------


def test_anti_affinity_puts_each_member_on_a_host_of_its_own_and_refuses_one_more(harness):
    group = harness.store.add_group("anti-affinity")
    uuids, request_ = request(1024, count=3, hints={"group": group})
    [plan] = harness.run(request_)
    hosts = [p.host for p in placed(plan).values()]
    assert sorted(hosts) == ["h1", "h2", "h3"]
    assert [spec.instance_uuids for spec in plan.group_members] == [uuids]
    assert harness.store.groups[group]["members"] == uuids
    harness.activate(*uuids)  # the hosts' reports list them: where they are is read from the Store

    [late], request_ = request(1024, hints={"group": group})
    [plan] = harness.run(request_)
    assert refused(plan) == {late: "No valid host was found: 3 hosts considered; "
                                   "ServerGroupAntiAffinityFilter removed 3; none left"}


def test_a_grouped_request_in_a_batch_sees_where_the_one_before_it_went(harness):
    group = harness.store.add_group("anti-affinity")
    [first], one = request(1024, hints={"group": group})
    [second], other = request(1024, hints={"group": group})
    plans = harness.run(one, other)
    # Two segments: the second request reads the group's placements once the first is committed.
    assert [list(placed(plan)) for plan in plans] == [[first], [second]]
    assert placed(plans[0])[first] == on("h2")
    assert placed(plans[1])[second] == on("h1")  # not h2, which has more free RAM


def test_affinity_follows_the_first_member(harness):
    group = harness.store.add_group("affinity")
    member = active(harness, 1024, "h3", group=group)
    assert harness.store.groups[group]["members"] == [member]
    uuids, request_ = request(1024, count=2, hints={"group": group})
    [plan] = harness.run(request_)
    assert placed(plan) == dict.fromkeys(uuids, on("h3"))


def test_same_host_and_different_host_name_the_hosts_of_the_instances_they_name(harness):
    on_h3 = active(harness, 1024, "h3")
    [same], request_ = request(1024, hints={"same_host": on_h3})
    [plan] = harness.run(request_)
    assert placed(plan) == {same: on("h3")}
    on_h2 = active(harness, 1024, "h2")
    [other], request_ = request(1024, hints={"different_host": [on_h2, on_h3]})
    [plan] = harness.run(request_)
    assert placed(plan) == {other: on("h1")}


def test_a_new_request_naming_a_group_that_does_not_exist_is_invalid_and_its_instances_say_why(harness):
    missing = "00000000-0000-4000-8000-000000000000"
    [uuid], request_ = request(1024, hints={"group": missing})
    [plan] = harness.run(request_)
    why = f"Server group {missing} does not exist (scheduler hint group)"
    [invalid] = plan.invalid
    assert str(invalid.error) == why
    [row] = plan.creates
    assert (row["uuid"], row["state"], row["fault_reason"]) == (uuid, states.ERROR, f"Invalid request: {why}")
    assert (plan.builds, plan.refusals) == ([], [])


# -- reschedules ------------------------------------------------------------------------------


def test_a_reschedule_leaves_out_the_host_that_sent_it_back_until_the_attempts_run_out(harness):
    [uuid], request_ = request(1024)
    [plan] = harness.run(request_)
    assert placed(plan) == {uuid: on("h2")}

    [plan] = harness.run(sent_back(plan.builds[0], "h2-node", "disk on fire"))
    assert placed(plan) == {uuid: on("h1", attempt=2)}  # h2 has the most free RAM, and sent it back
    [update] = plan.updates
    assert update.expected == {"state": states.RESCHEDULABLE, "host": "h2", "attempts": 1}
    assert plan.builds[0].filter_properties["retry"]["hosts"] == [["h2", "h2-node"]]
    assert harness.free_ram("h2") == 16384  # what it held on h2 given back

    [plan] = harness.run(sent_back(plan.builds[0], "h1-node", "disk on fire"))
    assert placed(plan) == {uuid: on("h3", attempt=3)}

    [plan] = harness.run(sent_back(plan.builds[0], "h3-node", "out of memory"))
    assert refused(plan) == {uuid: "Exceeded maximum number of attempts (3); last failure: h3: out of memory"}
    [update] = plan.updates
    assert (update.values["state"], update.values["host"]) == (states.ERROR, None)
    assert harness.store.instances[uuid]["state"] == states.ERROR


def test_a_reschedule_that_only_its_sender_could_take_is_refused_by_the_retry_filter(harness):
    [uuid], request_ = request(10_000)  # only h2 has the room
    [plan] = harness.run(request_)
    assert placed(plan) == {uuid: on("h2")}
    [plan] = harness.run(sent_back(plan.builds[0], "h2-node", "disk on fire"))
    assert refused(plan) == {uuid: "No valid host was found: 3 hosts considered; RetryFilter removed 1, "
                                   "RamFilter removed 2; none left; last failure: h2: disk on fire"}


def test_a_reschedule_sent_twice_is_placed_once(harness):
    [uuid], request_ = request(1024)
    [plan] = harness.run(request_)
    back = sent_back(plan.builds[0], "h2-node", "disk on fire")
    [first] = harness.run(back)
    assert placed(first) == {uuid: on("h1", attempt=2)}
    [again] = harness.run(back)  # the instance left h2: nothing to do
    assert (again.builds, again.updates, again.refusals) == ([], [], [])


# -- moves ------------------------------------------------------------------------------------


def flavor(memory_mb):
    return Flavor(memory_mb=memory_mb, root_gb=10, ephemeral_gb=0, vcpus=2)


def test_a_resize_that_still_fits_on_its_host_is_done_in_place(harness):
    harness.report("h3", FLEET["h3"], nodename="h3-node", traits=[traits.RESIZE_IN_PLACE])
    uuid = active(harness, 2048, "h3")
    start = harness.move(uuid, RESIZE, flavor(4096))  # fits once its own 2 GB are left out
    assert start.in_place and start.placement.host == "h3" and start.placement.node == "h3-node"
    assert start.placement.limits == LIMITS["h3"]
    assert start.spec.flavor.memory_mb == 4096
    assert harness.store.instances[uuid]["move_host"] == "h3"


def test_a_resize_that_fits_on_a_host_whose_driver_cannot_resize_in_place_goes_to_another(harness):
    uuid = active(harness, 2048, "h3")  # h3 reports no CUSTOM_BERTH_RESIZE_IN_PLACE (a qemu host)
    start = harness.move(uuid, RESIZE, flavor(4096))
    assert (start.in_place, start.placement.host) == (False, "h2")


def test_a_resize_that_no_longer_fits_on_its_host_goes_to_the_host_the_filters_choose(harness):
    uuid = active(harness, 2048, "h3")
    start = harness.move(uuid, RESIZE, flavor(6144))
    assert not start.in_place
    assert (start.placement.host, start.placement.limits) == ("h2", LIMITS["h2"])
    assert start.decision.considered == 2  # its own host left out


def test_with_resize_in_place_off_a_resize_always_moves(harness, policy_conf):
    policy_conf.set_override("resize_in_place", False, "scheduler")
    uuid = active(harness, 1024, "h3")
    start = harness.move(uuid, RESIZE, flavor(2048))
    assert (start.in_place, start.placement.host) == (False, "h2")


def test_a_migration_goes_to_the_best_other_host(harness):
    uuid = active(harness, 6000, "h2")
    start = harness.move(uuid, MIGRATION)
    assert (start.placement.host, start.move.source) == ("h1", "h2")  # h3 is too small, h2 its own


def test_a_live_migration_to_a_named_host_that_fails_a_filter_is_refused_with_the_filters_reason(harness):
    uuid = active(harness, 6000, "h2")
    with pytest.raises(NoValidHost) as raised:
        harness.move(uuid, LIVE_MIGRATION, host="h3")
    assert str(raised.value) == "No valid host was found: 1 host considered; RamFilter removed 1; none left"
    assert harness.moves == [] and harness.free_ram("h3") == 4096


def test_a_live_migration_forced_to_a_host_skips_the_filters_as_novas_forced_hosts_do(harness):
    uuid = active(harness, 6000, "h2")
    start = harness.move(uuid, LIVE_MIGRATION, host="h3", force=True)
    assert (start.placement.host, start.placement.limits) == ("h3", {})  # no limit to the agent's claim
    assert start.decision.forced and start.move.live


def test_a_live_migration_forced_to_a_disabled_host_is_refused(harness):
    uuid = active(harness, 1024, "h2")
    harness.hosts.set_disabled({"h3": "failing disks"})
    with pytest.raises(MoveRefused, match="Host h3 is disabled \\(failing disks\\): it takes no instance"):
        harness.move(uuid, LIVE_MIGRATION, host="h3", force=True)
    assert harness.moves == []


def test_a_migration_keeps_its_server_groups_rule(harness):
    group = harness.store.add_group("anti-affinity")
    uuids, request_ = request(1024, count=2, hints={"group": group})
    [plan] = harness.run(request_)
    assert [p.host for p in placed(plan).values()] == ["h2", "h1"]
    harness.activate(*uuids)
    start = harness.move(uuids[0], MIGRATION)
    assert start.placement.host == "h3"  # h1 holds the other member
    with pytest.raises(NoValidHost) as raised:
        harness.move(uuids[1], MIGRATION)  # h2 and h3 both hold the first member while it moves
    assert str(raised.value) == ("No valid host was found: 2 hosts considered; ServerGroupAntiAffinityFilter "
                                 "removed 2; none left")
