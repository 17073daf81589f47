"""The agents' side of a move between two agents (compute API 2.0): the destination prepares,
the source migrates the instance out, the destination finishes; each step answered to the
scheduler (the stub records it), recorded before the driver runs it, resumed by an agent that
starts again, answered again when told again, and rolled back on its host when it fails."""

import logging
import threading
import time

import pytest

from berth_contract.host_report import HostReport
from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from scheduler.exception import InvalidRequest
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.compute.test_moves import SOURCE, boot

LIMITS = {"memory_mb": 8192, "disk_gb": 100, "vcpu": 8}


class StepDriver(drivers.FakeDriver):
    """A fake driver whose steps wait at ``gates[step]`` (a stop interrupts them), and fail where
    ``failing`` says; it records what it ran."""

    def __init__(self, conf, gated=()):
        super().__init__(conf)
        self.gates = {step: threading.Event() for step in ("prepare", "migrate", "finish")}
        for step in self.gates.keys() - set(gated):
            self.gates[step].set()
        self.failing = set()
        self.ran = []
        self.figures = None  # what migrate_out measured

    def _gate(self, step, uuid):
        self.ran.append((step, uuid))
        while not self.gates[step].wait(0.01):
            self._wait(0)  # BuildAborted once the agent stops
        if step in self.failing:
            raise drivers.MoveFailed(f"{step} broke")

    def prepare_move_in(self, instance, migration):
        self._gate("prepare", instance["uuid"])
        return {"uri": f"tcp:{self.conf.host}:{4000 + migration['id']}"}

    def migrate_out(self, instance, migration, transfer):
        self._gate("migrate", instance["uuid"])
        return self.figures

    def finish_move_in(self, instance, migration, transfer):
        self._gate("finish", instance["uuid"])

    def abort_move_out(self, instance, migration):
        self.ran.append(("abort", instance["uuid"]))


def migration_of(migration_id=3, live=True):
    return {"id": migration_id, "kind": "live-migration" if live else "migration", "source_host": SOURCE,
            "dest_host": HOST, "live": live, "old_flavor": make_instance()["flavor"]}


def prepare(transport, instance, migration):
    spec, props = request_for(instance, limits=LIMITS)
    wire = {k: v for k, v in migration.items() if k != "dest_host"}
    ComputeClient(transport).prepare_move({}, HOST, instance, spec, props, wire)


def said(scheduler, uuid, count):
    return wait_for(lambda: (lambda s: s if len(s) >= count else None)(scheduler.steps_said(uuid)),
                    f"{count} word(s) of the move")


