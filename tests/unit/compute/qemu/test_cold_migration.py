"""The qemu driver's steps of a cold move with the real qemu-img and qemu-nbd, and a stand-in for
qemu: disks are made, served and copied; no guest runs."""

import json
import os
import subprocess
import uuid as uuidlib

import pytest

from compute_agent import conf as agent_conf
from compute_agent.driver import MoveFailed
from compute_agent.driver.qemu import nbd
from compute_agent.driver.qemu.driver import QemuDriver
from scheduler import conf as berth_conf

MIB = 1024 * 1024
GIB = 1024 * MIB

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v qemu-nbd && command -v qemu-io"], capture_output=True).returncode,
    reason="qemu-utils is not installed")


@pytest.fixture
def hosts(qemu_conf, tmp_path):
    """Two drivers (source, destination), each its own instances_path, with an image of a 64 MiB
    disk whose first MiB is 0x11."""
    disk = tmp_path / "images" / "berth-test.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    _write(str(disk), 0, 0x11, MIB)
    drivers = []
    for name in ("source", "destination"):
        conf = berth_conf.new_conf()
        agent_conf.register_opts(conf)
        conf([])
        for option in ("images_path", "accel", "binary"):
            conf.set_override(option, qemu_conf.qemu[option], "qemu")
        conf.set_override("instances_path", str(tmp_path / name), "qemu")
        conf.set_override("host_ip", "127.0.0.1", "compute_agent")
        conf.set_override("migration_port_min", 49300, "qemu")
        conf.set_override("migration_port_max", 49399, "qemu")
        drivers.append(QemuDriver(conf))
    yield drivers
    for driver in drivers:
        path = driver.conf.qemu.instances_path
        for name in os.listdir(path) if os.path.isdir(path) else ():
            driver._remove(driver._files(name))


def _write(disk, offset, pattern, length):
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", f"write -P {pattern} {offset} {length}", disk],
                   check=True, capture_output=True)


def _read_back(disk, offset, pattern, length):
    """Whether ``disk`` holds ``pattern`` over ``length`` bytes from ``offset``."""
    done = subprocess.run(["qemu-io", "-f", "qcow2", "-r", "-U", "-c",
                           f"read -P {pattern} {offset} {length}", disk], capture_output=True, text=True)
    return done.returncode == 0 and "Pattern verification failed" not in done.stdout


def _info(disk):
    return json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", disk], check=True,
                                     capture_output=True, text=True).stdout)


def _instance(uuid, root_gb, ephemeral_gb=0):
    return {"uuid": uuid, "flavor": {"memory_mb": 128, "vcpus": 1, "root_gb": root_gb,
                                     "ephemeral_gb": ephemeral_gb},
            "image": {"id": "berth-test", "properties": {}}}


def _source_disk(driver, uuid, root_gb, ephemeral_gb=0):
    """The instance's directory on ``driver`` as a build makes it, its disks written to."""
    files = driver._files(uuid)
    instance = _instance(uuid, root_gb, ephemeral_gb)
    driver._make_directory(instance, driver.image_of(instance), files)
    _write(files.disk, 8 * MIB, 0x22, MIB)
    if ephemeral_gb:
        _write(files.ephemeral, 16 * MIB, 0x33, MIB)
    return files


def test_a_resize_copies_the_disk_into_a_larger_one_served_over_nbd_and_leaves_the_source_as_it_was(
        hosts):
    source, destination = hosts
    uuid = str(uuidlib.uuid4())
    migration = {"id": 7, "kind": "resize", "live": False, "old_flavor": {"root_gb": 0}}
    source_files = _source_disk(source, uuid, 0)
    before = _info(source_files.disk)

    transfer = destination.prepare_move_in(_instance(uuid, 1), migration)
    address, port = transfer["nbd"].split("://")[1].split("/")[0].split(":")
    assert address == "127.0.0.1" and 49300 <= int(port) <= 49399
    assert transfer["nbd"].endswith(f"/{uuid}")
    # Prepared again (the agent killed after it): the same server, the same transfer.
    assert destination.prepare_move_in(_instance(uuid, 1), migration) == transfer

    source.migrate_out(_instance(uuid, 0), migration, transfer)
    moved = destination._files(uuid)
    assert _read_back(moved.disk, 0, 0x11, MIB) and _read_back(moved.disk, 8 * MIB, 0x22, MIB)
    assert _info(moved.disk)["virtual-size"] == GIB
    # The 1 GiB disk's zeroes went as write-zeroes: nothing of them is written out.
    assert os.stat(moved.disk).st_blocks * 512 < 8 * MIB
    assert _info(source_files.disk) == before and _read_back(source_files.disk, 8 * MIB, 0x22, MIB)
    assert os.path.exists(os.path.join(source_files.directory, "moving-out.json"))

    # Run again after a kill mid-copy: copied again, the same.
    source.migrate_out(_instance(uuid, 0), migration, transfer)
    assert _read_back(moved.disk, 8 * MIB, 0x22, MIB)

    destination.destroy(_instance(uuid, 1))
    assert not os.path.exists(moved.directory)
    assert not nbd.runs(moved.directory, moved.disk)


