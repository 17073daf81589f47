"""The agent's side of moves (compute API 1.2): a destination claims and takes an instance in,
a host resizes one of its own in place and holds the larger flavor until end_resize settles it.
What the scheduler hears is move_update, recorded by the stub scheduler."""

import logging
import threading
import time

import pytest

from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from compute_agent.manager import ComputeManager, ComputeV1Endpoint
from scheduler.exception import InvalidRequest
from scheduler.rpc import deadletter
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.compute.test_compute_manager import sync
from tests.unit.rpc.test_bad_input import dead_letters
from tests.unit.telemetry.scrape import value

SOURCE = "agent-0"
RESERVED = 512  # [compute_agent] reserved_host_memory_mb's default
NOTHING = (RESERVED, 0, 0)


class GatedDriver(drivers.FakeDriver):
    """A fake driver whose moves in wait for ``gate`` (or a stop), so that a test sees them under way."""

    def __init__(self, conf):
        super().__init__(conf)
        self.gate = threading.Event()
        self.moved_in = []
        self.destroyed = []

    def migrate_in(self, instance, migration):
        self.moved_in.append((instance["uuid"], migration["id"]))
        while not self.gate.wait(0.01):
            self._wait(0)  # BuildAborted once the agent stops
        super().migrate_in(instance, migration)

    def destroy(self, instance):
        self.destroyed.append(instance["uuid"])
        super().destroy(instance)


def migration_of(migration_id=1, kind="migration", source=SOURCE, old_flavor=None, live=False):
    return {"id": migration_id, "kind": kind, "source_host": source, "live": live,
            "old_flavor": old_flavor or make_instance()["flavor"]}


def move(transport, instance, migration, limits=None):
    spec, props = request_for(instance, limits=limits)
    ComputeClient(transport).move_instance({}, HOST, instance, spec, props, migration)


def outcome(scheduler, uuid, what="the move's outcome"):
    return wait_for(lambda: scheduler.move_updates(uuid), what)


def boot(transport, scheduler, instance):
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")


# -- a move to this host ------------------------------------------------------------


