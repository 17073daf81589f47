"""The scaling groups' controller on SQLite, with recording casts and in-memory metrics."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler import states
from scheduler.db import api as db_api
from scheduler.scaling import members as group_members
from scheduler.scaling.controller import (
    DELETING,
    FAILED,
    LOST,
    PAUSED,
    REMOVED,
    SYNCED,
    ControllerSettings,
    InMemoryMetrics,
    ScalingController,
)
from tests.unit.scaling.helpers import Clock

CPU_50 = [{"type": "resource", "name": "cpu", "target_utilization": 50}]
TEMPLATE = {"flavor_name": "m1.small", "scheduler_hints": {"color": "blue"}, "availability_zone": "az1",
            "server_group_uuid": "5b1c1bde-8d8e-4c5e-9f0e-2f4d0c0a7e11"}



class Died(BaseException):
    """The controller's process ends here."""


class FakeScheduler:
    """Records the casts; checks that each build's member was committed before it was cast;
    deletes as the scheduler and an agent would (at once)."""

    def __init__(self, database: db_api.Database) -> None:
        self.db = database
        self.builds: list[str] = []
        self.deletes: list[str] = []
        self.bundles: list[int] = []  # the builds each run_instances carried
        self.die_on_build = False

    def run_instance(self, request_spec: dict[str, Any], filter_properties: dict[str, Any]) -> None:
        if self.die_on_build:
            raise Died()
        [uuid] = request_spec["instance_uuids"]
        row = self.db.get_instance(uuid)
        assert row is not None, f"build of {uuid} cast before its row was committed"
        assert row["scaling_group_uuid"] is not None
        self.builds.append(uuid)

    def run_instances(self, requests: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        self.bundles.append(len(requests))
        for request_spec, filter_properties in requests:
            self.run_instance(request_spec, filter_properties)

    def delete_instance(self, uuid: str) -> None:
        row = self.db.get_instance(uuid)
        assert row is not None and row["state"] == states.DELETING, "delete cast before the member was marked"
        self.deletes.append(uuid)
        self.db.update_instance(uuid, {"state": states.DELETED, "deleted_at": self.db.now()})


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _database(conf: Any, clock: Clock) -> db_api.Database:
    database = db_api.Database.from_conf(conf)
    database.now = clock  # type: ignore[method-assign]
    return database


@pytest.fixture
def database(conf: Any, clock: Clock) -> Iterator[db_api.Database]:
    os.makedirs(conf.state_path, exist_ok=True)
    database = _database(conf, clock)
    database.sync()
    yield database
    database.dispose()


@pytest.fixture
def metrics() -> InMemoryMetrics:
    return InMemoryMetrics()


@pytest.fixture
def scheduler(database: db_api.Database) -> FakeScheduler:
    return FakeScheduler(database)


def _controller(database: db_api.Database, scheduler: FakeScheduler, metrics: InMemoryMetrics,
                clock: Clock, owner: str = "sched-a", **settings: Any) -> ScalingController:
    return ScalingController(ControllerSettings(owner, **settings), database, scheduler.run_instance,
                             scheduler.delete_instance, metrics, clock)


@pytest.fixture
def controller(database: db_api.Database, scheduler: FakeScheduler, metrics: InMemoryMetrics,
               clock: Clock) -> ScalingController:
    return _controller(database, scheduler, metrics, clock)


def _group(database: db_api.Database, uuid: str = "g1", name: str = "web", desired: int = 2,
           **spec: Any) -> dict[str, Any]:
    spec = {"min": 1, "max": 20, "metrics": CPU_50, **spec}
    return database.create_scaling_group(uuid, name, spec, TEMPLATE, desired, project_id="p1")


def _members(database: db_api.Database, group: str = "g1") -> list[dict[str, Any]]:
    return database.list_scaling_group_members(group)


def _set(database: db_api.Database, name: str, state: str, host: str | None = None, group: str = "g1") -> str:
    [member] = [m for m in _members(database, group) if m["display_name"] == name]
    database.update_instance(member["uuid"], {"state": state, "host": host})
    return str(member["uuid"])


def _run(database: db_api.Database, metrics: InMemoryMetrics, cpu: float, group: str = "g1") -> None:
    """Every member ACTIVE on a host of its own, each using ``cpu`` vCPUs."""
    for member in _members(database, group):
        if member["state"] != states.ACTIVE:
            host = member["host"] or f"h-{member['display_name']}"
            database.update_instance(member["uuid"], {"state": states.ACTIVE, "host": host})
        metrics.set_usage(member["uuid"], cpu=cpu)


def _names(database: db_api.Database, uuids: list[str] | tuple[str, ...]) -> list[str]:
    rows = database.get_instances(uuids)
    return [rows[u]["display_name"] for u in uuids]


# -- scaling up ----------------------------------------------------------------------------------


def test_first_sync_creates_the_members_and_casts_after_the_commit(database, scheduler, controller, clock):
    _group(database, desired=2)
    [result] = controller.sync_once()
    assert result.outcome == SYNCED and result.desired == 2
    members = _members(database)
    assert sorted(m["display_name"] for m in members) == ["web-1", "web-2"]
    assert {m["state"] for m in members} == {states.SCHEDULING}
    assert scheduler.builds == list(result.created) and set(result.created) == {m["uuid"] for m in members}
    row = database.get_instance(result.created[0])
    assert row["project_id"] == "p1" and (row["vcpus"], row["memory_mb"]) == (1, 2048)
    request = row["request_spec"]
    assert request["instance_uuids"] == [row["uuid"]] and request["num_instances"] == 1
    assert request["instance_type"]["name"] == "m1.small"
    assert request["instance_properties"] == {"project_id": "p1", "availability_zone": "az1",
                                              "display_name": row["display_name"]}
    assert row["filter_properties"]["scheduler_hints"] == {"color": "blue",
                                                           "group": TEMPLATE["server_group_uuid"]}


def test_the_builds_of_a_sync_are_cast_together_where_the_controller_can(database, scheduler, metrics, clock):
    controller = ScalingController(ControllerSettings("sched-a"), database, scheduler.run_instance,
                                   scheduler.delete_instance, metrics, clock,
                                   cast_run_instances=scheduler.run_instances)
    _group(database, desired=3)
    _group(database, uuid="g2", name="db", desired=1)
    results = controller.sync_once()
    assert sorted(scheduler.builds) == sorted(uuid for result in results for uuid in result.created)
    assert scheduler.bundles == [3]  # the lone build of g2 goes alone


def test_scale_up_under_load_to_the_algorithms_figure(database, scheduler, metrics, controller, clock):
    _group(database, desired=2)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.9)  # 90 % of a vCPU against 50 %: ceil(2 × 1.8) = 4
    scheduler.builds.clear()
    [result] = controller.sync_once(clock.at(15))
    assert result.desired == 4 and len(result.created) == 2
    assert sorted(_names(database, result.created)) == ["web-3", "web-4"]
    assert scheduler.builds == list(result.created)
    group = database.get_scaling_group("g1")
    assert group["desired"] == 4
    assert group["status"]["metrics"] == [{"name": "cpu", "type": "resource", "current": 90,
                                           "target": {"utilization": 50}, "proposal": 4}]
    assert group["status"]["events"][-1]["change"] == 2
    assert group["status"]["events"][-1]["reason"] == (
        "scaled from 2 to 4: cpu utilization 90% of requests above target 50%")
    assert [e["reason"] for e in database.scaling_group_history("g1")["scale_events"]] == [
        "scaled from 2 to 4: cpu utilization 90% of requests above target 50%"]
    new = [m for m in _members(database) if m["uuid"] in result.created]
    assert {(m["state"], m["scaling_group_uuid"]) for m in new} == {(states.SCHEDULING, "g1")}