def test_a_move_goes_step_by_step_and_each_agent_records_its_part(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    source_driver, dest_driver = StepDriver(conf), StepDriver(conf)
    source = agents(host=SOURCE, driver=source_driver)
    dest = agents(driver=dest_driver)
    instance = make_instance(memory_mb=2048)
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE on the source")

    prepare(transport, instance, migration)
    assert said(scheduler, uuid, 1) == [(HOST, "prepared")]
    transfer = scheduler.transfers[uuid, 3]
    assert transfer == {"uri": "tcp:agent-1:4003"}
    assert dest.store.get(uuid)["state"] == "MIGRATING" and dest.store.get(uuid)["step"] == "prepared"
    assert dest.send_report()["move_steps"] == {uuid: [3, "prepared"]}
    assert uuid in dest.tracker and uuid in source.tracker  # both hold it

    ComputeClient(transport).migrate_out({}, SOURCE, uuid, migration, transfer)
    assert said(scheduler, uuid, 2)[-1] == (SOURCE, "migrated")
    assert source.send_report()["move_steps"] == {uuid: [3, "migrated"]}
    assert source.store.get(uuid)["state"] == "ACTIVE"  # held until it is told to let go

    ComputeClient(transport).finish_move({}, HOST, uuid, 3)
    assert said(scheduler, uuid, 3)[-1] == (HOST, "done")
    record = dest.store.get(uuid)
    assert (record["state"], "step" in record) == ("ACTIVE", False)
    assert "move_steps" not in dest.send_report()
    assert [step for step, _ in source_driver.ran + dest_driver.ran] == ["migrate", "prepare", "finish"]

    ComputeClient(transport).terminate_instance({}, SOURCE, uuid, "moved to agent-1 (live-migration 3)")
    wait_for(lambda: uuid not in source.store and uuid not in source.tracker, "the source letting go")


@pytest.mark.parametrize("cap", [None, "1.7"])
def test_a_source_tells_its_drivers_figures_of_the_migration_with_migrated_unless_capped_below_1_8(
        conf, transport, scheduler, agents, cap, caplog):
    conf.set_override("scheduler", cap, "upgrade_levels")
    caplog.set_level(logging.INFO, logger="compute_agent.move_steps")
    source_driver = StepDriver(conf)
    source_driver.figures = {"downtime_ms": 61, "total_ms": 1843, "memory_bytes": 9 << 20}
    downtimes = _histogram_count("berth_agent_live_migration_downtime_seconds")
    source = agents(host=SOURCE, driver=source_driver)
    agents(driver=StepDriver(conf))
    instance = make_instance()
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE on the source")
    prepare(transport, instance, migration)
    said(scheduler, uuid, 1)
    ComputeClient(transport).migrate_out({}, SOURCE, uuid, migration, scheduler.transfers[uuid, 3])
    assert said(scheduler, uuid, 2)[-1] == (SOURCE, "migrated")
    ComputeClient(transport).migrate_out({}, SOURCE, uuid, migration, scheduler.transfers[uuid, 3])
    assert said(scheduler, uuid, 3)[-1] == (SOURCE, "migrated")  # told again, with the same figures
    assert source.store.get(uuid)["outgoing"]["figures"] == source_driver.figures
    assert _histogram_count("berth_agent_live_migration_downtime_seconds") == downtimes + 1
    if cap is None:
        assert scheduler.figures == [(uuid, 3, source_driver.figures)] * 2
    else:
        assert scheduler.figures == []
        assert any("its figures" in m and "[upgrade_levels] scheduler is below 1.8" in m
                   for m in caplog.messages)


def _histogram_count(name):
    from prometheus_client import REGISTRY
    return REGISTRY.get_sample_value(f"{name}_count") or 0


def test_each_step_told_again_is_answered_again_not_run_twice(conf, transport, scheduler, agents):
    source_driver, dest_driver = StepDriver(conf), StepDriver(conf)
    agents(host=SOURCE, driver=source_driver)
    agents(driver=dest_driver)
    instance = make_instance()
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    client = ComputeClient(transport)
    steps = [lambda: prepare(transport, instance, migration),
             lambda: client.migrate_out({}, SOURCE, uuid, migration, {"uri": "x"}),
             lambda: client.finish_move({}, HOST, uuid, 3)]
    for count, step in enumerate(steps):
        step()
        said(scheduler, uuid, 2 * count + 1)
        step()  # its answer lost: told again once it is done
        said(scheduler, uuid, 2 * count + 2)
    assert said(scheduler, uuid, 6) == [(HOST, "prepared")] * 2 + [(SOURCE, "migrated")] * 2 + [
        (HOST, "done")] * 2
    assert [step for step, _ in source_driver.ran + dest_driver.ran] == ["migrate", "prepare", "finish"]


@pytest.mark.parametrize("step", ["prepare", "migrate", "finish"])
def test_a_step_interrupted_by_a_stop_resumes_when_its_agent_starts_again(conf, transport, scheduler, agents,
                                                                           step):
    source_driver = StepDriver(conf, gated=["migrate"] if step == "migrate" else [])
    dest_driver = StepDriver(conf, gated=[step] if step != "migrate" else [])
    source = agents(host=SOURCE, driver=source_driver)
    dest = agents(driver=dest_driver)
    instance = make_instance()
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    prepare(transport, instance, migration)
    if step != "prepare":
        said(scheduler, uuid, 1)
        ComputeClient(transport).migrate_out({}, SOURCE, uuid, migration, {"uri": "x"})
    if step == "finish":
        said(scheduler, uuid, 2)
        ComputeClient(transport).finish_move({}, HOST, uuid, 3)
    stopped, driver = (source, source_driver) if step == "migrate" else (dest, dest_driver)
    wait_for(lambda: (step, uuid) in driver.ran, f"the driver's {step}")
    stopped.stop()
    host = stopped.host
    working = {"prepare": "preparing", "migrate": "migrating", "finish": "finishing"}[step]
    assert stopped.send_report()["move_steps"] == {uuid: [3, working]}  # as its records say

    again = StepDriver(conf)
    restarted = agents(host=host, driver=again)
    expected = {"prepare": (HOST, "prepared"), "migrate": (SOURCE, "migrated"),
                "finish": (HOST, "done")}[step]
    wait_for(lambda: expected in scheduler.steps_said(uuid), f"{step} resumed")
    assert (step, uuid) in again.ran
    assert uuid in restarted.tracker  # its claim came back with its record


@pytest.mark.parametrize("step", ["prepare", "finish"])
def test_a_destination_step_that_fails_lets_go_of_everything_and_says_why(conf, transport, scheduler, agents,
                                                                          step):
    driver = StepDriver(conf)
    driver.failing.add(step)
    dest = agents(driver=driver)
    instance = make_instance()
    uuid = instance["uuid"]
    prepare(transport, instance, migration_of())
    if step == "finish":
        said(scheduler, uuid, 1)
        ComputeClient(transport).finish_move({}, HOST, uuid, 3)
    wait_for(lambda: (HOST, "failed") in scheduler.steps_said(uuid), "failed")
    fault = [f for u, _, _, outcome, f in scheduler.moves if u == uuid and outcome == "failed"][0]
    verb = "preparing" if step == "prepare" else "finishing"
    assert fault == {"reason": f"{HOST}: {verb} failed: {step} broke"}
    wait_for(lambda: uuid not in dest.store and uuid not in dest.tracker, "the claim given back")


def test_a_source_that_fails_to_migrate_out_keeps_the_instance_and_an_abort_runs_it_again(
        conf, transport, scheduler, agents):
    driver = StepDriver(conf)
    driver.failing.add("migrate")
    source = agents(host=SOURCE, driver=driver)
    instance = make_instance()
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    client = ComputeClient(transport)
    client.migrate_out({}, SOURCE, uuid, migration, {"uri": "x"})
    wait_for(lambda: (SOURCE, "failed") in scheduler.steps_said(uuid), "failed")
    record = source.store.get(uuid)
    assert (record["state"], "outgoing" in record) == ("ACTIVE", False)

    driver.failing.clear()
    client.migrate_out({}, SOURCE, uuid, dict(migration, id=4), {"uri": "x"})
    wait_for(lambda: source.send_report().get("move_steps") == {uuid: [4, "migrated"]}, "migrated out")
    client.abort_move({}, SOURCE, uuid, 4)  # the destination failed to finish it
    wait_for(lambda: "outgoing" not in source.store.get(uuid), "the abort")
    assert ("abort", uuid) in driver.ran and source.store.get(uuid)["state"] == "ACTIVE"


def test_an_abort_that_comes_while_the_source_migrates_out_takes_effect_once_the_driver_returns(
        conf, transport, scheduler, agents):
    driver = StepDriver(conf, gated=["migrate"])
    source = agents(host=SOURCE, driver=driver)
    instance = make_instance()
    uuid, migration = instance["uuid"], migration_of()
    ComputeClient(transport).run_instance({}, SOURCE, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(uuid), "ACTIVE")
    client = ComputeClient(transport)
    client.migrate_out({}, SOURCE, uuid, migration, {"uri": "x"})
    wait_for(lambda: ("migrate", uuid) in driver.ran, "migrating out")
    client.abort_move({}, SOURCE, uuid, 3)  # the move timed out
    wait_for(lambda: source.store.get(uuid)["outgoing"].get("aborted"), "the abort recorded")
    driver.gates["migrate"].set()
    wait_for(lambda: "outgoing" not in source.store.get(uuid), "the abort done")
    assert ("abort", uuid) in driver.ran
    assert (SOURCE, "migrated") not in scheduler.steps_said(uuid)  # nothing said of a move given up


def test_a_step_for_a_move_the_agent_cannot_take_fails_with_the_reason(conf, transport, scheduler, agents):
    source = agents(host=SOURCE)
    dest = agents()
    instance = make_instance()
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)  # on agent-1: it cannot take it in again
    prepare(transport, instance, migration_of())
    ComputeClient(transport).migrate_out({}, SOURCE, uuid, migration_of(), {"uri": "x"})  # not held there
    ComputeClient(transport).finish_move({}, HOST, uuid, 9)  # no such move
    wait_for(lambda: len(scheduler.steps_said(uuid)) >= 3, "three refusals")
    reasons = sorted(fault["reason"] for u, _, _, outcome, fault in scheduler.moves
                     if u == uuid and outcome == "failed")
    assert reasons == sorted([f"{HOST}: holds {uuid} already (ACTIVE); cannot take it in",
                              f"{HOST}: holds no move 9 of {uuid}; cannot finish it",
                              f"{SOURCE}: does not hold {uuid}; cannot migrate it out"])
    assert dest.store.get(uuid)["state"] == "ACTIVE" and uuid not in source.store


