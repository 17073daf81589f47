"""The qemu driver alone, on a real qemu: a guest that dies during boot fails its build with its
console's last lines, and leaves no process and no file."""

import json
import os
import shutil
import uuid as uuidlib

import pytest

from compute_agent import conf as agent_conf
from compute_agent.driver.qemu.driver import GuestFailed, QemuDriver
from scheduler import conf as berth_conf
from tests.guests.guests import qemu_processes


@pytest.fixture
def driver(tmp_path, guest_image):
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(guest_image / "berth-test-vmlinuz", images)
    # An initramfs the kernel cannot unpack: it looks for a root file system, finds none and panics.
    (images / "junk.img").write_bytes(b"not an initramfs\n" * 64)
    (images / "panics.json").write_text(json.dumps({
        "kernel_id": "berth-test-vmlinuz", "ramdisk_id": "junk.img",
        "os_command_line": "console=ttyS0 panic=-1", "console_ready": "berth-guest: up"}))
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([])
    conf.set_override("state_path", str(tmp_path / "state"))
    conf.set_override("images_path", str(images), "qemu")
    conf.set_override("accel", "tcg", "qemu")
    yield QemuDriver(conf)
    conf.reset()


def test_a_guest_that_dies_during_boot_fails_the_build_with_its_console_and_leaves_nothing(driver):
    uuid = str(uuidlib.uuid4())
    instance = {"uuid": uuid, "flavor": {"memory_mb": 128, "vcpus": 1}, "image": {"id": "panics"}}
    said = "the guest died during boot; its console's last lines: .*Kernel panic - not syncing"
    with pytest.raises(GuestFailed, match=said):
        driver.spawn(instance)
    assert qemu_processes(uuid) == []
    assert os.listdir(driver.conf.qemu.instances_path) == []