def test_a_move_in_claims_is_migrating_then_active_and_tells_the_scheduler_done(conf, transport, scheduler,
                                                                                agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    driver = GatedDriver(conf)
    manager = agents(driver=driver)
    instance = make_instance(memory_mb=2048, root_gb=20, vcpus=2)
    uuid = instance["uuid"]
    migration = migration_of(7, kind="live-migration", live=True)
    move(transport, instance, migration, limits={"memory_mb": 8192, "disk_gb": 100, "vcpu": 8})

    wait_for(lambda: driver.moved_in, "the driver's migrate_in")
    record = manager.store.get(uuid)
    assert record["state"] == "MIGRATING"
    assert record["migration"] == migration
    assert record["instance"] == instance
    assert manager.tracker.usage() == (RESERVED + 2048, 20, 2)
    report = wait_for(lambda: (r := scheduler.last_report()) and uuid in r["instance_uuids"] and r,
                      "a report holding the instance while it moves in")
    assert report["memory_mb_used"] == RESERVED + 2048
    assert scheduler.move_updates(uuid) == []

    driver.gate.set()
    assert outcome(scheduler, uuid) == [(7, "done", None)]
    assert manager.store.get(uuid)["state"] == "ACTIVE"
    assert manager.tracker.usage() == (RESERVED + 2048, 20, 2)
    assert driver.moved_in == [(uuid, 7)]
    assert scheduler.states(uuid) == [] and scheduler.reschedules == []  # moves speak move_update only


def test_a_move_that_does_not_fit_the_limits_fails_and_holds_nothing(conf, transport, scheduler, agents):
    conf.set_override("memory_mb", 4096, "fake")
    manager = agents()
    instance = make_instance(memory_mb=8192)
    move(transport, instance, migration_of(3), limits={"memory_mb": 6144})
    assert outcome(scheduler, instance["uuid"]) == [(3, "failed", {
        "reason": f"{HOST}: Insufficient memory: requested 8192 MB, free 5632 MB of limit 6144 MB"})]
    assert manager.tracker.usage() == NOTHING
    assert manager.store.records() == {}
    assert scheduler.reschedules == []  # not a build: nothing is sent back to be rescheduled


def test_a_failed_driver_move_frees_the_claim_and_reports_why(conf, transport, scheduler, agents, caplog):
    conf.set_override("move_failure_rate", 1.0, "fake")
    manager = agents()
    instance = make_instance()
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        move(transport, instance, migration_of(4, kind="evacuation"))
        assert outcome(scheduler, instance["uuid"]) == [(4, "failed", {
            "reason": f"{HOST}: migration failed: the fake driver failed the evacuation "
                      "([fake] move_failure_rate = 1)"})]
    assert manager.tracker.usage() == NOTHING
    assert manager.store.records() == {}
    # a failure the driver says whole is one WARNING line, not a traceback
    [failed] = [r for r in caplog.records if r.getMessage().startswith("Move of ")]
    assert failed.levelname == "WARNING" and not failed.exc_info


def test_a_repeated_move_request_is_taken_in_once(conf, transport, scheduler, agents, caplog):
    driver = GatedDriver(conf)
    manager = agents(driver=driver)
    instance = make_instance()
    uuid = instance["uuid"]
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        move(transport, instance, migration_of(5))
        move(transport, instance, migration_of(5))  # redelivered while it moves in
        ignored = f"Move 5 of {uuid} is on {HOST} already; repeated move request ignored"
        wait_for(lambda: ignored in caplog.messages, "the repeat to be handled while the move is gated")
        driver.gate.set()
        outcome(scheduler, uuid)
        manager.move_instance({}, instance, *request_for(instance), migration_of(5))  # and again once done
        sync(scheduler, ComputeClient(transport))
    assert driver.moved_in == [(uuid, 5)]
    # once done, a repeat is answered "done" again: the scheduler tells a move again when it has not
    # heard its end
    assert scheduler.move_updates(uuid) == [(5, "done", None), (5, "done", None)]
    assert manager.tracker.usage() == (RESERVED + 1024, 10, 1)
    assert caplog.messages.count(f"Move 5 of {uuid} is on {HOST} already; repeated move request ignored") == 1
    assert caplog.messages.count(f"Move 5 of {uuid} is done on {HOST} already; saying so again") == 1


def test_a_move_of_an_instance_held_here_already_fails_and_changes_nothing(conf, transport, scheduler,
                                                                            agents):
    manager = agents()
    instance = make_instance()
    boot(transport, scheduler, instance)
    move(transport, dict(instance, flavor=make_instance(memory_mb=4096)["flavor"]), migration_of(6))
    assert outcome(scheduler, instance["uuid"]) == [(6, "failed", {
        "reason": f"{HOST}: holds {instance['uuid']} already (ACTIVE); cannot take it in"})]
    assert manager.store.get(instance["uuid"])["state"] == "ACTIVE"
    assert manager.tracker.usage() == (RESERVED + 1024, 10, 1)


def test_a_terminate_during_a_move_in_leaves_nothing_and_the_move_does_not_bring_it_back(
        conf, transport, scheduler, agents):
    driver = GatedDriver(conf)
    manager = agents(driver=driver)
    instance = make_instance()
    uuid = instance["uuid"]
    move(transport, instance, migration_of(8))
    wait_for(lambda: driver.moved_in, "the driver's migrate_in")
    ComputeClient(transport).terminate_instance({}, HOST, uuid, "migration 8 aborted")
    wait_for(lambda: scheduler.states(uuid) == ["DELETED"], "DELETED")
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}

    driver.gate.set()
    wait_for(lambda: driver.destroyed.count(uuid) == 2, "the move's own clean-up")  # terminate's, the move's
    sync(scheduler, ComputeClient(transport))
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}
    assert scheduler.move_updates(uuid) == []