def test_scale_up_never_faster_than_the_policy_allows(database, scheduler, metrics, controller, clock):
    _group(database, desired=2, behavior={"scale_up": {"policies": [
        {"type": "instances", "value": 2, "period_s": 60}]}})
    controller.sync_once(clock.at(0))
    desired = []
    for second in (15, 30, 45, 60, 75, 90, 120):
        _run(database, metrics, cpu=1.0)  # twice the target: it wants ever more
        desired.append(controller.sync_once(clock.at(second))[0].desired)
    # 2 members more per 60 s at most: +2 at 15, nothing until 75 (60 s after), +2 at 75...
    assert desired == [4, 4, 4, 4, 6, 6, 6]
    assert len(_members(database)) == 6
    assert database.get_scaling_group("g1")["status"]["limited_by"] == "ScaleUpLimit"


# -- scaling down --------------------------------------------------------------------------------


def test_scale_down_waits_for_the_window_then_deletes_in_kubernetes_order(
        database, scheduler, metrics, controller, clock):
    _group(database, desired=6, min=2, behavior={"scale_down": {"stabilization_window_s": 60}})
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)  # at the target
    assert controller.sync_once(clock.at(5))[0].desired == 6
    _set(database, "web-1", states.SCHEDULING)
    _set(database, "web-2", states.BUILDING, "h2")
    for name in ("web-3", "web-4", "web-5"):
        _set(database, name, states.ACTIVE, "h1")
    _set(database, "web-6", states.ACTIVE, "h2")
    for member in _members(database):
        metrics.set_usage(member["uuid"], cpu=0.05)  # 10 %: one member would do
    for second in (15, 30, 45, 60):
        result = controller.sync_once(clock.at(second))[0]
        assert (result.desired, result.deleted) == (6, ())
        assert database.get_scaling_group("g1")["status"]["limited_by"] == "ScaleDownStabilized"
    result = controller.sync_once(clock.at(90))[0]
    assert result.desired == 2
    # not placed, not ready, then the host holding the most members, newest first
    assert _names(database, result.deleted) == ["web-1", "web-2", "web-5", "web-4"]
    assert scheduler.deletes == list(result.deleted)
    assert sorted(m["display_name"] for m in _members(database)) == ["web-3", "web-6"]
    assert database.get_scaling_group("g1")["status"]["events"][-1] == {
        "at": "2026-12-01T12:01:30.000000Z", "change": -4,
        "reason": "scaled from 6 to 2: all metrics below target"}


