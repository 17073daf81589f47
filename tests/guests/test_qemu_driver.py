"""The qemu driver alone, on a real qemu:

- a guest that dies during boot fails its build with its console's kernel panic, and leaves no
  process and no file;
- a guest that powers itself off is found shut down (its qemu then ended) and boots again from its
  disk; one that reboots itself runs on in the same qemu, neither lost nor shut down;
- a guest migrated live between two drivers goes on counting on the destination, not booted again;
- a live migration aborted once its memory went over leaves the guest running on its source.
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


def _instance(image="berth-test"):
    return {"uuid": str(uuidlib.uuid4()), "flavor": {"memory_mb": 128, "vcpus": 1, "root_gb": 1},
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


def test_a_guest_migrated_live_goes_on_counting_on_its_destination(drivers):
    source, destination = drivers("a"), drivers("b")
    instance = _instance()
    uuid = instance["uuid"]
    source.spawn(instance)
    _until(lambda: len(_counted(source, uuid)) >= 2, "the guest to count")

    transfer = destination.prepare_move_in(instance, LIVE)
    assert transfer["uri"].startswith("tcp:127.0.0.1:")
    source.migrate_out(instance, LIVE, transfer)
    destination.finish_move_in(instance, LIVE, transfer)
    _until(lambda: len(_counted(destination, uuid)) >= 2, "the guest to count on its destination")

    counted_there = _counted(destination, uuid)
    assert MARKER not in _console(destination, uuid)  # not booted again
    assert counted_there[0] > _counted(source, uuid)[-1]  # where it was, not from 1 again
    assert counted_there == list(range(counted_there[0], counted_there[0] + len(counted_there)))
    assert qmp.status(source._files(uuid).qmp) == "postmigrate"  # paused there until terminated
    source.destroy(instance)
    assert [p.pid for p in qemu_processes(uuid)] == [destination._files(uuid).read_pid()]


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
