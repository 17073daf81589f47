"""The agent over the memory:// transport, with a stub scheduler in the same process."""

import time
import uuid as uuidlib

import pytest

from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from compute_agent.instance_store import InstanceStore
from compute_agent.manager import ComputeManager
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for

rpc = pytest.importorskip("scheduler.rpc")


class CountingDriver(drivers.FakeDriver):
    def __init__(self, conf, fail=False):
        super().__init__(conf)
        self.fail = fail
        self.spawned = []
        self.destroyed = []

    def spawn(self, instance):
        self.spawned.append(instance["uuid"])
        super().spawn(instance)
        if self.fail:
            raise RuntimeError("the hypervisor said no")

    def destroy(self, instance):
        self.destroyed.append(instance["uuid"])


def sync(scheduler, client):
    """Cast a no-op terminate and wait for its answer: what the agent cast before has arrived."""
    marker = str(uuidlib.uuid4())  # an instance this agent never had
    client.terminate_instance({}, HOST, marker)
    wait_for(lambda: scheduler.states(marker) == ["DELETED"], "the sync marker")


def test_report_at_start(conf, scheduler, agents):
    conf.set_override("memory_mb", 4096, "fake")
    agents()
    report = wait_for(scheduler.last_report, "the first report")
    assert report["host"] == report["nodename"] == HOST
    assert report["hypervisor_type"] == "fake"
    assert report["memory_mb"] == 4096
    assert report["memory_mb_used"] == 512
    assert report["free_ram_mb"] == 3584
    assert report["instance_uuids"] == []
    assert report["started_at"].endswith("Z") and report["reported_at"].endswith("Z")


