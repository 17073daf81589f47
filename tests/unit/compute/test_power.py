"""An instance's power on the agent (compute API 2.1) over memory://, with a stub scheduler:
stop, start and reboot run by the driver in a worker and said with instance_update, the claim kept
while SHUTOFF, a restart keeping it off, and the console the fake driver keeps."""

import pytest

from compute_agent.client import ComputeClient
from compute_agent.driver import HostDriver
from compute_agent.manager import ComputeManager
from scheduler import rpc
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for


def boot(transport, scheduler, memory_mb=1024):
    instance = make_instance(memory_mb=memory_mb)
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    return instance["uuid"]


def said(scheduler, uuid, count):
    """The states the agent said of ``uuid``, once it said ``count`` of them."""
    return wait_for(lambda: (s := scheduler.states(uuid)) and len(s) >= count and s, f"{count} updates")


def console(transport, uuid, lines=None):
    return ComputeClient(transport).console_output({}, HOST, uuid, lines)["lines"]


def test_stop_start_and_reboot_are_said_and_the_console_tells_each(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    manager = agents()
    uuid = boot(transport, scheduler, memory_mb=2048)
    client = ComputeClient(transport)

    client.power({}, HOST, uuid, "power_off")
    assert said(scheduler, uuid, 3) == ["BUILDING", "ACTIVE", "SHUTOFF"]
    assert manager.store.get(uuid)["state"] == "SHUTOFF"
    assert uuid in manager.tracker.instance_uuids()  # its claim kept
    assert manager.send_report()["memory_mb_used"] == 512 + 2048

    client.power({}, HOST, uuid, "power_on")
    assert said(scheduler, uuid, 4)[-1] == "ACTIVE"
    client.power({}, HOST, uuid, "reboot")
    assert said(scheduler, uuid, 5)[-1] == "ACTIVE"
    client.power({}, HOST, uuid, "reboot", hard=True)
    assert said(scheduler, uuid, 6)[-1] == "ACTIVE"
    assert manager.store.get(uuid)["state"] == "ACTIVE" and "power" not in manager.store.get(uuid)

    prefix = f"berth fake console: {uuid}"
    assert console(transport, uuid) == [f"{prefix} {what}" for what in (
        "booted", "powered off", "powered on", "booted", "rebooted", "booted", "rebooted (hard)", "booted")]
    assert console(transport, uuid, 2) == [f"{prefix} rebooted (hard)", f"{prefix} booted"]


def test_a_stop_said_again_is_not_done_twice_and_a_start_of_a_running_instance_is_an_error(
        conf, transport, scheduler, agents):
    agents()
    uuid = boot(transport, scheduler)
    client = ComputeClient(transport)
    client.power({}, HOST, uuid, "power_off")
    said(scheduler, uuid, 3)
    client.power({}, HOST, uuid, "power_off")  # its SHUTOFF was lost: said again, nothing done
    assert said(scheduler, uuid, 4)[-1] == "SHUTOFF"
    assert console(transport, uuid).count(f"berth fake console: {uuid} powered off") == 1
    client.power({}, HOST, uuid, "reboot")  # the scheduler refuses this: an agent told so says why
    assert said(scheduler, uuid, 5)[-1] == "ERROR"
    assert scheduler.updates[-1][3] == {
        "reason": f"{HOST}: {uuid} is SHUTOFF here, not ACTIVE; cannot reboot it"}


def test_a_driver_without_power_control_changes_nothing_and_says_why(conf, transport, scheduler, agents):
    manager = agents(driver=HostDriver(conf))
    uuid = boot(transport, scheduler)
    ComputeClient(transport).power({}, HOST, uuid, "power_off")
    assert said(scheduler, uuid, 3)[-1] == "ERROR"
    assert scheduler.updates[-1][3] == {
        "reason": f"{HOST}: its host driver cannot power instances off and on"}
    assert manager.store.get(uuid)["state"] == "ACTIVE"
    assert "CUSTOM_BERTH_POWER_CONTROL" not in manager.send_report()["traits"]
    with pytest.raises(rpc.RemoteError, match="its host driver keeps no console of its instances"):
        console(transport, uuid)


def test_a_restart_keeps_a_shutoff_instance_off_and_its_claim(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    first = agents()
    uuid, other = boot(transport, scheduler, memory_mb=2048), boot(transport, scheduler, memory_mb=1024)
    ComputeClient(transport).power({}, HOST, uuid, "power_off")
    said(scheduler, uuid, 3)
    first.stop()

    second = ComputeManager(conf, transport, host=HOST)
    second.start()
    try:
        assert second.store.get(uuid)["state"] == "SHUTOFF"
        report = second.send_report()
        assert report["instance_uuids"] == sorted([uuid, other])
        assert report["memory_mb_used"] == 512 + 2048 + 1024
        assert set(report["instance_usage"]) == {other}  # off: it uses nothing, no sample of it
        assert scheduler.states(uuid) == ["BUILDING", "ACTIVE", "SHUTOFF"]  # nothing said again
        assert console(transport, uuid)[-1] == f"berth fake console: {uuid} powered off"
    finally:
        second.stop()


def test_a_power_off_interrupted_by_a_stop_resumes_when_the_agent_starts(conf, transport, scheduler, agents):
    first = agents()
    uuid = boot(transport, scheduler)
    conf.set_override("power_time", 600, "fake")
    ComputeClient(transport).power({}, HOST, uuid, "power_off")
    wait_for(lambda: first.store.get(uuid)["state"] == "POWERING_OFF", "POWERING_OFF recorded")
    first.stop()  # interrupts the 600 s power off promptly
    assert first.store.get(uuid)["state"] == "POWERING_OFF"

    conf.set_override("power_time", 0, "fake")
    second = ComputeManager(conf, transport, host=HOST)
    second.start()
    try:
        assert said(scheduler, uuid, 3) == ["BUILDING", "ACTIVE", "SHUTOFF"]
        assert second.store.get(uuid)["state"] == "SHUTOFF"
    finally:
        second.stop()


def test_a_terminate_during_a_power_off_wins(conf, transport, scheduler, agents):
    manager = agents()
    uuid = boot(transport, scheduler)
    conf.set_override("power_time", 600, "fake")
    client = ComputeClient(transport)
    client.power({}, HOST, uuid, "power_off")
    wait_for(lambda: manager.store.get(uuid)["state"] == "POWERING_OFF", "POWERING_OFF recorded")
    client.terminate_instance({}, HOST, uuid)
    assert said(scheduler, uuid, 3)[-1] == "DELETED"
    assert uuid not in manager.tracker.instance_uuids()
    manager.stop()  # ends the power off's wait: it finds the instance gone, and says nothing
    assert scheduler.states(uuid) == ["BUILDING", "ACTIVE", "DELETED"]
    assert manager.store.get(uuid) is None


def test_the_console_of_an_instance_the_host_does_not_hold_is_not_found(conf, transport, scheduler, agents):
    agents()
    with pytest.raises(rpc.RemoteError) as refused:
        console(transport, "0b0e6f0e-3b5a-4c9a-9f5e-0a0a0a0a0a0a")
    assert refused.value.exc_type == "InstanceNotFound"
    assert refused.value.value == f"{HOST} does not hold instance 0b0e6f0e-3b5a-4c9a-9f5e-0a0a0a0a0a0a"


def test_a_hard_reboot_boots_an_instance_in_error_again_and_a_soft_one_is_refused(conf, transport, scheduler,
                                                                                  agents):
    manager = agents()
    uuid = boot(transport, scheduler)
    manager.store.set_state(uuid, "ERROR")  # its guest was found gone
    client = ComputeClient(transport)
    client.power({}, HOST, uuid, "reboot")
    assert said(scheduler, uuid, 3)[-1] == "ERROR"
    assert scheduler.updates[-1][3] == {
        "reason": f"{HOST}: {uuid} is ERROR here, not ACTIVE; cannot reboot it"}
    client.power({}, HOST, uuid, "reboot", hard=True)
    assert said(scheduler, uuid, 4)[-1] == "ACTIVE"
    assert manager.store.get(uuid)["state"] == "ACTIVE"
