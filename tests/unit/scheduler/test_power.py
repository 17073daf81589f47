"""Stop, start and reboot on the scheduler (API 1.6), over memory:// and SQLite: each recorded by
compare-and-set and cast to the agent, refused with the reason otherwise (nothing changed, nothing
cast), the agents' updates moving the state only forward, SHUTOFF keeping the host's claim."""

import pytest

from scheduler import rpc
from scheduler.exception import InstanceNotFound, InvalidRequest, PowerRefused
from scheduler.manager import DELETED_BY_CLIENT
from tests.unit.scheduler.manager_world import HOSTS, casts, report, request

POWER = "CUSTOM_BERTH_POWER_CONTROL"


def active(world, memory_mb=1024):
    """An ACTIVE instance on h2 (the roomiest host), every host able to power instances."""
    manager, _, agents = world
    for host, ram in HOSTS.items():
        manager.report_resources({}, host, report(host, ram, traits=[POWER]))
    uuids, spec, props = request(memory_mb=memory_mb)
    manager.run_instance(rpc.Context({}), spec, props)
    assert casts(agents, 1)["h2"][0][0] == "run_instance"
    manager.instance_update({}, uuids[0], "h2", "BUILDING")
    manager.instance_update({}, uuids[0], "h2", "ACTIVE")
    for agent in agents.values():
        agent.calls.clear()
    return uuids[0]


def state(world, uuid):
    return world[1].get_instance(uuid)["state"]


def used_on_h2(world):
    return world[0].host_manager.get("h2").free_ram_mb


def test_stop_start_and_reboot_go_through_their_states_and_shutoff_keeps_the_claim(world):
    manager, _, agents = world
    uuid = active(world, memory_mb=2048)
    free = used_on_h2(world)

    assert manager.stop_instance({}, uuid)["state"] == "POWERING_OFF"
    assert state(world, uuid) == "POWERING_OFF"
    assert casts(agents, 1) == {"h2": [("power_off_instance", uuid)]}
    manager.instance_update({}, uuid, "h2", "SHUTOFF")
    assert state(world, uuid) == "SHUTOFF"
    assert used_on_h2(world) == free  # its claim kept
    [h2] = [h for h in manager.list_hosts({}) if h["host"] == "h2"]
    assert h2["running_vms"] == 1

    manager.instance_update({}, uuid, "h2", "ACTIVE")  # a late ACTIVE of its build: ignored
    assert state(world, uuid) == "SHUTOFF"
    assert manager.start_instance({}, uuid)["state"] == "POWERING_ON"
    manager.instance_update({}, uuid, "h2", "SHUTOFF")  # the stop's SHUTOFF again: ignored
    assert state(world, uuid) == "POWERING_ON"
    manager.instance_update({}, uuid, "h2", "ACTIVE")
    assert state(world, uuid) == "ACTIVE"

    assert manager.reboot_instance({}, uuid)["state"] == "REBOOTING"
    manager.instance_update({}, uuid, "h2", "ACTIVE")
    assert manager.reboot_instance({}, uuid, hard=True)["state"] == "REBOOTING"
    manager.instance_update({}, uuid, "h2", "ACTIVE")
    assert state(world, uuid) == "ACTIVE"
    assert casts(agents, 4)["h2"][1:] == [("power_on_instance", uuid), ("reboot_instance", uuid, False),
                                          ("reboot_instance", uuid, True)]
    assert used_on_h2(world) == free


