"""What the agent does with its driver's guests: the image a build names reaches the driver, and at
start the guests the driver finds gone are reported in ERROR with the reason, still held."""

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
