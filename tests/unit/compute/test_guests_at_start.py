"""What the agent does with its driver's guests: the image a build names reaches the driver, and at
start the guests the driver finds gone are reported in ERROR with the reason, still held; a guest that
powered itself off is SHUTOFF with the reason (ERROR under a scheduler of the previous release)."""

import logging
import threading

from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from compute_agent.manager import ComputeManager
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for


class GuestsDriver(drivers.FakeDriver):
    """Spawns what it is given; at start, finds gone the guests of ``gone``."""

    def __init__(self, conf, gone=()):
        super().__init__(conf)
        self.spawned = []
        self.gone = set(gone)
        self.attached = None

    def spawn(self, instance):
        self.spawned.append(instance)

    def attach(self, instances):
        self.attached = list(instances)
        return {uuid: "its guest is gone" for uuid in instances if uuid in self.gone}


def test_the_driver_builds_the_image_the_request_names(conf, transport, scheduler, agents):
    driver = GuestsDriver(conf)
    agents(driver=driver)
    instance = make_instance()
    spec, props = request_for(instance)
    spec["image"] = {"id": "berth-test", "properties": {"hw_architecture": "x86_64"}}
    ComputeClient(transport).run_instance({}, HOST, instance, spec, props)
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    assert driver.spawned[0]["image"] == {"id": "berth-test", "properties": {"hw_architecture": "x86_64"}}
    assert driver.spawned[0]["uuid"] == instance["uuid"]