def test_victims_order_puts_error_members_after_unplaced_ones():
    rows = [{"uuid": "a", "state": states.ACTIVE, "host": "h1"},
            {"uuid": "b", "state": states.ERROR, "host": None},
            {"uuid": "c", "state": states.BUILDING, "host": "h2"},
            {"uuid": "d", "state": states.SCHEDULING, "host": None},
            {"uuid": "e", "state": states.ACTIVE, "host": "h2"},
            {"uuid": "f", "state": states.ACTIVE, "host": "h3"}]
    assert [r["uuid"] for r in group_members.victims(rows, 6)] == ["d", "b", "c", "e", "f", "a"]
    assert [r["uuid"] for r in group_members.victims(rows, 2)] == ["d", "b"]
    assert group_members.victims(rows, 0) == []


# -- replacing members ---------------------------------------------------------------------------


def test_error_members_are_replaced_with_a_doubling_back_off(database, scheduler, metrics, controller, clock):
    _group(database, desired=2)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    failed = _set(database, "web-2", states.ERROR)
    result = controller.sync_once(clock.at(15))[0]
    assert result.deleted == (failed,) and _names(database, result.created) == ["web-2"]
    group = database.get_scaling_group("g1")
    assert (group["replace_failures"], group["replace_after"]) == (1, "2026-12-01T12:00:25.000000Z")

    def fail_again(second: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        uuid = _set(database, "web-2", states.ERROR)
        result = controller.sync_once(clock.at(second))[0]
        assert result.desired == 2
        return (uuid,), result.deleted

    failed, deleted = fail_again(20)  # 10 s back-off: not before 25
    assert deleted == () and database.get_instance(failed[0])["state"] == states.ERROR
    assert controller.sync_once(clock.at(25))[0].deleted == failed  # replaced; 20 s now
    failed, deleted = fail_again(40)
    assert deleted == ()
    assert controller.sync_once(clock.at(45))[0].deleted == failed
    group = database.get_scaling_group("g1")
    assert (group["replace_failures"], group["replace_after"]) == (3, "2026-12-01T12:01:25.000000Z")
    assert group["status"]["replacing"] == {"failures": 3, "next_at": "2026-12-01T12:01:25.000000Z"}

    _run(database, metrics, cpu=0.5)  # the replacement came up: the back-off starts again
    controller.sync_once(clock.at(50))
    group = database.get_scaling_group("g1")
    assert (group["replace_failures"], group["replace_after"]) == (0, None)


def test_a_group_far_below_its_count_grows_a_step_a_sync(database, scheduler, metrics, clock):
    controller = _controller(database, scheduler, metrics, clock, max_new_members=4)
    _group(database, desired=10, min=10)
    first = controller.sync_once(clock.at(0))[0]
    assert len(first.created) == 4 and len(_members(database)) == 4
    status = database.get_scaling_group("g1")["status"]
    assert status["pending"] == {"count": 6, "reason": "at most 4 new members a sync "
                                                       "([scaling] max_new_members_per_sync)"}
    _run(database, metrics, cpu=0.5)
    assert len(controller.sync_once(clock.at(15))[0].created) == 4
    _run(database, metrics, cpu=0.5)
    assert len(controller.sync_once(clock.at(30))[0].created) == 2
    assert "pending" not in database.get_scaling_group("g1")["status"]


def test_a_group_the_fleet_refuses_creates_nothing_while_its_error_members_wait(
        database, scheduler, metrics, clock):
    controller = _controller(database, scheduler, metrics, clock, max_new_members=4)
    _group(database, desired=10, min=10)
    controller.sync_once(clock.at(0))
    for name in ("web-1", "web-2"):
        _set(database, name, states.ACTIVE, host="h1")
    for name in ("web-3", "web-4"):
        _set(database, name, states.ERROR)  # no room
    replaced = controller.sync_once(clock.at(15))[0]  # the first replacement is due at once
    assert len(replaced.deleted) == 2 and len(replaced.created) == 4  # 2 replacements, 2 new: the step
    for member in _members(database):
        if member["state"] == states.SCHEDULING:
            database.update_instance(member["uuid"], {"state": states.ERROR})
    waiting = controller.sync_once(clock.at(20))[0]  # their back-off runs to 25 s
    assert (waiting.created, waiting.deleted) == ((), ())
    status = database.get_scaling_group("g1")["status"]
    assert status["pending"] == {"count": 4, "reason": "4 ERROR member(s) wait for their replacement"}
    builds = len(scheduler.builds)
    for second in range(21, 25):
        controller.sync_once(clock.at(second))
    assert len(scheduler.builds) == builds  # nothing cast until the back-off ends
    assert len(controller.sync_once(clock.at(25))[0].created) == 4


def test_a_group_stored_with_a_max_above_max_members_is_held_to_it(database, scheduler, metrics, clock,
                                                                   caplog):
    controller = _controller(database, scheduler, metrics, clock, max_members=3)
    _group(database, desired=5, min=5, max=8)  # written before the bound was lowered
    result = controller.sync_once(clock.at(0))[0]
    assert result.desired == 3 and len(result.created) == 3
    assert "Scaling group web has max 8, above [scaling] max_members: held to 3 members" in caplog.text


def test_the_back_off_is_capped():
    assert [group_members.replace_delay(n, 10, 300) for n in range(7)] == [10, 20, 40, 80, 160, 300, 300]


def test_a_member_deleted_by_hand_is_replaced(database, scheduler, metrics, controller, clock):
    _group(database, desired=3)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    gone = _set(database, "web-2", states.DELETED)
    result = controller.sync_once(clock.at(15))[0]
    assert result.desired == 3 and result.deleted == ()
    assert _names(database, result.created) == ["web-2"] and gone not in result.created
    assert len(_members(database)) == 3


# -- several controllers ------------------------------------------------------------------------


def test_each_group_is_synced_by_one_controller_and_taken_over_when_its_lease_ends(
        conf, database, scheduler, metrics, clock):
    _group(database, "g1", "web", desired=2)
    _group(database, "g2", "api", desired=3)
    first = _controller(database, scheduler, metrics, clock, "sched-a", max_groups=1)
    other_db = _database(conf, clock)
    second = _controller(other_db, scheduler, metrics, clock, "sched-b")
    try:
        assert [r.uuid for r in first.sync_once(clock.at(0))] == ["g1"]
        assert [r.uuid for r in second.sync_once(clock.at(1))] == ["g2"]
        assert [r.uuid for r in second.sync_once(clock.at(10))] == ["g2"]  # g1 held by sched-a till 15
        # sched-a stops syncing; its lease ends at 15
        assert [r.uuid for r in second.sync_once(clock.at(16))] == ["g1", "g2"]
        assert len(database.list_scaling_group_members("g1", include_deleted=True)) == 2
        assert len(database.list_scaling_group_members("g2", include_deleted=True)) == 3
        assert len(scheduler.builds) == len(set(scheduler.builds)) == 5
    finally:
        other_db.dispose()


def test_a_controller_that_died_before_casting_leaves_the_builds_to_the_next(
        conf, database, scheduler, metrics, clock):
    _group(database, desired=3)
    first = _controller(database, scheduler, metrics, clock, "sched-a", cast_grace_s=30)
    scheduler.die_on_build = True
    with pytest.raises(Died):
        first.sync_once(clock.at(0))  # committed, then died before its first cast
    scheduler.die_on_build = False
    written = _members(database)
    assert len(written) == 3 and scheduler.builds == []
    other_db = _database(conf, clock)
    second = _controller(other_db, scheduler, metrics, clock, "sched-b", cast_grace_s=30)
    try:
        assert second.sync_once(clock.at(10)) == []  # still sched-a's
        [result] = second.sync_once(clock.at(15))
        assert (result.outcome, result.created, result.recast) == (SYNCED, (), ())  # not yet 30 s old
        [result] = second.sync_once(clock.at(30))
        assert sorted(result.recast) == sorted(m["uuid"] for m in written)
        assert sorted(scheduler.builds) == sorted(m["uuid"] for m in written)
        [result] = second.sync_once(clock.at(45))
        assert result.recast == ()  # each recast waits a grace period again
        assert len(database.list_scaling_group_members("g1", include_deleted=True)) == 3
    finally:
        other_db.dispose()


def test_a_controller_whose_lease_was_taken_over_writes_and_casts_nothing(
        conf, database, scheduler, metrics, clock):
    _group(database, desired=3)
    first = _controller(database, scheduler, metrics, clock, "sched-a")
    [claimed] = database.claim_scaling_groups("sched-a", clock.at(0), 15, 10)
    other_db = _database(conf, clock)
    second = _controller(other_db, scheduler, metrics, clock, "sched-b")
    try:
        [taken] = second.sync_once(clock.at(20))  # sched-a stalled past its lease
        assert len(taken.created) == 3
        result = first.sync_group(claimed, clock.at(21))
        assert (result.outcome, result.created, result.deleted) == (LOST, (), ())
        assert len(database.list_scaling_group_members("g1", include_deleted=True)) == 3
        assert scheduler.builds == list(taken.created)
    finally:
        other_db.dispose()


# -- paused and deleted groups ------------------------------------------------------------------


@pytest.mark.parametrize("paused, desired", [(True, 2), (False, 0)])
def test_a_paused_group_is_left_alone_but_its_status(database, scheduler, metrics, controller, clock,
                                                     paused, desired):
    _group(database, desired=2)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=1.0)
    _set(database, "web-1", states.ERROR)
    database.update_scaling_group("g1", {"paused": paused, "desired": desired})
    scheduler.builds.clear()
    [result] = controller.sync_once(clock.at(15))
    assert result.outcome == PAUSED and (result.created, result.deleted) == ((), ())
    group = database.get_scaling_group("g1")
    assert group["desired"] == desired and scheduler.builds == []
    assert group["status"]["paused"] is True and group["status"]["members"] == {"ACTIVE": 1, "ERROR": 1}
    assert group["status"]["limited_by"] == ("Paused" if paused else "ScalingDisabled")
    assert len(database.scaling_group_history("g1")["recommendations"]) == 1  # the first sync's only