@pytest.mark.parametrize(("verb", "in_state", "why"), [
    ("stop", "SHUTOFF", "it is SHUTOFF (stopped already); only an ACTIVE instance can be"),
    ("start", "ACTIVE", "it is ACTIVE (running already); only a SHUTOFF instance can be"),
    ("reboot", "SHUTOFF", "it is SHUTOFF (stopped already); only an ACTIVE instance can be"),
    ("stop", "MIGRATING", "it is MIGRATING (being moved)"),
    ("reboot", "BUILDING", "it is BUILDING (being built)"),
    ("start", "DELETING", "it is DELETING (being deleted)"),
    ("stop", "POWERING_ON", "it is POWERING_ON (being started)"),
    ("reboot", "REBOOTING", "it is REBOOTING (being rebooted)"),
])
def test_an_instance_in_another_state_is_refused_with_the_reason_and_nothing_changes(world, verb, in_state,
                                                                                       why):
    manager, database, agents = world
    uuid = active(world)
    database.update_instance(uuid, {"state": in_state})
    past = {"stop": "stopped", "start": "started", "reboot": "rebooted"}[verb]
    with pytest.raises(PowerRefused) as refused:
        getattr(manager, f"{verb}_instance")({}, uuid)
    assert str(refused.value).startswith(f"Instance {uuid} cannot be {past}: {why}")
    assert state(world, uuid) == in_state
    assert casts(agents, 0) == {}


def test_unknown_and_deleted_instances_are_not_found(world):
    manager, database, _ = world
    with pytest.raises(InstanceNotFound, match="No instance 00000000-0000-4000-8000-000000000009"):
        manager.stop_instance({}, "00000000-0000-4000-8000-000000000009")
    uuid = active(world)
    database.update_instance(uuid, {"state": "DELETED"})
    with pytest.raises(InstanceNotFound):
        manager.start_instance({}, uuid)
    with pytest.raises(InvalidRequest, match="stop_instance: instance_uuid: must be a UUID"):
        manager.stop_instance({}, "web-1")
    with pytest.raises(InvalidRequest, match="hard must be true or false"):
        manager.reboot_instance({}, uuid, hard="yes")


def test_a_host_whose_driver_cannot_power_instances_is_refused_before_anything_changes(world):
    manager, _, agents = world
    uuid = active(world)
    manager.report_resources({}, "h2", report("h2", HOSTS["h2"], used=1024, uuids=[uuid]))  # no trait
    with pytest.raises(PowerRefused) as refused:
        manager.stop_instance({}, uuid)
    assert str(refused.value) == (
        f"Instance {uuid} cannot be stopped: the driver of its host h2 does not power instances off and on "
        "(its agent does not report CUSTOM_BERTH_POWER_CONTROL: a driver without power_control, or an agent "
        "older than compute API 2.1)")
    assert state(world, uuid) == "ACTIVE"
    assert casts(agents, 0) == {}


def test_a_host_that_is_down_is_refused(world):
    manager, _, agents = world
    uuid = active(world)
    manager.report_resources({}, "h2", report("h2", HOSTS["h2"], traits=[POWER], stopped=True))
    with pytest.raises(PowerRefused, match=f"Instance {uuid} cannot be rebooted: its host h2 is down"):
        manager.reboot_instance({}, uuid)
    assert state(world, uuid) == "ACTIVE"
    assert casts(agents, 0) == {}


def test_a_shutoff_instance_is_deleted_as_any_other(world):
    manager, _, agents = world
    uuid = active(world)
    manager.stop_instance({}, uuid)
    manager.instance_update({}, uuid, "h2", "SHUTOFF")
    manager.delete_instance({}, uuid)
    assert state(world, uuid) == "DELETING"
    assert casts(agents, 2)["h2"] == [("power_off_instance", uuid),
                                      ("terminate_instance", uuid, DELETED_BY_CLIENT)]
    manager.instance_update({}, uuid, "h2", "DELETED")
    assert state(world, uuid) == "DELETED"


def test_an_agent_that_failed_a_power_action_puts_the_instance_in_error_with_its_reason(world):
    manager, database, _ = world
    uuid = active(world)
    manager.stop_instance({}, uuid)
    manager.instance_update({}, uuid, "h2", "ERROR", fault={"reason": "h2: power off failed: stuck"})
    row = database.get_instance(uuid)
    assert (row["state"], row["fault_reason"]) == ("ERROR", "h2: power off failed: stuck")


