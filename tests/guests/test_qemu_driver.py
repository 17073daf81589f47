"""The qemu driver alone, on a real qemu:

- a guest that dies during boot fails its build with its console's kernel panic, and leaves no
  process and no file;
- a guest that powers itself off is found shut down (its qemu then ended) and boots again from its
  disk; one that reboots itself runs on in the same qemu, neither lost nor shut down;
- a guest migrated live between two drivers goes on counting on the destination, not booted again,
  its disk mirrored there over NBD (booted again on the destination, it finds the boot counter its
  disk kept), and qemu's figures of the migration said; each step run again carries on, and a
  migration its source's agent left paused before the switch-over ends when migrated out again;
- a guest without a disk (kernel and initramfs alone) migrates its memory alone;
- a live migration aborted once its memory went over, or while its disk is mirrored, leaves the
  guest running on its source (no mirror left).
"""

import json
import os
import re
import shutil
import time
import uuid as uuidlib

import pytest

from compute_agent.driver.qemu import qmp
from compute_agent.driver.qemu.driver import GuestFailed, QemuDriver
from tests.guests.guests import MARKER, qemu_conf, qemu_processes

#: A live migration, as the scheduler gives it to both hosts.
LIVE = {"id": 1, "kind": "migration", "live": True, "source_host": "a", "dest_host": "b"}
#: Guards against a hang only.
TIMEOUT = 120


@pytest.fixture
def images(tmp_path, guest_image):
    images = tmp_path / "images"
    shutil.copytree(guest_image, images)
    # An initramfs the kernel cannot unpack: it looks for a root file system, finds none and panics.
    (images / "junk.img").write_bytes(b"not an initramfs\n" * 64)
    (images / "panics.json").write_text(json.dumps({
        "kernel_id": "berth-test-vmlinuz", "ramdisk_id": "junk.img",
        "os_command_line": "console=ttyS0 panic=-1", "console_ready": MARKER}))
    test = json.loads((images / "berth-test.json").read_text())
    for name, words in {"powers-off": "berth.poweroff=2", "reboots": "berth.reboot=2"}.items():
        (images / f"{name}.json").write_text(json.dumps(
            dict(test, name=name, os_command_line=f"{test['os_command_line']} {words}")))
    (images / "diskless.json").write_text(json.dumps(
        {key: value for key, value in test.items() if key not in ("disk", "disk_format")}))
    return images


@pytest.fixture
def drivers(tmp_path, images):
    """drivers(name): a qemu driver whose instances are under tmp_path/name; their guests are
    destroyed after the test."""
    made, confs = [], []

    def make(name):
        conf = qemu_conf(tmp_path / name, images)
        conf.set_override("accel", "tcg", "qemu")
        confs.append(conf)
        made.append(QemuDriver(conf))
        return made[-1]

    yield make
    for driver in made:
        for uuid in os.listdir(driver.conf.qemu.instances_path) if os.path.isdir(
                driver.conf.qemu.instances_path) else []:
            driver.destroy({"uuid": uuid})
    for conf in confs:
        conf.reset()


def _instance(image="berth-test", ephemeral_gb=0):
    return {"uuid": str(uuidlib.uuid4()), "flavor": {"memory_mb": 128, "vcpus": 1, "root_gb": 1,
                                                     "ephemeral_gb": ephemeral_gb},
            "image": {"id": image, "properties": {}}}