def test_a_deleted_groups_members_are_deleted_then_the_group_removed(
        database, scheduler, metrics, controller, clock):
    _group(database, desired=2)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    uuids = {m["uuid"] for m in _members(database)}
    assert database.delete_scaling_group("g1") is False
    [result] = controller.sync_once(clock.at(15))
    assert result.outcome == REMOVED and set(result.deleted) == set(scheduler.deletes) == uuids
    with pytest.raises(db_api.NotFound):
        database.get_scaling_group("g1")


def test_a_deleted_group_waits_for_its_members_to_go(database, scheduler, metrics, controller, clock):
    _group(database, desired=1)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    database.delete_scaling_group("g1")
    slow = []
    scheduler.delete_instance = slow.append  # type: ignore[method-assign]
    controller = _controller(database, scheduler, metrics, clock)
    [result] = controller.sync_once(clock.at(15))
    assert result.outcome == DELETING and result.deleted == tuple(slow)
    assert database.get_instance(slow[0])["state"] == states.DELETING
    database.update_instance(slow[0], {"state": states.DELETED})
    assert controller.sync_once(clock.at(30))[0].outcome == REMOVED


def test_history_is_pruned_past_the_longest_window_and_period(database, scheduler, metrics, controller,
                                                               clock):
    _group(database, desired=2, behavior={"scale_down": {"stabilization_window_s": 30}})
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    controller.sync_once(clock.at(15))
    controller.sync_once(clock.at(61))  # horizon 30 + 15 s: the records of 0 and 15 are gone
    assert [r["recorded_at"] for r in database.scaling_group_history("g1")["recommendations"]] == [
        "2026-12-01T12:01:01.000000Z"]