def test_a_guest_gone_while_the_agent_was_away_is_in_error_and_still_held(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    first = agents()
    client = ComputeClient(transport)
    kept, gone = make_instance(), make_instance()
    for instance in (kept, gone):
        client.run_instance({}, HOST, instance, *request_for(instance))
    for instance in (kept, gone):
        wait_for(lambda i=instance: "ACTIVE" in scheduler.states(i["uuid"]), "ACTIVE")
    first.stop()

    driver = GuestsDriver(conf, gone=[gone["uuid"]])
    second = ComputeManager(conf, transport, host=HOST, driver=driver)
    second.start()
    try:
        assert sorted(driver.attached) == sorted([kept["uuid"], gone["uuid"]])
        wait_for(lambda: "ERROR" in scheduler.states(gone["uuid"]), "the lost guest in ERROR")
        assert [u[3] for u in scheduler.updates if u[0] == gone["uuid"] and u[2] == "ERROR"] == [
            {"reason": "its guest is gone"}]
        assert "ERROR" not in scheduler.states(kept["uuid"])
        assert second.store.get(gone["uuid"])["state"] == "ERROR"
        assert gone["uuid"] in second.tracker.instance_uuids()
    finally:
        second.stop()


class DyingDriver(drivers.FakeDriver):
    """Its guests run until the test says one died; a destroy that waits until the test lets it
    go, so that a check may fall in the middle of a delete."""

    def __init__(self, conf):
        super().__init__(conf)
        self.dead = set()
        self.destroying = threading.Event()
        self.may_finish = threading.Event()

    def lost(self, instances):
        return {uuid: "its guest is gone (killed)" for uuid in instances if uuid in self.dead}

    def destroy(self, instance):
        self.dead.add(instance["uuid"])  # its qemu ends first
        self.destroying.set()
        self.may_finish.wait(10)


def test_a_guest_that_dies_while_the_agent_runs_is_in_error_at_the_next_check(conf, transport, scheduler,
                                                                              agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    driver = DyingDriver(conf)
    agent = agents(driver=driver)
    client = ComputeClient(transport)
    dies, lives = make_instance(), make_instance()
    for instance in (dies, lives):
        client.run_instance({}, HOST, instance, *request_for(instance))
    for instance in (dies, lives):
        wait_for(lambda i=instance: "ACTIVE" in scheduler.states(i["uuid"]), "ACTIVE")
    agent.check_guests()
    assert "ERROR" not in scheduler.states(dies["uuid"])

    driver.dead.add(dies["uuid"])
    agent.check_guests()
    wait_for(lambda: "ERROR" in scheduler.states(dies["uuid"]), "the dead guest in ERROR")
    assert [u[3] for u in scheduler.updates if u[0] == dies["uuid"] and u[2] == "ERROR"] == [
        {"reason": "its guest is gone (killed)"}]
    assert agent.store.get(dies["uuid"])["state"] == "ERROR"
    assert dies["uuid"] in agent.tracker.instance_uuids()
    assert "ERROR" not in scheduler.states(lives["uuid"])


def test_a_guest_ended_by_its_delete_is_not_taken_for_lost(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    driver = DyingDriver(conf)
    agent = agents(driver=driver)
    client = ComputeClient(transport)
    instance = make_instance()
    client.run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    client.terminate_instance({}, HOST, instance["uuid"])
    assert driver.destroying.wait(10)
    agent.check_guests()  # its qemu is gone, its record not yet
    driver.may_finish.set()
    wait_for(lambda: "DELETED" in scheduler.states(instance["uuid"]), "DELETED")
    assert "ERROR" not in scheduler.states(instance["uuid"])


class PoweringOffDriver(drivers.FakeDriver):
    """Its guests run until the test says one powered itself off."""

    def __init__(self, conf):
        super().__init__(conf)
        self.off = set()

    def shut_down(self, instances):
        return {uuid: "its guest powered itself off" for uuid in instances if uuid in self.off}


def _one_active(conf, transport, scheduler, agents, driver):
    conf.set_override("report_interval", 3600, "compute_agent")
    agent = agents(driver=driver)
    instance = make_instance()
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    return agent, instance["uuid"]


def test_a_guest_that_powered_itself_off_is_shutoff_saying_so_and_still_held(conf, transport, scheduler,
                                                                             agents):
    driver = PoweringOffDriver(conf)
    agent, uuid = _one_active(conf, transport, scheduler, agents, driver)
    driver.off.add(uuid)
    agent.check_guests()
    wait_for(lambda: "SHUTOFF" in scheduler.states(uuid), "SHUTOFF")
    assert [u[3] for u in scheduler.updates if u[0] == uuid and u[2] == "SHUTOFF"] == [
        {"reason": "its guest powered itself off"}]
    assert agent.store.get(uuid)["state"] == "SHUTOFF"
    assert uuid in agent.tracker.instance_uuids()
    agent.check_guests()  # no longer ACTIVE: not asked again
    assert len([u for u in scheduler.updates if u[0] == uuid and u[2] == "SHUTOFF"]) == 1


def test_under_a_scheduler_of_the_previous_release_a_guest_that_powered_itself_off_is_in_error(
        conf, transport, scheduler, agents):
    conf.set_override("scheduler", "1.6", "upgrade_levels")
    driver = PoweringOffDriver(conf)
    agent, uuid = _one_active(conf, transport, scheduler, agents, driver)
    driver.off.add(uuid)
    agent.check_guests()
    wait_for(lambda: "ERROR" in scheduler.states(uuid), "ERROR")
    assert [u[3] for u in scheduler.updates if u[0] == uuid and u[2] == "ERROR"] == [
        {"reason": "its guest powered itself off"}]


class RefusingDriver(drivers.FakeDriver):
    def spawn(self, instance):
        raise drivers.BuildFailed("no image berth-nope in /srv/images")


def test_a_build_the_driver_fails_saying_why_is_logged_in_one_line_and_rescheduled(conf, transport, scheduler,
                                                                                  agents, caplog):
    agents(driver=RefusingDriver(conf))
    instance = make_instance()
    with caplog.at_level(logging.WARNING, logger="compute_agent.manager"):
        ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
        wait_for(lambda: scheduler.reschedules, "the build sent back")
    [said] = [r for r in caplog.records if r.getMessage().startswith(f"Build of {instance['uuid']} failed")]
    assert said.getMessage().endswith("failed: no image berth-nope in /srv/images")
    assert said.levelno == logging.WARNING and not said.exc_info  # no traceback
