"""What a driver can do is declared on its class (Capabilities); the agent refuses, as a failed
move_update saying why, the moves its driver cannot do, and claims nothing for them."""

import dataclasses
import logging

import pytest

from compute_agent import driver as drivers
from compute_agent.resource_tracker import ResourceTracker
from tests.unit.compute.stub_scheduler import HOST, make_instance
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


class StillDriver(drivers.FakeDriver):
    """A fake host whose driver can neither live-migrate nor resize in place, nor measure."""

    name = "still"
    capabilities = drivers.Capabilities(live_migration=False, resize_in_place=False, measures_usage=False)


def test_the_drivers_declare_what_they_can_do():
    assert drivers.ComputeDriver.capabilities == drivers.Capabilities()  # nothing unless declared
    assert not any(dataclasses.astuple(drivers.Capabilities()))
    fake, host = drivers.FakeDriver.capabilities, drivers.HostDriver.capabilities
    assert (fake.live_migration, fake.resize_in_place, fake.measures_usage) == (True, True, True)
    assert (host.live_migration, host.resize_in_place, host.measures_usage) == (True, True, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fake.live_migration = False  # type: ignore[misc]


def test_a_live_migration_to_a_driver_that_cannot_is_refused_saying_why(conf, transport, scheduler, agents,
                                                                        caplog):
    manager = agents(driver=StillDriver(conf))
    instance = make_instance()
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        move(transport, instance, migration_of(5, kind="live-migration", live=True))
        assert outcome(scheduler, instance["uuid"]) == [(5, "failed", {
            "reason": f"{HOST}: its still driver cannot take in a live migration"})]
    assert manager.tracker.usage() == NOTHING and manager.store.records() == {}
    assert f"Cannot take in {instance['uuid']} (live-migration 5) on {HOST}" in caplog.text


def test_a_cold_move_to_that_driver_is_taken_in(conf, transport, scheduler, agents):
    manager = agents(driver=StillDriver(conf))
    instance = make_instance()
    move(transport, instance, migration_of(6, kind="migration"))
    assert outcome(scheduler, instance["uuid"]) == [(6, "done", None)]
    assert manager.store.get(instance["uuid"])["state"] == "ACTIVE"


def test_a_resize_in_place_on_a_driver_that_cannot_is_refused_and_holds_the_old_flavor(
        conf, transport, scheduler, agents):
    manager = agents(driver=StillDriver(conf))
    instance = make_instance(**SMALL)
    boot(transport, scheduler, instance)
    resize_in_place(transport, scheduler, instance, 9, LARGE)
    assert outcome(scheduler, instance["uuid"]) == [(9, "failed", {
        "reason": f"{HOST}: its still driver cannot resize an instance in place"})]
    assert manager.tracker.usage() == used(SMALL)
    assert "resize" not in manager.store.get(instance["uuid"])


def test_a_driver_that_does_not_measure_sends_no_measured_figures(conf):
    report = ResourceTracker.from_conf(conf, "h", "h", StillDriver(conf)).report()
    assert "instance_usage" not in report
    measured = ResourceTracker.from_conf(conf, "h", "h", drivers.FakeDriver(conf)).report()
    assert "instance_usage" in measured