def test_an_ephemeral_disk_is_served_and_copied_beside_the_root_disk(hosts):
    source, destination = hosts
    uuid = str(uuidlib.uuid4())
    migration = {"id": 13, "kind": "migration", "live": False,
                 "old_flavor": {"root_gb": 1, "ephemeral_gb": 1}}
    _source_disk(source, uuid, 1, ephemeral_gb=1)
    transfer = destination.prepare_move_in(_instance(uuid, 1, 1), migration)
    assert sorted(transfer) == ["nbd", "nbd_ephemeral"]
    assert transfer["nbd_ephemeral"].endswith(f"/{uuid}-ephemeral")
    assert transfer["nbd"] != transfer["nbd_ephemeral"]
    source.migrate_out(_instance(uuid, 1, 1), migration, transfer)
    moved = destination._files(uuid)
    assert _read_back(moved.ephemeral, 16 * MIB, 0x33, MIB) and _read_back(moved.disk, 8 * MIB, 0x22, MIB)
    destination.destroy(_instance(uuid, 1, 1))
    assert not nbd.runs(moved.directory, moved.ephemeral, "ephemeral")


def test_a_root_disk_smaller_than_the_instances_is_refused(hosts):
    _, destination = hosts
    uuid = str(uuidlib.uuid4())
    migration = {"id": 8, "kind": "resize", "live": False, "old_flavor": {"root_gb": 2}}
    with pytest.raises(MoveFailed, match=f"cannot give {uuid} a root disk of 1 GB: its disk is 2 GB and "
                       "qemu cannot shrink a disk"):
        destination.prepare_move_in(_instance(uuid, 1), migration)
    assert not os.path.exists(destination._files(uuid).directory)


def test_an_evacuation_rebuilds_from_the_image_and_serves_nothing(hosts):
    _, destination = hosts
    uuid = str(uuidlib.uuid4())
    transfer = destination.prepare_move_in(_instance(uuid, 0),
                      {"id": 9, "kind": "evacuation", "live": False})
    files = destination._files(uuid)
    assert transfer == {}
    assert _read_back(files.disk, 0, 0x11, MIB) and _read_back(files.disk, 8 * MIB, 0, MIB)
    assert not nbd.runs(files.directory, files.disk)


def test_a_copy_to_a_destination_that_does_not_serve_fails_saying_so_and_the_guest_is_not_lost(
        hosts):
    source, _ = hosts
    uuid = str(uuidlib.uuid4())
    files = _source_disk(source, uuid, 0)
    with pytest.raises(MoveFailed, match=f"cannot reach the destination's disk of {uuid}"):
        source.migrate_out(_instance(uuid, 0), {"id": 10, "kind": "migration", "live": False},
               {"nbd": "nbd://127.0.0.1:49399/x"})
    # Off for the move: not reported lost while the scheduler aborts it.
    assert source.lost([uuid]) == {}
    assert _read_back(files.disk, 8 * MIB, 0x22, MIB)


def test_finishing_ends_qemu_nbd_then_boots_and_a_guest_that_will_not_boot_fails_the_move_saying_so(hosts):
    _, destination = hosts
    uuid = str(uuidlib.uuid4())
    migration = {"id": 11, "kind": "migration", "live": False, "old_flavor": {"root_gb": 0}}
    transfer = destination.prepare_move_in(_instance(uuid, 0), migration)
    files = destination._files(uuid)
    assert nbd.runs(files.directory, files.disk)
    # The stand-in qemu starts no guest.
    with pytest.raises(MoveFailed, match=f"cannot boot {uuid} on its new host: the guest died during boot"):
        destination.finish_move_in(_instance(uuid, 0), migration, transfer)
    assert not nbd.runs(files.directory, files.disk) and nbd.read_transfer(files.directory) is None
    assert files.has_disk()  # left for the agent's destroy


def _failed_move_out(source, migration_id):
    """(uuid, migration) of a guest whose cold move out of ``source`` failed: it is off, its disk kept."""
    uuid = str(uuidlib.uuid4())
    _source_disk(source, uuid, 0)
    migration = {"id": migration_id, "kind": "migration", "live": False}
    with pytest.raises(MoveFailed):
        source.migrate_out(_instance(uuid, 0), migration, {"nbd": "nbd://127.0.0.1:49399/x"})
    return uuid, migration


def test_an_aborted_move_whose_guest_does_not_boot_again_is_lost_saying_why(hosts):
    source, _ = hosts
    uuid, migration = _failed_move_out(source, 12)
    with pytest.raises(Exception, match="the guest died during boot"):
        source.abort_move_out(_instance(uuid, 0), migration)
    assert "its guest is gone" in source.lost([uuid])[uuid]


def test_a_guest_booting_again_after_an_abort_is_not_lost_while_it_boots(hosts, monkeypatch):
    source, _ = hosts
    uuid, migration = _failed_move_out(source, 13)
    seen_while_booting = []

    def power_on(instance):
        # The agent's look at its guests runs in another thread; here it runs mid-boot.
        seen_while_booting.append(source.lost([uuid]))

    monkeypatch.setattr(source, "power_on", power_on)
    source.abort_move_out(_instance(uuid, 0), migration)
    assert seen_while_booting == [{}]