@pytest.mark.parametrize(("args", "message"), [
    ({"transfer": "tcp:x"}, "migrate_out: transfer must be an object"),
    ({"transfer": {"blob": "x" * 20000}}, "migrate_out: transfer must hold at most 16384 characters"),
    ({"migration": {"id": 1, "kind": "migration", "source_host": SOURCE}},
     "migrate_out: migration.dest_host"),
])
def test_a_bad_migrate_out_is_refused_naming_the_field(conf, agents, args, message):
    from compute_agent.manager import ComputeEndpoint

    manager = agents()
    call = dict({"instance_uuid": make_instance()["uuid"], "migration": migration_of(),
                 "transfer": {"uri": "x"}}, **args)
    with pytest.raises(InvalidRequest, match=message):
        ComputeEndpoint(manager).migrate_out({}, **call)


def test_a_report_sent_while_a_move_is_claimed_names_its_step_only_with_its_instance(
        conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    dest = agents(driver=StepDriver(conf))
    instance = make_instance()
    uuid = instance["uuid"]
    measured = dest.tracker.report

    def report_while_a_move_is_claimed(*args, **kwargs):
        resources = measured(*args, **kwargs)
        prepare(transport, instance, migration_of())
        # Up to a second for the destination to claim the instance and record its step.
        for _ in range(50):
            if uuid in dest.store:
                break
            time.sleep(0.02)
        return resources

    dest.tracker.report = report_while_a_move_is_claimed
    resources = dest.send_report()
    HostReport.from_wire(resources, HOST)  # not refused as naming a step of an instance it does not hold
    dest.tracker.report = measured
    said(scheduler, uuid, 1)
    assert dest.send_report()["move_steps"] == {uuid: [3, "prepared"]}