def test_a_bad_template_creates_nothing_and_says_why(database, scheduler, controller, clock):
    database.create_scaling_group("g1", "web", {"max": 3}, {"flavor_name": "m9.huge"}, 2)
    [result] = controller.sync_once(clock.at(0))
    assert result.created == () and scheduler.builds == []
    assert "no flavor named 'm9.huge'" in database.get_scaling_group("g1")["status"]["template_error"]


def test_members_boot_the_image_the_template_names(database, scheduler, controller, clock):
    database.create_scaling_group("g1", "web", {"max": 3}, {"flavor_name": "m1.small", "image": "busy"}, 1)
    database.create_scaling_group("g2", "api", {"max": 3}, {"flavor_name": "m1.small"}, 1)
    created = {}
    for result in controller.sync_once(clock.at(0)):
        [created[result.uuid]] = result.created
    assert database.get_instance(created["g1"])["request_spec"]["image"] == {"id": "busy", "properties": {}}
    assert database.get_instance(created["g2"])["request_spec"]["image"] == {"properties": {}}


def test_members_get_the_stored_flavor_the_template_names_until_it_is_deleted(database, scheduler,
                                                                               controller, clock):
    database.create_flavor({"name": "web.cpu", "memory_mb": 3072, "root_gb": 5, "ephemeral_gb": 0,
                            "vcpus": 3, "extra_specs": {"hw:cpu_policy": "dedicated"}})
    database.create_scaling_group("g1", "web", {"max": 3}, {"flavor_name": "web.cpu"}, 1)
    [result] = controller.sync_once(clock.at(0))
    [member] = result.created
    stored = database.get_instance(member)
    assert (stored["flavor_name"], stored["memory_mb"], stored["vcpus"]) == ("web.cpu", 3072, 3)
    assert stored["request_spec"]["instance_type"]["extra_specs"] == {"hw:cpu_policy": "dedicated"}

    database.delete_flavor("web.cpu")
    database.update_scaling_group("g1", {"desired": 2})
    [result] = controller.sync_once(clock.at(15))
    assert result.created == ()
    assert "no flavor named 'web.cpu'" in database.get_scaling_group("g1")["status"]["template_error"]