def test_build_goes_building_then_active(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    conf.set_override("build_time", 0.1, "fake")
    manager = agents()
    instance = make_instance(memory_mb=2048, root_gb=20, vcpus=2)
    spec, props = request_for(instance, limits={"memory_mb": 49152, "disk_gb": 1024, "vcpu": 256})
    ComputeClient(transport).run_instance({"request_id": "r1"}, HOST, instance, spec, props)
    uuid = instance["uuid"]
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    assert scheduler.states(uuid) == ["BUILDING", "ACTIVE"]
    assert manager.store.get(uuid)["state"] == "ACTIVE"
    # report_on_change: the claim reaches the scheduler without waiting an hour.
    report = wait_for(
        lambda: (r := scheduler.last_report()) and uuid in r["instance_uuids"] and r,
        "a report holding the instance",
    )
    assert report["memory_mb_used"] == 512 + 2048
    assert report["local_gb_used"] == 20
    assert report["vcpus_used"] == 2
    assert report["running_vms"] == 1
    assert scheduler.reschedules == []


def test_refused_claim_goes_back_to_the_scheduler(conf, transport, scheduler, agents):
    conf.set_override("memory_mb", 4096, "fake")
    manager = agents()
    instance = make_instance(memory_mb=8192)
    retry = {"num_attempts": 2, "hosts": [["agent-0", "agent-0"]]}
    spec, props = request_for(instance, make_instance(), limits={"memory_mb": 6144}, retry=retry)
    ComputeClient(transport).run_instance({}, HOST, instance, spec, props)
    wait_for(lambda: scheduler.reschedules, "the reschedule")
    [(spec2, props2)] = scheduler.reschedules
    assert spec2["instance_uuids"] == [instance["uuid"]]
    assert spec2["num_instances"] == 1
    assert spec2["instance_type"] == instance["flavor"]
    assert props2["retry"]["num_attempts"] == 2
    assert props2["retry"]["hosts"] == [["agent-0", "agent-0"], [HOST, HOST]]
    assert props2["retry"]["exc_reason"] == (
        f"{HOST}: Insufficient memory: requested 8192 MB, free 5632 MB of limit 6144 MB"
    )
    assert "limits" not in props2
    assert props2["scheduler_hints"] == {}
    assert instance["uuid"] not in manager.tracker
    assert manager.store.get(instance["uuid"]) is None
    assert scheduler.states(instance["uuid"]) == []


def test_refused_claim_without_retry_record(conf, scheduler, agents):
    manager = agents()
    instance = make_instance(vcpus=8)
    spec, props = request_for(instance, limits={"vcpu": 4})
    manager.run_instance({}, instance, spec, props)  # the endpoint never raises for this
    wait_for(lambda: scheduler.reschedules, "the reschedule")
    [(_, props2)] = scheduler.reschedules
    assert props2["retry"]["num_attempts"] == 1
    assert props2["retry"]["hosts"] == [[HOST, HOST]]
    assert props2["retry"]["exc_reason"].startswith(f"{HOST}: Insufficient vcpu: requested 8")
    assert props == request_for(instance, limits={"vcpu": 4})[1]  # the caller's dict untouched


def test_failed_build_frees_and_reschedules(conf, transport, scheduler, agents):
    driver = CountingDriver(conf, fail=True)
    manager = agents(driver=driver)
    instance = make_instance()
    spec, props = request_for(instance)
    client = ComputeClient(transport)
    client.run_instance({}, HOST, instance, spec, props)
    wait_for(lambda: scheduler.reschedules, "the reschedule")
    [(_, props2)] = scheduler.reschedules
    assert props2["retry"]["hosts"] == [[HOST, HOST]]
    assert props2["retry"]["exc_reason"] == f"{HOST}: build failed: the hypervisor said no"
    assert instance["uuid"] not in manager.tracker
    assert manager.store.get(instance["uuid"]) is None
    # The reschedule and the agent's instance updates go to two queues: either may come first.
    sync(scheduler, client)
    assert scheduler.states(instance["uuid"]) == ["BUILDING"]


def test_repeated_run_instance_builds_once(conf, transport, scheduler, agents):
    conf.set_override("build_time", 0.2, "fake")
    driver = CountingDriver(conf)
    manager = agents(driver=driver)
    client = ComputeClient(transport)
    instance = make_instance()
    spec, props = request_for(instance)
    client.run_instance({}, HOST, instance, spec, props)
    client.run_instance({}, HOST, instance, spec, props)  # redelivered while building
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    manager.run_instance({}, instance, spec, props)  # and again once ACTIVE
    sync(scheduler, client)
    assert driver.spawned == [instance["uuid"]]
    assert scheduler.states(instance["uuid"]) == ["BUILDING", "ACTIVE"]
    assert manager.tracker.instance_uuids() == [instance["uuid"]]
    assert manager.tracker.report()["memory_mb_used"] == 512 + 1024


def test_terminate_frees_and_reports_deleted(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    driver = CountingDriver(conf)
    manager = agents(driver=driver)
    client = ComputeClient(transport)
    instance = make_instance(memory_mb=4096)
    uuid = instance["uuid"]
    client.run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    wait_for(lambda: uuid in scheduler.last_report()["instance_uuids"], "the claim reported")
    client.terminate_instance({}, HOST, uuid)
    wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")
    assert scheduler.states(uuid) == ["BUILDING", "ACTIVE", "DELETED"]
    assert driver.destroyed == [uuid]
    assert uuid not in manager.tracker
    assert manager.store.get(uuid) is None
    report = wait_for(
        lambda: (r := scheduler.last_report()) and uuid not in r["instance_uuids"] and r,
        "the release reported",
    )
    assert report["memory_mb_used"] == 512
    # A second terminate (or one for an unknown uuid) still answers DELETED.
    client.terminate_instance({}, HOST, uuid)
    wait_for(lambda: scheduler.states(uuid).count("DELETED") == 2, "the second DELETED")
    assert driver.destroyed == [uuid]


def test_instances_survive_a_restart(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    first = agents()
    client = ComputeClient(transport)
    a, b = make_instance(memory_mb=1024), make_instance(memory_mb=2048)
    for instance in (a, b):
        client.run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(b["uuid"]), "b ACTIVE")
    wait_for(lambda: "ACTIVE" in scheduler.states(a["uuid"]), "a ACTIVE")
    first.stop()
    wait_for(lambda: (scheduler.last_report() or {}).get("stopped"), "the last report of the first agent")

    seen = scheduler.report_count()
    second = ComputeManager(conf, transport, host=HOST)
    assert second.store.path == InstanceStore(conf.state_path, HOST).path
    second.start()
    try:
        assert second.tracker.instance_uuids() == sorted([a["uuid"], b["uuid"]])
        wait_for(lambda: scheduler.report_count() > seen, "the report of the new agent")
        report = scheduler.last_report()
        assert report["instance_uuids"] == sorted([a["uuid"], b["uuid"]])
        assert report["memory_mb_used"] == 512 + 1024 + 2048
        assert report["started_at"] == second.started_at
    finally:
        second.stop()


def test_interrupted_build_resumes_after_restart(conf, transport, scheduler, agents):
    conf.set_override("build_time", 600, "fake")
    first = agents()
    instance = make_instance()
    uuid = instance["uuid"]
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: scheduler.states(uuid) == ["BUILDING"], "BUILDING")
    first.stop()  # interrupts the 600 s build promptly
    assert first.store.get(uuid)["state"] == "BUILDING"

    conf.set_override("build_time", 0, "fake")
    second = ComputeManager(conf, transport, host=HOST)
    second.start()
    try:
        wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "the resumed build")
        assert scheduler.states(uuid) == ["BUILDING", "ACTIVE"]
        assert second.store.get(uuid)["state"] == "ACTIVE"
        assert scheduler.asked == [uuid]  # placed elsewhere while the agent was away? it asked first
    finally:
        second.stop()