def test_an_interrupted_move_resumes_after_a_restart(conf, transport, scheduler, agents):
    conf.set_override("migration_time_per_gb", 600, "fake")
    first = agents()
    instance = make_instance(memory_mb=2048)
    uuid = instance["uuid"]
    move(transport, instance, migration_of(9))
    wait_for(lambda: first.store.get(uuid), "the move under way")
    first.stop()  # interrupts the 1200 s move promptly
    assert first.store.get(uuid)["state"] == "MIGRATING"
    assert scheduler.move_updates(uuid) == []

    conf.set_override("migration_time_per_gb", 0, "fake")
    second = ComputeManager(conf, transport, host=HOST)
    second.start()
    try:
        assert uuid in second.tracker
        assert outcome(scheduler, uuid, "the resumed move") == [(9, "done", None)]
        assert second.store.get(uuid)["state"] == "ACTIVE"
        assert second.tracker.usage() == (RESERVED + 2048, 10, 1)
    finally:
        second.stop()


def test_a_move_from_this_very_host_is_refused_unless_a_resize(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance()
    boot(transport, scheduler, instance)
    move(transport, instance, migration_of(10, source=HOST))
    assert outcome(scheduler, instance["uuid"]) == [(10, "failed", {
        "reason": f"{HOST}: cannot take in a migration from itself"})]
    assert manager.store.get(instance["uuid"])["state"] == "ACTIVE"


def test_the_source_terminates_its_active_copy_once_moved(conf, transport, scheduler, agents, caplog):
    manager = agents()
    instance = make_instance()
    boot(transport, scheduler, instance)
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        ComputeClient(transport).terminate_instance({}, HOST, instance["uuid"],
                                                    "moved to agent-2 (migration 11)")
        wait_for(lambda: "DELETED" in scheduler.states(instance["uuid"]), "DELETED")
    assert f"Terminated {instance['uuid']} (moved to agent-2 (migration 11))" in caplog.messages
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}


# -- the fake driver's time and failures ----------------------------------------------


def test_the_fake_move_takes_its_time_per_gib_of_memory_and_a_stop_interrupts_it(conf):
    conf.set_override("migration_time_per_gb", 0.1, "fake")
    driver = drivers.FakeDriver(conf)
    started = time.monotonic()
    driver.migrate_in(make_instance(memory_mb=3072), migration_of())
    assert time.monotonic() - started >= 0.29  # 3 GiB at 0.1 s each
    conf.set_override("migration_time_per_gb", 600, "fake")
    threading.Timer(0.1, driver.stop).start()
    with pytest.raises(drivers.BuildAborted):
        driver.resize(make_instance(), migration_of(kind="resize"))


def test_a_fraction_of_fake_moves_fails_the_same_way_each_time(conf):
    conf.set_override("move_failure_rate", 0.5, "fake")
    driver = drivers.FakeDriver(conf)
    instance = make_instance()

    def fails(migration_id):
        try:
            driver.migrate_in(instance, migration_of(migration_id))
        except Exception:
            return True
        return False

    first = [fails(i) for i in range(40)]
    assert 5 < sum(first) < 35
    assert [fails(i) for i in range(40)] == first  # a resumed move ends as it would have
    conf.set_override("move_failure_rate", 0.0, "fake")
    assert not any(fails(i) for i in range(40))


# -- resize in place ----------------------------------------------------------------------

SMALL = {"memory_mb": 1024, "root_gb": 10, "vcpus": 1}
LARGE = {"memory_mb": 2048, "root_gb": 20, "vcpus": 2}


def resize_in_place(transport, scheduler, instance, migration_id, sizes, limits=None):
    new = dict(instance, flavor=make_instance(**sizes)["flavor"])
    migration = migration_of(migration_id, kind="resize", source=HOST, old_flavor=instance["flavor"])
    move(transport, new, migration, limits=limits)
    return new


def used(sizes):
    return (RESERVED + sizes["memory_mb"], sizes["root_gb"], sizes["vcpus"])