# -- what the scale events say -------------------------------------------------------------------


def test_scale_events_say_which_metric_asked_for_more(database, scheduler, metrics, controller, clock):
    _group(database, "g1", "web", desired=2,
           metrics=[{"type": "instance", "name": "rps", "target_average": 100}])
    _group(database, "g2", "api", desired=2,
           metrics=[{"type": "external", "name": "queue:jobs", "target_value": 30}])
    controller.sync_once(clock.at(0))
    for group in ("g1", "g2"):
        _run(database, metrics, cpu=0.5, group=group)
    for member in _members(database, "g1"):
        metrics.set_usage(member["uuid"], rps=120)
    metrics.set_external("queue:jobs", 300)
    controller.sync_once(clock.at(15))
    reasons = {uuid: database.scaling_group_history(uuid)["scale_events"][-1]["reason"]
               for uuid in ("g1", "g2")}
    assert reasons == {"g1": "scaled from 2 to 3: rps average 120 above target 100",
                       "g2": "scaled from 2 to 6: queue:jobs value 300 above target 30"}  # 4 more at most


def test_a_count_above_max_is_brought_back_and_says_so(database, scheduler, metrics, controller, clock):
    _group(database, desired=5, max=20)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.5)
    database.update_scaling_group("g1", {"spec": {"min": 1, "max": 3, "metrics": CPU_50}})
    [result] = controller.sync_once(clock.at(15))
    assert result.desired == 3 and len(result.deleted) == 2
    assert database.get_scaling_group("g1")["status"]["events"][-1]["reason"] == (
        "scaled from 5 to 3: the desired count was above max")