def test_several_agents_in_one_process(conf, transport, scheduler, agents):
    one, two = agents("agent-1"), agents("agent-2")
    client = ComputeClient(transport)
    instance = make_instance()
    client.run_instance({}, "agent-2", instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    assert instance["uuid"] in two.tracker
    assert instance["uuid"] not in one.tracker
    wait_for(lambda: scheduler.last_report("agent-1"), "agent-1's report")
    wait_for(lambda: scheduler.last_report("agent-2"), "agent-2's report")
    assert {u for u, host, _, _ in scheduler.updates} == {instance["uuid"]}
    assert {host for _, host, _, _ in scheduler.updates} == {"agent-2"}


def test_reports_are_coalesced(conf, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    conf.set_override("report_min_interval", 0.5, "compute_agent")
    manager = agents()
    wait_for(scheduler.last_report, "the first report")
    instances = [make_instance(memory_mb=10) for _ in range(20)]
    before = scheduler.report_count()
    began = time.monotonic()
    for instance in instances:
        manager.run_instance({}, instance, *request_for(instance))
    want = sorted(i["uuid"] for i in instances)
    wait_for(lambda: scheduler.last_report()["instance_uuids"] == want, "all claims reported")
    elapsed = time.monotonic() - began
    # Change-triggered reports are at least report_min_interval apart.
    assert scheduler.report_count() - before <= 1 + elapsed / 0.5


def test_a_second_agent_for_the_same_host_does_not_start_and_says_who_serves_it(conf, transport, agents):
    from compute_agent.instance_store import HostTaken

    first = agents()
    twin = ComputeManager(conf, transport, host=HOST)
    with pytest.raises(HostTaken, match=rf"host {HOST} is served already by the agent with pid \d+ on"):
        twin.start()
    first.stop()
    again = ComputeManager(conf, transport, host=HOST)  # once the first is gone, it may
    again.start()
    again.stop()


def test_an_instance_whose_record_cannot_be_removed_stays_held_and_is_not_reported_deleted(
        conf, transport, scheduler, agents, monkeypatch):
    conf.set_override("report_interval", 3600, "compute_agent")
    manager = agents(driver=CountingDriver(conf))
    client = ComputeClient(transport)
    instance = make_instance(memory_mb=2048)
    uuid = instance["uuid"]
    client.run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")

    def read_only(*args):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(manager.store, "_write", read_only)
    client.terminate_instance({}, HOST, uuid)
    wait_for(lambda: manager.driver.destroyed == [uuid], "the destroy")
    sync(scheduler, client)
    assert "DELETED" not in scheduler.states(uuid)
    assert uuid in manager.tracker and manager.store.get(uuid) is not None
    monkeypatch.undo()  # writable again: the next terminate goes through
    client.terminate_instance({}, HOST, uuid)
    wait_for(lambda: "DELETED" in scheduler.states(uuid), "DELETED")
    assert uuid not in manager.tracker


def test_updates_that_cannot_be_sent_are_kept_and_sent_in_order_before_the_next_report(
        conf, transport, scheduler, agents, monkeypatch):
    conf.set_override("report_interval", 3600, "compute_agent")
    manager = agents()
    sent, broken = [], [True]

    def instance_update(ctxt, uuid, host, state, fault=None):
        if broken[0]:
            raise rpc.MessageDeliveryFailure("the broker is away")
        sent.append(state)

    monkeypatch.setattr(manager.scheduler, "instance_update", instance_update)
    manager._instance_update({}, "u1", "BUILDING")
    manager._instance_update({}, "u1", "ACTIVE")
    assert sent == []
    broken[0] = False
    manager.send_report()
    assert sent == ["BUILDING", "ACTIVE"]