def test_a_scheduler_capped_below_the_compute_api_2_1_refuses_before_anything_changes(world, conf):
    manager, _, agents = world
    uuid = active(world)
    conf.set_override("compute", "2.0", "upgrade_levels")
    applier = manager._scheduling.applier
    from compute_agent.client import POWER_VERSION, ComputeClient
    from scheduler.planning.applier import POWER_VERSION as SCHEDULERS_POWER_VERSION

    assert SCHEDULERS_POWER_VERSION == POWER_VERSION
    applier._compute = ComputeClient(applier._compute._client.transport)
    with pytest.raises(PowerRefused, match=r"\[upgrade_levels\] compute caps this scheduler below 2\.1"):
        manager.stop_instance({}, uuid)
    assert state(world, uuid) == "ACTIVE"
    assert casts(agents, 0) == {}


def test_a_shutoff_instance_or_one_being_stopped_is_not_moved(world, parts):
    from scheduler.moves.planner import MoveRefused

    manager, _, agents = world
    uuid = active(world)
    manager.stop_instance({}, uuid)
    with pytest.raises(MoveRefused, match=f"Instance {uuid} cannot be migrated: it is POWERING_OFF, and only "
                                          "an ACTIVE instance"):
        parts.moves.migrate_instance({}, uuid)
    manager.instance_update({}, uuid, "h2", "SHUTOFF")
    with pytest.raises(MoveRefused, match="it is SHUTOFF, and only an ACTIVE instance"):
        parts.moves.resize_instance({}, uuid, {"memory_mb": 2048, "root_gb": 10, "vcpus": 2})
    assert state(world, uuid) == "SHUTOFF"
    assert casts(agents, 1) == {"h2": [("power_off_instance", uuid)]}


def test_a_guest_that_powered_itself_off_is_shutoff_with_its_claim_and_a_stops_late_word_is_not(world):
    manager, _, agents = world
    uuid = active(world, memory_mb=2048)
    free = used_on_h2(world)
    manager.instance_update({}, uuid, "h2", "SHUTOFF")  # a stop's word, no stop under way: ignored
    assert state(world, uuid) == "ACTIVE"

    manager.instance_update({}, uuid, "h2", "SHUTOFF", fault={"reason": "its guest powered itself off"})
    assert state(world, uuid) == "SHUTOFF"
    assert used_on_h2(world) == free  # its claim kept, as a stop's
    assert casts(agents, 0) == {}
    assert manager.start_instance({}, uuid)["state"] == "POWERING_ON"
    manager.instance_update({}, uuid, "h2", "ACTIVE")
    assert state(world, uuid) == "ACTIVE"
    manager.instance_update({}, uuid, "h1", "SHUTOFF", fault={"reason": "not its host"})
    assert state(world, uuid) == "ACTIVE"


def test_a_hard_reboot_boots_an_instance_in_error_on_its_host_again_and_a_soft_one_says_so(world):
    manager, database, agents = world
    uuid = active(world)
    manager.instance_update({}, uuid, "h2", "ERROR", fault={"reason": "its guest is gone"})
    with pytest.raises(PowerRefused) as refused:
        manager.reboot_instance({}, uuid)
    assert str(refused.value) == (f"Instance {uuid} cannot be rebooted: it is ERROR; only an ACTIVE instance "
                                  "can be; a hard reboot boots one in ERROR on its host again")
    assert manager.reboot_instance({}, uuid, hard=True)["state"] == "REBOOTING"
    assert casts(agents, 1) == {"h2": [("reboot_instance", uuid, True)]}
    manager.instance_update({}, uuid, "h2", "ACTIVE")
    assert state(world, uuid) == "ACTIVE"


def test_an_instance_in_error_that_was_never_built_cannot_be_rebooted(world):
    manager, database, agents = world
    uuid = active(world)
    database.update_instance(uuid, {"state": "ERROR", "host": None})
    with pytest.raises(PowerRefused) as refused:
        manager.reboot_instance({}, uuid, hard=True)
    assert str(refused.value) == (f"Instance {uuid} cannot be rebooted: it is on no host (it was never "
                                  "built); delete it")
    assert state(world, uuid) == "ERROR" and casts(agents, 0) == {}