# -- many groups ------------------------------------------------------------------------------


def test_groups_synced_together_each_keep_their_compare_and_set(database, scheduler, metrics, controller,
                                                               clock, monkeypatch):
    monkeypatch.setattr("scheduler.scaling.controller.SYNC_CHUNK", 2)
    for number in range(5):
        _group(database, f"g{number}", f"web{number}", desired=2)
    read = database.read_scaling_syncs

    def changed_meanwhile(uuids):
        if "g3" in uuids:
            database.update_scaling_group("g3", {"desired": 1})  # an operator, between claim and write
        return read(uuids)

    database.read_scaling_syncs = changed_meanwhile  # type: ignore[method-assign]
    results = controller.sync_once(clock.at(0))
    assert [(r.uuid, r.outcome) for r in results] == [
        ("g0", SYNCED), ("g1", SYNCED), ("g2", SYNCED), ("g3", LOST), ("g4", SYNCED)]
    assert _members(database, "g3") == [] and database.get_scaling_group("g3")["desired"] == 1
    for number in (0, 1, 2, 4):
        assert len(_members(database, f"g{number}")) == 2
    assert sorted(scheduler.builds) == sorted(u for r in results for u in r.created)
    assert len(scheduler.builds) == 8


def test_one_groups_failed_write_fails_that_group_only(database, scheduler, metrics, controller, clock,
                                                      monkeypatch):
    _group(database, "g1", "web", desired=1)
    _group(database, "g2", "api", desired=1)
    database.create_instances([{"uuid": "7a0b9a52-9b4e-4d3c-9d10-000000000001", "memory_mb": 1, "vcpus": 1}])
    uuids = iter(["7a0b9a52-9b4e-4d3c-9d10-000000000001", "7a0b9a52-9b4e-4d3c-9d10-000000000002"])
    monkeypatch.setattr("scheduler.scaling.controller.uuidlib.uuid4", lambda: next(uuids))
    first, second = controller.sync_once(clock.at(0))
    assert (first.uuid, first.outcome) == ("g1", FAILED) and "exist already" in first.error
    assert (second.uuid, second.outcome) == ("g2", SYNCED)
    assert second.created == ("7a0b9a52-9b4e-4d3c-9d10-000000000002",)
    assert _members(database, "g1") == [] and scheduler.builds == list(second.created)


def test_show_keeps_the_last_scale_events_an_hour_though_the_windows_no_longer_read_them(
        database, scheduler, metrics, controller, clock):
    _group(database, desired=2)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.9)
    controller.sync_once(clock.at(15))  # 2 -> 4
    _run(database, metrics, cpu=0.5)
    for second in range(30, 3600, 300):  # steady at 50 %: no event, the horizon (315 s) long past
        controller.sync_once(clock.at(second))
    reasons = [e["reason"] for e in database.get_scaling_group("g1")["status"]["events"]]
    assert reasons == ["scaled from 2 to 4: cpu utilization 90% of requests above target 50%"]
    controller.sync_once(clock.at(3616))  # the event is an hour old: pruned, and no longer shown
    assert database.get_scaling_group("g1")["status"]["events"] == []
    assert database.scaling_group_history("g1")["scale_events"] == []


def test_a_count_raised_to_min_says_so_not_that_a_metric_below_target_asked(
        database, scheduler, metrics, controller, clock):
    _group(database, desired=2, max=20)
    controller.sync_once(clock.at(0))
    _run(database, metrics, cpu=0.47)  # 47 % against 50 %: within tolerance, the metric asks for 2
    database.update_scaling_group("g1", {"spec": {"min": 4, "max": 20, "metrics": CPU_50}})
    [result] = controller.sync_once(clock.at(15))
    assert result.desired == 4
    assert database.get_scaling_group("g1")["status"]["events"][-1]["reason"] == (
        "scaled from 2 to 4: the desired count was below min")
