"""The one path of a build, a move in and a resize in place: claim in the tracker, write the
instance record, and give the claim back when the record cannot be written; the scheduler hears
why, the host holds nothing more than before, and the log says what failed."""

import logging

from compute_agent.client import ComputeClient
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.compute.test_compute_manager import sync
from tests.unit.compute.test_moves import (
    LARGE,
    NOTHING,
    SMALL,
    boot,
    migration_of,
    move,
    outcome,
    resize_in_place,
    used,
)


def unwritable(manager):
    """From now on the manager's instance records cannot be written."""

    def put(uuid, record):
        raise OSError("No space left on device")

    manager.store.put = put


def test_a_build_whose_record_cannot_be_written_is_sent_back_holding_nothing(conf, transport, scheduler,
                                                                            agents, caplog):
    manager = agents()
    unwritable(manager)
    instance = make_instance()
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        client = ComputeClient(transport)
        client.run_instance({}, HOST, instance, *request_for(instance))
        [(_, props)] = wait_for(lambda: scheduler.reschedules, "the build sent back")
    assert props["retry"]["exc_reason"] == f"{HOST}: cannot record the instance: No space left on device"
    assert manager.tracker.usage() == NOTHING and instance["uuid"] not in manager.tracker
    sync(scheduler, client)  # a BUILDING would come on another queue than the build sent back
    assert scheduler.states(instance["uuid"]) == []  # never said BUILDING
    [failed] = [r for r in caplog.records if r.getMessage() == f"Cannot record instance {instance['uuid']}"]
    assert failed.levelname == "ERROR" and failed.exc_info


def test_a_build_whose_claim_breaks_is_sent_back(conf, transport, scheduler, agents, caplog):
    manager = agents()

    def claim(*args, **kwargs):
        raise RuntimeError("the tracker broke")

    manager.tracker.claim = claim
    instance = make_instance()
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
        [(_, props)] = wait_for(lambda: scheduler.reschedules, "the build sent back")
    assert props["retry"]["exc_reason"] == f"{HOST}: cannot claim: the tracker broke"
    assert manager.tracker.usage() == NOTHING
    assert f"Cannot claim resources for {instance['uuid']}" in caplog.text


def test_a_move_in_whose_record_cannot_be_written_fails_holding_nothing(conf, transport, scheduler, agents,
                                                                        caplog):
    manager = agents()
    unwritable(manager)
    instance = make_instance()
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        move(transport, instance, migration_of(8))
        assert outcome(scheduler, instance["uuid"]) == [(8, "failed", {
            "reason": f"{HOST}: cannot record the instance: No space left on device"})]
    assert manager.tracker.usage() == NOTHING and instance["uuid"] not in manager.tracker
    assert f"Cannot record instance {instance['uuid']}" in caplog.text


def test_a_resize_in_place_whose_record_cannot_be_written_fails_holding_the_old_flavor(
        conf, transport, scheduler, agents, caplog):
    manager = agents()
    instance = make_instance(**SMALL)
    boot(transport, scheduler, instance)
    unwritable(manager)
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        resize_in_place(transport, scheduler, instance, 12, LARGE)
        assert outcome(scheduler, instance["uuid"]) == [(12, "failed", {
            "reason": f"{HOST}: cannot record the resize: No space left on device"})]
    assert manager.tracker.usage() == used(SMALL)
    assert "resize" not in manager.store.get(instance["uuid"])
    assert f"Cannot record the resize of {instance['uuid']}" in caplog.text
