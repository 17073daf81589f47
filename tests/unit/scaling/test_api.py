"""The scaling groups' RPC endpoint (scheduler.scaling.api) on SQLite: what each method
writes and answers, every refusal (naming what is wrong, writing nothing), and show's
status as a controller's sync wrote it."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import kombu
import pytest

from scheduler import rpc, states
from scheduler.db.api import NotFound
from scheduler.exception import InvalidRequest
from scheduler.scaling.api import MAX_NAME, UPDATE_ATTEMPTS, ScalingGroupEndpoint, check_spec
from scheduler.scaling.controller import PAUSED, REMOVED, SYNCED
from scheduler.scaling.service import BrokerQueues
from tests.unit.scaling.api_world import CPU_50, SPEC, TEMPLATE, World, clock_fixture, world_fixture  # noqa: F401

SERVER_GROUP = "5b1c1bde-8d8e-4c5e-9f0e-2f4d0c0a7e11"


def refused(world: World, call: Any, message: str) -> None:
    """``call()`` is refused with ``message`` (its start) and changes nothing."""
    before = world.snapshot()
    with pytest.raises(InvalidRequest) as caught:
        call()
    assert str(caught.value).startswith(message), str(caught.value)
    assert world.snapshot() == before


# -- create ------------------------------------------------------------------------------------


def test_create_stores_the_group_as_given_with_desired_at_min(world):
    world.db.create_server_group(SERVER_GROUP, "spread", "anti-affinity")
    spec = {"min": 2, "max": 10, "metrics": CPU_50, "tolerance": 0.2}
    template = {"flavor_name": "m1.small", "server_group_uuid": SERVER_GROUP, "availability_zone": "nova",
                "scheduler_hints": {"query": '[">=", "$free_ram_mb", 1024]'}}
    created = world.api.create_scaling_group({"project_id": "p1"}, " web ", spec, template)
    assert (created["name"], created["desired"], created["project_id"]) == ("web", 2, "p1")
    assert created["state"] == "active" and created["status"] is None and created["paused"] is False
    assert created["message"] == ("scaling group web created: the controller brings it to 2 members at its "
                                  "next sync")
    stored = world.db.get_scaling_group(created["uuid"])
    assert stored["spec"] == spec and stored["template"] == template and stored["desired"] == 2
    assert stored["last_synced_at"] is None and stored["deleted_at"] is None


def test_create_warns_when_instances_outside_the_group_carry_its_members_names(world):
    import uuid as uuidlib

    for name, state in (("web-1", "ACTIVE"), ("web-2", "ACTIVE"), ("web-9", "DELETED"), ("web-01", "ACTIVE"),
                        ("web-x", "ACTIVE"), ("webby-1", "ACTIVE")):
        world.db.create_instances([{"uuid": str(uuidlib.uuid4()), "state": state, "display_name": name}])
    created = world.create("web")
    assert created["warning"] == (
        "instances outside the group already carry the names its members get (web-1, web-2...): web-1, "
        "web-2; a command naming web-1 will be refused as ambiguous once the group has a member of that "
        "name: name the group otherwise, or use UUIDs")
    assert "): webby-1; a command naming webby-1 " in world.create("webby")["warning"]
    assert "warning" not in world.create("api")


def test_create_takes_desired_and_the_project_given(world):
    created = world.create(desired=5, project_id="p2")
    assert (created["desired"], created["project_id"]) == (5, "p2")


def test_create_takes_any_stored_flavor(world):
    world.db.create_flavor({"name": "web.big", "memory_mb": 2048, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 2,
                            "extra_specs": {}})
    created = world.create(template={"flavor_name": "web.big"}, desired=1)
    assert world.sync(0).outcome == SYNCED
    [member] = world.db.list_scaling_group_members(created["uuid"])
    assert (member["flavor_name"], member["memory_mb"], member["vcpus"]) == ("web.big", 2048, 2)


def test_a_created_group_gets_its_members_from_the_controller(world):
    created = world.create(desired=3)
    assert world.sync(0).outcome == SYNCED
    members = world.db.list_scaling_group_members(created["uuid"])
    assert sorted(m["display_name"] for m in members) == ["web-1", "web-2", "web-3"]
    assert world.builds == [m["uuid"] for m in members]


@pytest.mark.parametrize("name, message", [
    ("", "scaling group name must be a non-empty string of at most"),
    ("   ", "scaling group name must be a non-empty string of at most"),
    ("x" * (MAX_NAME + 1), f"scaling group name must be a non-empty string of at most {MAX_NAME} characters"),
    (7, "scaling group name must be a non-empty string"),
    ("we\tb", "scaling group name 'we\\tb': must be printable text"),
    (str(uuidlib.UUID(int=5)),
     "scaling group name '00000000-0000-0000-0000-000000000005': must not be a UUID"),
])
def test_create_refuses_a_bad_name(world, name, message):
    refused(world, lambda: world.create(name=name), message)


@pytest.mark.parametrize("spec, message", [
    ({"min": 1}, "spec.max: is required"),
    ({"max": 0}, "spec.max: must be a whole number from 1 to 2147483647, got 0"),
    ({"min": 5, "max": 3}, "spec.min: must not be above max (3), got 5"),
    ({"max": 3, "size": 2}, "spec.size: unknown key"),
    ({"max": 3, "metrics": []}, "spec.metrics: must list at least one metric"),
    ({"max": 3, "metrics": [{"type": "resource", "name": "disk", "target_utilization": 5}]},
     "spec.metrics[0].name: must be one of cpu, memory"),
    ({"max": 3, "metrics": [{"type": "instance", "name": "rps", "target_value": 5}]},
     "spec.metrics[0].target_value: not a target of a instance metric"),
    ({"max": 3, "metrics": [{"type": "instance", "name": "rps", "target_average": 0}]},
     "spec.metrics[0].target_average: must be a number above 0, got 0"),
    ({"max": 3, "tolerance": -0.5}, "spec.tolerance: must be a number >= 0, got -0.5"),
    ({"max": 3, "behavior": {"scale_up": {"select_policy": "most"}}},
     "spec.behavior.scale_up.select_policy: must be one of max, min, disabled"),
    ({"max": 3, "metrics": [{"type": "external", "name": "jobs", "target_value": 5}]},
     "spec.metrics[0].name: external metric 'jobs': Berth reads queue:<queue name>"),
    ({"max": 2**31}, "spec.max: must be a whole number from 1 to 2147483647, got 2147483648"),
    ({"max": 10**400}, "spec.max: must be a whole number from 1 to 2147483647, got 1000000000"),
    ({"max": 3, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 10**400}]},
     "spec.metrics[0].target_utilization: must be a whole number from 1 to 2147483647 (percent)"),
    ({"max": 3,
      "behavior": {"scale_up": {"policies": [{"type": "percent", "value": 10**400, "period_s": 15}]}}},
     "spec.behavior.scale_up.policies[0].value: must be a whole number from 1 to 2147483647"),
    ({"min": 0, "max": 3}, "spec.min: 0 needs an external metric"),
    ([3], "spec: must be an object"),
])
def test_create_refuses_a_bad_spec(world, spec, message):
    refused(world, lambda: world.api.create_scaling_group({}, "web", spec, TEMPLATE), message)


def test_a_max_above_max_members_is_refused_naming_the_option(world, conf):
    message = ("spec.max: must be at most 1000 ([scaling] max_members, the most members a group may have), "
               "got 5000")
    refused(world, lambda: world.api.create_scaling_group({}, "web", {"min": 5000, "max": 5000}, TEMPLATE),
            message)
    world.api.create_scaling_group({}, "web", {"max": 1000}, TEMPLATE)
    refused(world, lambda: world.api.update_scaling_group({}, "web", {"max": 1001}), message[:50])
    conf.set_override("max_members", 5000, group="scaling")
    assert world.api.update_scaling_group({}, "web", {"max": 5000})["spec"]["max"] == 5000


def test_a_worker_pool_on_a_queue_may_have_no_member():
    queue = {"type": "external", "name": "queue:jobs", "target_average": 20}
    assert check_spec({"min": 0, "max": 5, "metrics": [queue]}).min == 0


@pytest.mark.parametrize("template, message", [
    ("m1.small", "template: must be an object, got str"),
    ({"flavor_name": "m9.huge"}, "template.flavor_name: no flavor named 'm9.huge'"),
    ({"flavor": "m1.small"}, "template: unknown key(s) flavor"),
    ({}, "template: give flavor_name or the sizes"),
    ({"memory_mb": 0, "vcpus": 1}, "template: request_spec.instance_type.memory_mb"),
    ({"flavor_name": "m1.small", "server_group_uuid": "spread"},
     "template.server_group_uuid: must be a UUID, got 'spread'"),
    ({"flavor_name": "m1.small", "server_group_uuid": SERVER_GROUP},
     f"template.server_group_uuid: no server group {SERVER_GROUP}"),
    ({"flavor_name": "m1.small", "scheduler_hints": {"group": SERVER_GROUP}},
     "template.scheduler_hints.group: give the server group as template.server_group_uuid"),
    ({"flavor_name": "m1.small", "scheduler_hints": {"no_such_hint": "1"}},
     "template: no installed filter or weigher reads scheduler hint no_such_hint"),
    ({"flavor_name": "m1.small", "scheduler_hints": {"same_host": SERVER_GROUP}},
     f"template: Instance {SERVER_GROUP} does not exist (scheduler hint same_host)"),
    ({"flavor_name": "m1.small", "availability_zone": "nosuchzone"},
     "template.availability_zone: no availability zone 'nosuchzone'; known: nova (a zone is"),
    ({"flavor_name": "m1.small", "image": ""}, "template.image: must be an image's name"),
    ({"flavor_name": "m1.small", "image": 7}, "template.image: must be an image's name"),
    ({"flavor_name": "m1.small", "image": " berth-test"}, "template.image: must be an image's name"),
])
def test_create_refuses_a_bad_template(world, template, message):
    refused(world, lambda: world.api.create_scaling_group({}, "web", SPEC, template), message)


def test_a_zone_of_an_aggregate_is_known(world):
    world.db.create_aggregate("rack-1", "az-east", {"availability_zone": "az-east"})
    created = world.create(template={"flavor_name": "m1.small", "availability_zone": "az-east"})
    assert created["template"]["availability_zone"] == "az-east"


def test_create_refuses_a_server_group_policy_no_enabled_filter_enforces(world):
    world.api._conf.set_override("enabled_filters", ["ComputeFilter"], group="filter_scheduler")
    world.db.create_server_group(SERVER_GROUP, "spread", "anti-affinity")
    template = {"flavor_name": "m1.small", "server_group_uuid": SERVER_GROUP}
    refused(world, lambda: world.create(template=template),
            f"template: server group {SERVER_GROUP} has policy anti-affinity, which ")


@pytest.mark.parametrize("desired, message", [
    (30, "desired: must be within min..max (1..20), got 30"),
    (0, "desired: must be within min..max (1..20), got 0"),
    (-1, "desired: must be a whole number of at least 0, got -1"),
    ("3", "desired: must be a whole number of at least 0, got '3'"),
])
def test_create_refuses_desired_outside_min_max(world, desired, message):
    refused(world, lambda: world.create(desired=desired), message)


def test_create_refuses_a_name_taken_even_by_a_group_being_deleted(world):
    created = world.create()
    refused(world, world.create, "a scaling group named 'web' exists already")
    world.sync(0)  # it has members now: a delete marks it
    world.api.delete_scaling_group({}, "web")
    assert world.db.get_scaling_group(created["uuid"])["deleted_at"] is not None
    refused(world, world.create, "a scaling group named 'web' exists already (or is being deleted)")


def test_create_refuses_a_bad_project(world):
    refused(world, lambda: world.create(project_id=""), "project_id must be a non-empty string")


# -- list and show -----------------------------------------------------------------------------


def test_list_shows_every_group_by_name_with_its_members_counted_by_state(world):
    web = world.create("web", desired=2)
    world.create("api", desired=1)
    world.sync_all(0)
    world.run(web["uuid"], cpu=0.5)
    listed = world.api.list_scaling_groups({})
    assert [g["name"] for g in listed] == ["api", "web"]
    assert listed[0]["member_counts"] == {states.SCHEDULING: 1}
    assert listed[1]["member_counts"] == {states.ACTIVE: 2}
    assert [g["state"] for g in listed] == ["active", "active"]
    world.api.pause_scaling_group({}, "api")
    world.api.delete_scaling_group({}, "web")
    assert [g["state"] for g in world.api.list_scaling_groups({})] == ["paused", "deleting"]


def test_list_of_no_group_is_empty(world):
    assert world.api.list_scaling_groups({}) == []


def test_show_of_a_group_never_synced(world):
    created = world.create(desired=2)
    for reference in ("web", created["uuid"], created["uuid"].upper()):
        shown = world.api.show_scaling_group({}, reference)
        assert shown["uuid"] == created["uuid"] and shown["status"] is None
        assert shown["members"] == [] and shown["member_counts"] == {}
        assert shown["now"] == world.clock().isoformat()


@pytest.mark.parametrize("reference, message", [
    ("nosuch", "no scaling group named 'nosuch'"),
    (str(uuidlib.UUID(int=9)), "no scaling group 00000000-0000-0000-0000-000000000009"),
    ("", "give a scaling group's name or UUID"),
    (None, "give a scaling group's name or UUID"),
])
def test_show_of_an_unknown_group_is_refused(world, reference, message):
    world.create()
    refused(world, lambda: world.api.show_scaling_group({}, reference), message)


def test_show_of_a_synced_group_has_the_status_the_controller_wrote_and_the_members(world):
    created = world.create(desired=2)
    world.sync(0)
    world.run(created["uuid"], cpu=0.9)  # 90 % of a vCPU against 50 %: ceil(2 × 1.8) = 4
    assert world.sync(15).desired == 4
    shown = world.api.show_scaling_group({}, "web")
    status = shown["status"]
    assert status["metrics"] == [{"name": "cpu", "type": "resource", "current": 90,
                                  "target": {"utilization": 50}, "proposal": 4}]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("AbleToScale", "True", "SucceededRescale"), ("ScalingActive", "True", "ValidMetricFound"),
        ("ScalingLimited", "False", "DesiredWithinRange")]
    assert status["conditions"][0]["message"] == (
        "the scaling controller was able to update the desired count to 4")
    [recorded] = world.db.scaling_group_history(created["uuid"])["scale_events"]
    assert [(e["change"], e["reason"]) for e in status["events"]] == [(2, recorded["reason"])]
    assert recorded["reason"].startswith("scaled from 2 to 4")
    assert shown["desired"] == 4 and shown["member_counts"] == {states.ACTIVE: 2, states.SCHEDULING: 2}
    assert [(m["name"], m["state"], m["host"]) for m in shown["members"]] == [
        ("web-1", states.ACTIVE, "h-web-1"), ("web-2", states.ACTIVE, "h-web-2"),
        ("web-3", states.SCHEDULING, None), ("web-4", states.SCHEDULING, None)]
    assert set(shown["members"][0]) == {"uuid", "name", "state", "host", "created_at", "fault_reason"}
    assert shown["lease_owner"] == "sched-a"


# -- update ------------------------------------------------------------------------------------


def test_update_merges_the_changes_into_the_spec_and_writes_them(world):
    created = world.create(spec={"min": 1, "max": 20, "metrics": CPU_50, "tolerance": 0.2})
    rps = [{"type": "instance", "name": "rps", "target_average": 100.5}]
    behavior = {"scale_down": {"stabilization_window_s": 60}}
    changes = {"min": 2, "max": 8, "metrics": rps, "behavior": behavior, "tolerance": None}
    reply = world.api.update_scaling_group({}, "web", changes)
    assert reply["message"] == ("scaling group web updated: min 2, max 8, metrics set, tolerance default, "
                                "behavior set; desired 1 is outside 2..8: the controller sets it to 2 "
                                "at its next sync")
    stored = world.db.get_scaling_group(created["uuid"])
    assert stored["spec"] == {"min": 2, "max": 8, "metrics": rps, "behavior": behavior}
    assert stored["version"] == created["version"] + 1 and reply["version"] == stored["version"]
    assert world.sync(0).desired == 2  # brought within the new range


def test_update_of_desired_says_the_metrics_may_change_it_again(world):
    world.create()
    reply = world.api.update_scaling_group({}, "web", {"desired": 5})
    assert reply["desired"] == 5
    assert reply["message"] == ("scaling group web updated: desired 5; the controller brings the group to 5 "
                                "members at its next sync; its metrics and behavior may change the count "
                                "again from there")


def test_update_to_desired_0_pauses_the_group_and_says_so(world):
    created = world.create(desired=2)
    world.sync(0)
    reply = world.api.update_scaling_group({}, "web", {"desired": 0})
    assert reply["state"] == "paused (desired 0)"
    assert ("desired 0 with min 1 pauses the group: the controller leaves its members as they are"
            in reply["message"])
    assert world.sync(15).outcome == PAUSED
    assert len(world.db.list_scaling_group_members(created["uuid"])) == 2


def test_update_replaces_the_template_checked_as_create_checks_it(world):
    created = world.create()
    world.api.update_scaling_group({}, "web", {"template": {"memory_mb": 1024, "vcpus": 2}})
    assert world.db.get_scaling_group(created["uuid"])["template"] == {"memory_mb": 1024, "vcpus": 2}
    refused(world, lambda: world.api.update_scaling_group({}, "web", {"template": {"flavor_name": "m9"}}),
            "template.flavor_name: no flavor named 'm9'")


@pytest.mark.parametrize("changes, message", [
    ({}, "changes: give at least one of min, max, metrics, tolerance, behavior, template, desired"),
    ([("min", 2)], "changes: give at least one of"),
    ({"min": 2, "size": 3}, "changes: unknown key(s) size (known: min, max, metrics"),
    ({"min": 30}, "spec.min: must not be above max (20), got 30"),
    ({"max": None}, "spec.max: is required"),
    ({"max": 10, "tolerance": "x"}, 'spec.tolerance: must be a number >= 0, got "x"'),
    ({"min": 2, "metrics": [{"type": "pods", "name": "rps"}]}, "spec.metrics[0].type: must be one of"),
    ({"desired": 25}, "desired: must be within min..max (1..20) (or 0, to pause the group), got 25"),
    ({"max": 4, "desired": 5}, "desired: must be within min..max (1..4)"),
    ({"min": 3, "template": {"flavor_name": "m1.small", "server_group_uuid": SERVER_GROUP}},
     f"template.server_group_uuid: no server group {SERVER_GROUP}"),
])
def test_update_refuses_what_is_wrong_and_changes_nothing(world, changes, message):
    world.create()
    refused(world, lambda: world.api.update_scaling_group({}, "web", changes), message)


def test_update_of_an_unknown_group_is_refused(world):
    refused(world, lambda: world.api.update_scaling_group({}, "nosuch", {"min": 2}),
            "no scaling group named 'nosuch'")


def test_update_written_meanwhile_by_a_controllers_sync_is_read_and_written_again(world, monkeypatch):
    created = world.create(desired=2)
    write = world.db.update_scaling_group_if
    attempts = []

    def sync_first(uuid: str, version: int, values: dict[str, Any]) -> Any:
        attempts.append(version)
        if len(attempts) == 1:
            world.sync(0)  # claims the group and records its sync: the version moves on
        return write(uuid, version, values)

    monkeypatch.setattr(world.db, "update_scaling_group_if", sync_first)
    reply = world.api.update_scaling_group({}, "web", {"max": 10})
    assert len(attempts) == 2 and attempts[1] > attempts[0]
    stored = world.db.get_scaling_group(created["uuid"])
    assert stored["spec"]["max"] == 10 and reply["spec"]["max"] == 10
    assert stored["status"] is not None and stored["last_synced_at"] is not None  # the sync's write stays
    assert len(world.db.list_scaling_group_members(created["uuid"])) == 2


def test_update_always_written_meanwhile_is_refused_after_a_few_attempts(world, monkeypatch):
    created = world.create(desired=2)
    write = world.db.update_scaling_group_if
    attempts = []

    def others_first(uuid: str, version: int, values: dict[str, Any]) -> Any:
        attempts.append(version)
        world.db.update_scaling_group(uuid, {"desired": 3})  # another operator, every time
        return write(uuid, version, values)

    monkeypatch.setattr(world.db, "update_scaling_group_if", others_first)
    with pytest.raises(InvalidRequest, match=f"scaling group web was written by others {UPDATE_ATTEMPTS} "
                       "times while it was being updated; nothing changed, try again"):
        world.api.update_scaling_group({}, "web", {"max": 10})
    assert len(attempts) == UPDATE_ATTEMPTS
    assert world.db.get_scaling_group(created["uuid"])["spec"]["max"] == 20


# -- pause, resume, delete ---------------------------------------------------------------------


def test_pause_and_resume(world):
    created = world.create(desired=2)
    reply = world.api.pause_scaling_group({}, "web")
    assert reply["paused"] is True and reply["state"] == "paused"
    assert reply["message"] == ("scaling group web paused: the controller leaves its members as they are "
                                "until it is resumed")
    assert world.api.pause_scaling_group({}, "web")["message"] == "scaling group web is paused already"
    assert world.sync(0).outcome == PAUSED and world.builds == []
    reply = world.api.resume_scaling_group({}, created["uuid"])
    assert reply["paused"] is False
    assert reply["message"] == "scaling group web resumed: the controller syncs it again"
    assert world.api.resume_scaling_group({}, "web")["message"] == "scaling group web is not paused"
    assert world.sync(15).outcome == SYNCED and len(world.builds) == 2


def test_resume_of_a_group_paused_by_desired_0_starts_it_from_min(world):
    created = world.create(spec={"min": 2, "max": 5, "metrics": CPU_50})
    world.api.update_scaling_group({}, "web", {"desired": 0})
    reply = world.api.resume_scaling_group({}, "web")
    assert reply["message"] == ("scaling group web resumed: the controller syncs it again, from desired 2 "
                                "(its min; it was 0)")
    assert world.db.get_scaling_group(created["uuid"])["desired"] == 2


def test_delete_of_a_group_without_members_is_at_once(world):
    created = world.create()
    reply = world.api.delete_scaling_group({}, "web")
    assert reply == {"uuid": created["uuid"], "name": "web", "deleted": True,
                     "message": "scaling group web deleted"}
    with pytest.raises(NotFound):
        world.db.get_scaling_group(created["uuid"])


def test_delete_of_a_group_with_members_leaves_them_to_the_controller(world):
    created = world.create(desired=2)
    world.sync(0)
    reply = world.api.delete_scaling_group({}, "web")
    assert reply["deleted"] is False
    assert reply["message"] == ("scaling group web is being deleted: the controller deletes its 2 members, "
                                "then the group (its name stays taken until then)")
    assert world.api.show_scaling_group({}, "web")["state"] == "deleting"
    again = world.api.delete_scaling_group({}, "web")
    assert again["message"] == "scaling group web is being deleted already"
    for call in (lambda: world.api.update_scaling_group({}, "web", {"min": 2}),
                 lambda: world.api.pause_scaling_group({}, "web"),
                 lambda: world.api.resume_scaling_group({}, "web")):
        refused(world, call, "scaling group web is being deleted: it cannot be")
    assert world.sync(15).outcome == REMOVED
    assert len(world.deletes) == 2
    refused(world, lambda: world.api.show_scaling_group({}, created["uuid"]),
            f"no scaling group {created['uuid']}")
    assert world.create()["name"] == "web"  # the name is free again


def test_delete_of_an_unknown_group_is_refused(world):
    refused(world, lambda: world.api.delete_scaling_group({}, "nosuch"), "no scaling group named 'nosuch'")


def test_show_names_the_templates_server_group_and_says_when_it_is_gone(world):
    world.db.create_server_group(SERVER_GROUP, "spread", "anti-affinity")
    world.create(template={"flavor_name": "m1.small", "server_group_uuid": SERVER_GROUP})
    shown = world.api.show_scaling_group({}, "web")
    assert shown["server_group"] == {"uuid": SERVER_GROUP, "name": "spread", "policy": "anti-affinity"}
    world.db.delete_server_group(SERVER_GROUP)
    assert world.api.show_scaling_group({}, "web")["server_group"] == {"uuid": SERVER_GROUP, "missing": True}
    world.create("plain")
    assert world.api.show_scaling_group({}, "plain")["server_group"] is None


def test_an_external_metric_on_a_queue_the_broker_does_not_have_is_refused(world, conf):
    transport = rpc.get_transport(conf)
    queues = BrokerQueues(transport)
    world.api = ScalingGroupEndpoint(conf, world.db, queues)
    jobs = {"min": 1, "max": 3, "metrics": [{"type": "external", "name": "queue:jobs", "target_value": 5}]}
    message = ("spec.metrics[0].name: external metric 'queue:jobs': the scheduler's broker has no queue "
               "'jobs'; declare it first (the group scales on its depth)")
    try:
        refused(world, lambda: world.api.create_scaling_group({}, "workers", jobs, TEMPLATE), message)
        world.api.create_scaling_group({}, "web", {"max": 3}, TEMPLATE)
        set_jobs = {"metrics": jobs["metrics"]}
        refused(world, lambda: world.api.update_scaling_group({}, "web", set_jobs), message)
        with kombu.Connection("memory://") as conn:
            kombu.Queue("jobs", kombu.Exchange("jobs-x", type="direct"), routing_key="jobs")(conn).declare()
        assert world.api.create_scaling_group({}, "workers", jobs, TEMPLATE)["name"] == "workers"
        assert world.api.update_scaling_group({}, "web", set_jobs)["spec"]["metrics"] == jobs["metrics"]
    finally:
        queues.close()
        transport.cleanup()