def _console(driver, uuid):
    try:
        with open(driver._files(uuid).console, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _counted(driver, uuid):
    """The numbers of the 'berth-guest: alive N' lines of the guest's console."""
    return [int(n) for n in re.findall(r"berth-guest: alive (\d+)", _console(driver, uuid))]


def _until(condition, what):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_guest_that_dies_during_boot_fails_the_build_with_its_console_and_leaves_nothing(drivers):
    driver = drivers("a")
    instance = _instance("panics")
    said = "the guest's kernel panicked during boot; its console's last lines: .*Kernel panic - not syncing"
    with pytest.raises(GuestFailed, match=said):
        driver.spawn(instance)
    assert qemu_processes(instance["uuid"]) == []
    assert os.listdir(driver.conf.qemu.instances_path) == []


def test_a_guest_that_powers_itself_off_is_found_shut_down_and_boots_again_from_its_disk(drivers):
    driver = drivers("a")
    instance = _instance("powers-off")
    uuid = instance["uuid"]
    driver.spawn(instance)
    _until(lambda: "berth-guest: powering off" in _console(driver, uuid), "the guest to power itself off")
    _until(lambda: driver.shut_down([uuid]), "the driver to find it shut down")
    assert qemu_processes(uuid) == []
    assert driver.shut_down([uuid]) == {}
    driver.power_on(instance)
    _until(lambda: ", boot 2" in _console(driver, uuid), "its second boot, from its own disk")


def test_a_guest_that_reboots_itself_runs_on_in_the_same_qemu(drivers):
    driver = drivers("a")
    instance = _instance("reboots")
    uuid = instance["uuid"]
    driver.spawn(instance)
    [process] = qemu_processes(uuid)
    _until(lambda: ", boot 2" in _console(driver, uuid), "the guest to boot again by itself")
    _until(lambda: "berth-guest: alive 1" in _console(driver, uuid).split(", boot 2")[1], "it to count again")
    assert [p.pid for p in qemu_processes(uuid)] == [process.pid]
    assert driver.lost([uuid]) == {} and driver.shut_down([uuid]) == {}


def test_a_guest_migrated_live_goes_on_counting_on_its_destination_its_disk_with_it(drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance(ephemeral_gb=1)
    uuid = instance["uuid"]
    source.spawn(instance)
    _until(lambda: len(_counted(source, uuid)) >= 2, "the guest to count")
    assert ", boot 1" in _console(source, uuid)  # its disk made, its counter written there

    transfer = destination.prepare_move_in(instance, LIVE)
    assert transfer["uri"].startswith("tcp:127.0.0.1:")
    assert transfer["nbd"]["host"] == "127.0.0.1" and transfer["nbd"]["port"] != int(
        transfer["uri"].rsplit(":", 1)[1])
    assert transfer["nbd"]["exports"] == ["disk0", "ephemeral0"]  # each disk mirrored
    assert destination.prepare_move_in(instance, LIVE) == transfer  # run again: carries on
    figures = source.migrate_out(instance, LIVE, transfer)
    assert set(figures) == {"downtime_ms", "total_ms", "memory_bytes"}
    # qemu counts whole milliseconds: a switch-over under one is 0 (seen on a quiet machine).
    assert 0 <= figures["downtime_ms"] <= figures["total_ms"] and figures["memory_bytes"] > 0
    assert source.migrate_out(instance, LIVE, transfer) == figures  # run again: qemu's word again
    destination.finish_move_in(instance, LIVE, transfer)
    destination.finish_move_in(instance, LIVE, transfer)
    _until(lambda: len(_counted(destination, uuid)) >= 2, "the guest to count on its destination")

    counted_there = _counted(destination, uuid)
    assert MARKER not in _console(destination, uuid)  # not booted again
    assert counted_there[0] > _counted(source, uuid)[-1]  # where it was, not from 1 again
    assert counted_there == list(range(counted_there[0], counted_there[0] + len(counted_there)))
    assert qmp.status(source._files(uuid).qmp) == "postmigrate"  # paused there until terminated
    source.destroy(instance)
    assert [p.pid for p in qemu_processes(uuid)] == [destination._files(uuid).read_pid()]

    # Its disk is the destination's own overlay now: booted again there, the guest counts its second
    # boot on the file system its source made (a disk not mirrored would be made anew: boot 1).
    destination.power_off(instance)
    destination.power_on(instance)
    _until(lambda: ", boot " in _console(destination, uuid).split(MARKER)[-1], "the guest to count its boot")
    assert ", boot 2" in _console(destination, uuid).split(MARKER)[-1]


def test_a_migration_interrupted_at_its_switch_over_carries_on_when_migrated_out_again(drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance()
    uuid = instance["uuid"]
    source.spawn(instance)
    _until(lambda: ", boot 1" in _console(source, uuid), "the guest to count its boot")
    transfer = destination.prepare_move_in(instance, LIVE)
    # What a source agent killed there leaves: its disk mirrored, its memory sent, qemu paused before
    # the switch-over, waiting for the mirror to end.
    files = source._files(uuid)
    source._mirror(files, uuid, transfer["nbd"], ["disk0"])
    with qmp.QMP(files.qmp) as monitor:
        monitor.execute("migrate-set-capabilities", capabilities=[
            {"capability": "pause-before-switchover", "state": True}])
        monitor.execute("migrate", uri=transfer["uri"])

    def at_switch_over():
        with qmp.QMP(files.qmp) as monitor:
            return monitor.execute("query-migrate").get("status") == "pre-switchover"
    _until(at_switch_over, "the migration to pause before its switch-over")

    restarted = drivers("a")  # the agent started again, on the same instances
    figures = restarted.migrate_out(instance, LIVE, transfer)
    # Paused before its switch-over, the guest may be switched over in under a millisecond: 0 ms.
    assert figures["downtime_ms"] >= 0 and figures["total_ms"] > 0, figures
    destination.finish_move_in(instance, LIVE, transfer)
    counted = len(_counted(destination, uuid))
    _until(lambda: len(_counted(destination, uuid)) > counted, "the guest to count on its destination")
    source.destroy(instance)
    destination.power_off(instance)
    destination.power_on(instance)
    _until(lambda: ", boot " in _console(destination, uuid).split(MARKER)[-1], "the guest to count its boot")
    assert ", boot 2" in _console(destination, uuid).split(MARKER)[-1]  # its disk, mirrored whole


def test_a_guest_without_a_disk_migrates_its_memory_alone(drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance("diskless")
    uuid = instance["uuid"]
    source.spawn(instance)
    transfer = destination.prepare_move_in(instance, LIVE)
    assert "nbd" not in transfer
    figures = source.migrate_out(instance, LIVE, transfer)
    # A diskless guest's switch-over may take under a millisecond: qemu then says 0 ms.
    assert figures["downtime_ms"] >= 0 and figures["total_ms"] > 0, figures
    destination.finish_move_in(instance, LIVE, transfer)
    counted = len(_counted(destination, uuid))
    _until(lambda: len(_counted(destination, uuid)) > counted, "the guest to count on its destination")
    assert MARKER not in _console(destination, uuid)


def test_a_live_migration_aborted_once_migrated_leaves_the_guest_running_on_its_source(drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance()
    uuid = instance["uuid"]
    source.spawn(instance)
    transfer = destination.prepare_move_in(instance, LIVE)
    source.migrate_out(instance, LIVE, transfer)
    destination.destroy(instance)  # the scheduler lets the destination go first

    source.abort_move_out(instance, LIVE)
    assert qmp.status(source._files(uuid).qmp) == "running"
    counted = len(_counted(source, uuid))
    _until(lambda: len(_counted(source, uuid)) > counted, "the guest to count on its source again")
    assert [p.pid for p in qemu_processes(uuid)] == [source._files(uuid).read_pid()]


def test_a_live_migration_aborted_while_its_disk_is_mirrored_leaves_the_guest_running_on_its_source(
        drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance()
    uuid = instance["uuid"]
    source.spawn(instance)
    transfer = destination.prepare_move_in(instance, LIVE)
    files = source._files(uuid)
    source._mirror(files, uuid, transfer["nbd"], ["disk0"])  # where a source stopped before its memory went
    destination.destroy(instance)

    source.abort_move_out(instance, LIVE)
    with qmp.QMP(files.qmp) as monitor:
        assert monitor.execute("query-block-jobs") == []
        assert not [node for node in monitor.execute("query-named-block-nodes", flat=True)
                    if node["node-name"].startswith("berth-target-")]
        assert monitor.execute("query-status")["status"] == "running"
    counted = len(_counted(source, uuid))
    _until(lambda: len(_counted(source, uuid)) > counted, "the guest to count on its source again")
