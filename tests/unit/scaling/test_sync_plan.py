"""One sync of a group as planned, without a database: the count, the history to record,
the members to delete and to create, and the ERROR members' back-off."""

from __future__ import annotations

from typing import Any

from scheduler.scaling.spec import CPU, Recommendation, SettledMembers, parse_spec
from scheduler.scaling.sync_plan import Backoff, History, PlanSettings, plan_sync

SPEC = parse_spec(
    {
        "min": 1,
        "max": 10,
        "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}],
        "behavior": {"scale_down": {"stabilization_window_s": 0}},
    }
)
SETTINGS = PlanSettings()


def rows(*hosts: str | None, state: str = "ACTIVE") -> list[dict[str, Any]]:
    return [{"uuid": f"m{i}", "state": state, "host": host} for i, host in enumerate(hosts)]


def seen(count: int, busy_vcpus: float) -> SettledMembers:
    """``count`` members of 1 vCPU, ``busy_vcpus`` busy among them."""
    return SettledMembers(count, {CPU: int(busy_vcpus * 1000)}, {CPU: count * 1000, "memory": count * 1000})


def test_a_first_sync_records_the_count_found_and_the_recommendation():
    plan = plan_sync(SPEC, 2, rows("a", "b"), seen(2, 1.0), {}, History(None), SETTINGS)
    assert plan.decision.desired == 2 and plan.recorded == (2, 2)
    assert (plan.victims, plan.create, plan.backoff) == ((), 0, Backoff())


def test_a_scale_down_deletes_the_newest_member_of_the_host_holding_the_most():
    members = rows("a", "a", "b")
    plan = plan_sync(SPEC, 3, members, seen(3, 0.6), {}, History([Recommendation(15.0, 3)]), SETTINGS)
    assert plan.decision.desired == 2 and plan.decision.scale_event == -1
    assert [m["uuid"] for m in plan.victims] == ["m1"]
    assert plan.recorded == (2,)


def test_no_more_than_max_new_members_are_created_a_sync():
    members = rows("a")
    plan = plan_sync(SPEC, 1, members, seen(1, 4.0), {}, History([]), PlanSettings(max_new_members=3))
    assert plan.decision.desired == 5  # 8 asked, held to 4 more a scale-up (Kubernetes' default)
    assert plan.create == 3
    assert plan.pending == {
        "count": 1,
        "reason": "at most 3 new members a sync ([scaling] max_new_members_per_sync)",
    }


def test_error_members_are_replaced_then_wait_their_back_off():
    members = [*rows("a"), {"uuid": "broken", "state": "ERROR", "host": None}]
    usage = seen(1, 0.5)
    due = plan_sync(SPEC, 2, members, usage, {}, History([]), SETTINGS, Backoff(2, -1.0))
    assert [m["uuid"] for m in due.replacing] == ["broken"] and due.create == 1
    assert due.backoff == Backoff(3, 40.0)  # 10 s doubled twice
    waiting = plan_sync(SPEC, 2, members, usage, {}, History([]), SETTINGS, Backoff(3, 25.0))
    assert (waiting.replacing, waiting.create, waiting.backoff) == ((), 0, None)
    blocked = plan_sync(SPEC, 2, members, usage, {}, History([]), SETTINGS, template_error="no flavor")
    assert (blocked.replacing, blocked.create) == ((), 0)


def test_a_paused_group_plans_nothing():
    plan = plan_sync(SPEC, 0, rows("a"), seen(1, 1.0), {}, History([]), SETTINGS)
    assert plan.paused and (plan.victims, plan.create) == ((), 0)


def test_members_moving_are_counted_as_running_and_no_replacement_is_made_for_them():
    members = [*rows("a"), *rows("b", state="MIGRATING"), *rows("c", state="VERIFY_RESIZE")]
    plan = plan_sync(SPEC, 3, members, seen(3, 1.5), {}, History([]), SETTINGS)
    assert plan.decision.desired == 3 and plan.create == 0
    assert plan.backoff == Backoff()  # every member running: the back-off is over


def test_stopped_members_are_counted_not_ready_and_neither_replaced_nor_scaled_on():
    """A SHUTOFF member (or one whose power is changing) stays a member, as a Kubernetes Pod that is not
    Ready: counted, not replaced; the members' usage is not settled while it is not running, so the
    group keeps its size rather than scale on the others' samples alone."""
    from datetime import datetime, timedelta

    from scheduler.scaling.members import to_member

    now = datetime(2026, 12, 1, 12, 0, 0)

    def planned(members, usage):
        # Not settled (not every member runs): the controller hands the policy each member as it is.
        members_seen = [to_member(dict(m, vcpus=1, memory_mb=512, launched_at=now - timedelta(hours=1)),
                                  usage.get(m["uuid"], {}), now) for m in members]
        return plan_sync(SPEC, len(members), members, members_seen, {}, History([]), SETTINGS)

    members = [{"uuid": "on", "state": "ACTIVE", "host": "a"},
               {"uuid": "off", "state": "SHUTOFF", "host": "b"},
               {"uuid": "boot", "state": "REBOOTING", "host": "c"}]
    # The running member at the target; the others' samples (were there any) set aside.
    plan = planned(members, {"on": {CPU: 0.5}, "off": {CPU: 0.0}, "boot": {CPU: 0.0}})
    assert plan.decision.desired == 3
    assert (plan.replacing, plan.create, plan.victims) == ((), 0, ())
    # Every member stopped: no sample to read, the size kept.
    stopped = [dict(m, state="SHUTOFF") for m in members]
    plan = planned(stopped, {})
    assert plan.decision.desired == 3 and "did not receive metrics" in plan.decision.metrics[0].error
    assert (plan.replacing, plan.create, plan.victims) == ((), 0, ())


def test_a_scale_down_deletes_a_stopped_member_before_a_running_one():
    members = [*rows("a", "a"), {"uuid": "off", "state": "SHUTOFF", "host": "b"}]
    plan = plan_sync(SPEC, 3, members, seen(3, 0.3), {}, History([Recommendation(15.0, 3)]), SETTINGS)
    assert plan.decision.desired < 3
    assert [m["uuid"] for m in plan.victims][0] == "off"