@pytest.mark.parametrize("old, new", [(SMALL, LARGE), (LARGE, SMALL)], ids=["grow", "shrink"])
@pytest.mark.parametrize("confirmed", [True, False], ids=["confirmed", "reverted"])
def test_a_resize_in_place_holds_the_larger_flavor_until_it_ends(conf, transport, scheduler, agents, old, new,
                                                                 confirmed):
    conf.set_override("report_interval", 3600, "compute_agent")
    manager = agents()
    instance = make_instance(**old)
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)
    resized = resize_in_place(transport, scheduler, instance, 12, new)
    assert outcome(scheduler, uuid) == [(12, "done", None)]
    assert manager.tracker.usage() == used(LARGE)  # the larger of both, whichever way
    record = manager.store.get(uuid)
    assert record["state"] == "ACTIVE"
    assert record["instance"]["flavor"] == instance["flavor"]
    assert record["resize"] == {"migration_id": 12, "old_flavor": instance["flavor"],
                                "new_flavor": resized["flavor"], "resized": True}

    ComputeClient(transport).end_resize({}, HOST, uuid, 12, confirmed)
    kept = new if confirmed else old
    wait_for(lambda: "resize" not in manager.store.get(uuid) and manager.tracker.usage() == used(kept),
             "the resize settled")
    record = manager.store.get(uuid)
    assert record["instance"]["flavor"] == (resized if confirmed else instance)["flavor"]
    report = wait_for(lambda: (r := scheduler.last_report()) and r["memory_mb_used"] == used(kept)[0] and r,
                      "a report of the settled resize")
    assert report["vcpus_used"] == kept["vcpus"]

    ComputeClient(transport).end_resize({}, HOST, uuid, 12, not confirmed)  # a late contrary word
    ComputeClient(transport).end_resize({}, HOST, uuid, 99, True)  # another migration's
    sync(scheduler, ComputeClient(transport))
    assert manager.tracker.usage() == used(kept)
    assert manager.store.get(uuid) == record


def test_a_resize_holds_the_larger_of_each_resource(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance(memory_mb=4096, root_gb=10, vcpus=1)
    boot(transport, scheduler, instance)
    resize_in_place(transport, scheduler, instance, 13, {"memory_mb": 1024, "root_gb": 40, "vcpus": 4})
    outcome(scheduler, instance["uuid"])
    assert manager.tracker.usage() == (RESERVED + 4096, 40, 4)


def test_a_resize_in_place_checks_only_its_increase_against_the_limits(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance(**SMALL)
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)
    resize_in_place(transport, scheduler, instance, 14, dict(SMALL, memory_mb=4096),
                    limits={"memory_mb": 4096})
    assert outcome(scheduler, uuid) == [(14, "failed", {
        "reason": f"{HOST}: Insufficient memory: requested 3072 MB, free 2560 MB of limit 4096 MB"})]
    assert manager.tracker.usage() == used(SMALL)
    assert "resize" not in manager.store.get(uuid)

    # A shrink asks for nothing more: it is done even on a host already past its limits.
    resize_in_place(transport, scheduler, instance, 15, dict(SMALL, vcpus=1, memory_mb=512),
                    limits={"memory_mb": 1000, "vcpu": 0})
    wait_for(lambda: len(scheduler.move_updates(uuid)) == 2, "the second resize's outcome")
    assert scheduler.move_updates(uuid)[1] == (15, "done", None)
    assert manager.tracker.usage() == used(SMALL)


def test_a_failed_resize_in_place_holds_the_old_flavor_again(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance(**SMALL)
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)
    conf.set_override("move_failure_rate", 1.0, "fake")
    resize_in_place(transport, scheduler, instance, 16, LARGE)
    [(_, result, fault)] = outcome(scheduler, uuid)
    assert result == "failed" and fault["reason"].startswith(f"{HOST}: resize failed: the fake driver failed")
    assert manager.tracker.usage() == used(SMALL)
    record = manager.store.get(uuid)
    assert "resize" not in record and record["instance"]["flavor"] == instance["flavor"]


def test_a_second_resize_before_the_first_ends_fails_and_a_repeat_is_ignored(conf, transport, scheduler,
                                                                              agents):
    manager = agents()
    instance = make_instance(**SMALL)
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)
    resize_in_place(transport, scheduler, instance, 17, LARGE)
    outcome(scheduler, uuid)
    resize_in_place(transport, scheduler, instance, 17, LARGE)  # redelivered: said done again
    resize_in_place(transport, scheduler, instance, 18, dict(LARGE, memory_mb=8192))
    wait_for(lambda: len(scheduler.move_updates(uuid)) == 3, "the second resize's outcome")
    assert scheduler.move_updates(uuid) == [(17, "done", None), (17, "done", None), (18, "failed", {
        "reason": f"{HOST}: the resize 17 of {uuid} has not ended (end_resize); cannot resize it again"})]
    assert manager.tracker.usage() == used(LARGE)


def test_a_resize_in_place_of_an_instance_this_host_does_not_hold_fails(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance()
    resize_in_place(transport, scheduler, instance, 19, LARGE)
    assert outcome(scheduler, instance["uuid"]) == [(19, "failed", {
        "reason": f"{HOST}: does not hold {instance['uuid']}; cannot resize it in place"})]
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}


def test_after_a_restart_a_resize_holds_the_larger_flavor_and_an_interrupted_one_resumes(
        conf, transport, scheduler, agents):
    first = agents()
    done, interrupted = make_instance(**SMALL), make_instance(**SMALL)
    for instance in (done, interrupted):
        boot(transport, scheduler, instance)
    resize_in_place(transport, scheduler, done, 20, LARGE)
    outcome(scheduler, done["uuid"])
    conf.set_override("migration_time_per_gb", 600, "fake")
    resize_in_place(transport, scheduler, interrupted, 21, LARGE)
    wait_for(lambda: "resize" in first.store.get(interrupted["uuid"]), "the second resize under way")
    first.stop()
    assert scheduler.move_updates(interrupted["uuid"]) == []

    conf.set_override("migration_time_per_gb", 0, "fake")
    second = ComputeManager(conf, transport, host=HOST)
    second.start()
    try:
        assert second.tracker.usage() == (RESERVED + 2 * 2048, 40, 4)
        assert outcome(scheduler, interrupted["uuid"], "the resumed resize") == [(21, "done", None)]
        second.end_resize({}, done["uuid"], 20, False)
        assert second.tracker.usage() == (RESERVED + 1024 + 2048, 30, 3)
    finally:
        second.stop()


# -- telemetry ------------------------------------------------------------------------------


def test_moves_are_counted_by_outcome_and_timed(conf, transport, scheduler, agents):
    def counts():
        return (value("berth_agent_moves_total", outcome="done"),
                value("berth_agent_moves_total", outcome="failed"),
                value("berth_agent_migrate_in_seconds_count"))

    conf.set_override("memory_mb", 4096, "fake")
    agents()
    done_before, failed_before, timed_before = counts()
    ok, too_big = make_instance(), make_instance(memory_mb=8192)
    move(transport, ok, migration_of(22), limits={"memory_mb": 4096})
    move(transport, too_big, migration_of(23), limits={"memory_mb": 4096})
    outcome(scheduler, ok["uuid"])
    outcome(scheduler, too_big["uuid"])
    done, failed, timed = counts()
    assert (done - done_before, failed - failed_before, timed - timed_before) == (1, 1, 1)


# -- bad arguments --------------------------------------------------------------------------

UUID = "00000000-0000-4000-8000-000000000001"
GOOD = {"uuid": UUID, "flavor": {"memory_mb": 512, "root_gb": 1, "vcpus": 1}}


class Manager:
    def __init__(self):
        self.calls = []

    def move_instance(self, *args):
        self.calls.append(("move_instance", *args))

    def end_resize(self, *args):
        self.calls.append(("end_resize", *args))


@pytest.mark.parametrize(
    ("instance", "props", "migration", "message"),
    [
        ({"uuid": "nope"}, {}, migration_of(), "move_instance: instance.uuid: must be a UUID"),
        (dict(GOOD, flavor={"vcpus": 1}), {}, migration_of(), "move_instance: instance.flavor.memory_mb"),
        (GOOD, {"limits": {"vcpu": "many"}}, migration_of(), "move_instance: filter_properties.limits.vcpu"),
        (GOOD, {}, None, "move_instance: migration must be an object"),
        (GOOD, {}, dict(migration_of(), id=-1), "move_instance: migration.id must be between"),
        (GOOD, {}, dict(migration_of(), id="1"), "move_instance: migration.id must be an integer"),
        (GOOD, {}, dict(migration_of(), kind="teleport"), "move_instance: migration.kind must be one of"),
        (GOOD, {}, dict(migration_of(), source_host=""), "move_instance: migration.source_host"),
        (GOOD, {}, dict(migration_of(), live="yes"), "move_instance: migration.live must be true or false"),
        (GOOD, {}, dict(migration_of(), old_flavor={"memory_mb": 0, "vcpus": 1}),
         "move_instance: migration.old_flavor.memory_mb"),
    ],
)
def test_a_bad_move_is_refused_naming_the_field(instance, props, migration, message):
    manager = Manager()
    with pytest.raises(InvalidRequest, match=message):
        ComputeV1Endpoint(manager).move_instance({}, instance, {}, props, migration)
    assert manager.calls == []


@pytest.mark.parametrize(
    ("uuid", "migration_id", "confirmed", "message"),
    [
        ("nope", 1, True, "end_resize: instance_uuid: must be a UUID"),
        (UUID, "1", True, "end_resize: migration_id must be an integer"),
        (UUID, True, True, "end_resize: migration_id must be an integer"),
        (UUID, 1, "yes", "end_resize: confirmed must be true or false"),
    ],
)
def test_a_bad_end_resize_is_refused_naming_the_field(uuid, migration_id, confirmed, message):
    manager = Manager()
    with pytest.raises(InvalidRequest, match=message):
        ComputeV1Endpoint(manager).end_resize({}, uuid, migration_id, confirmed)
    assert manager.calls == []


def test_good_moves_and_end_resizes_reach_the_manager():
    manager = Manager()
    endpoint = ComputeV1Endpoint(manager)
    migration = dict(migration_of())
    del migration["live"]
    endpoint.move_instance({}, dict(GOOD, uuid=UUID.upper()), None, None, migration)
    endpoint.end_resize({}, UUID, 3, False)
    assert manager.calls == [("move_instance", {}, GOOD, {}, {}, dict(migration, live=False)),
                             ("end_resize", {}, UUID, 3, False)]


def test_a_bad_move_on_the_wire_is_dead_lettered_and_changes_nothing(conf, transport, scheduler, agents):
    manager = agents()
    instance = make_instance()
    move(transport, instance, dict(migration_of(), kind="teleport"))
    [letter] = dead_letters(transport, 1)
    assert "move_instance: migration.kind must be one of" in letter.headers[deadletter.REASON]
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}
    assert scheduler.move_updates(instance["uuid"]) == []


def test_the_tracker_resizes_only_what_it_holds_and_a_refused_resize_changes_nothing():
    from compute_agent.resource_tracker import ClaimFailed, ResourceTracker

    tracker = ResourceTracker("h", {"memory_mb": 4096, "local_gb": 100, "vcpus": 4})
    tracker.claim("a", SMALL)
    with pytest.raises(KeyError):
        tracker.resize("b", LARGE)
    with pytest.raises(ClaimFailed, match="Insufficient vcpu: requested 7 VCPU, free 3 VCPU of limit 4 VCPU"):
        tracker.resize("a", dict(SMALL, vcpus=8), {"vcpu": 4})
    assert tracker.usage() == (1024, 10, 1)
    assert tracker.resize("a", {"memory_mb": 512, "root_gb": 5, "ephemeral_gb": 20, "vcpus": 2}) == {
        "memory_mb": 1024, "root_gb": 25, "ephemeral_gb": 0, "vcpus": 2}
    assert tracker.settle_resize("a", SMALL) and tracker.usage() == (1024, 10, 1)
    assert not tracker.settle_resize("b", SMALL)


def test_a_report_names_the_moves_held_open_until_they_end(conf, transport, scheduler, agents):
    """What the scheduler sets against the database to tell again an end this agent missed."""
    conf.set_override("report_interval", 3600, "compute_agent")
    manager = agents()
    instance = make_instance(**SMALL)
    uuid = instance["uuid"]
    boot(transport, scheduler, instance)
    assert manager.send_report()["open_moves"] == {}
    resize_in_place(transport, scheduler, instance, 12, LARGE)
    assert outcome(scheduler, uuid) == [(12, "done", None)]
    assert manager.send_report()["open_moves"] == {uuid: [12, "done"]}  # its end not heard yet
    ComputeClient(transport).end_resize({}, HOST, uuid, 12, True)
    wait_for(lambda: "resize" not in manager.store.get(uuid), "the resize settled")
    assert manager.send_report()["open_moves"] == {}
