"""The qemu driver's options, totals and failures, with stand-ins for qemu: no guest runs."""

import os
import shutil
import uuid as uuidlib

import pytest

from compute_agent.driver import CannotStart, Capabilities, MoveFailed, installed
from compute_agent.driver.qemu import images
from compute_agent.driver.qemu.driver import GuestFailed, QemuDriver
from tests.unit.compute.qemu.conftest import write_script


def _instance(image="berth-test", memory_mb=128, root_gb=0):
    return {"uuid": str(uuidlib.uuid4()), "flavor": {"memory_mb": memory_mb, "vcpus": 1, "root_gb": root_gb},
            "image": {"id": image, "properties": {}}}


def _kernel_image(qemu_conf):
    directory = qemu_conf.qemu.images_path
    with open(os.path.join(directory, "k"), "wb") as f:
        f.write(b"kernel")
    with open(os.path.join(directory, "berth-test.json"), "w", encoding="utf-8") as f:
        f.write('{"kernel_id": "k"}')


def test_qemu_is_an_installed_driver():
    assert installed.driver_class("qemu") is QemuDriver


def test_a_port_range_upside_down_is_refused(qemu_conf):
    qemu_conf.set_override("migration_port_min", 50000, "qemu")
    qemu_conf.set_override("migration_port_max", 49999, "qemu")
    with pytest.raises(ValueError, match="migration_port_min 50000 is above migration_port_max 49999"):
        QemuDriver(qemu_conf)


def test_totals_are_the_hosts_unless_set(qemu_conf):
    read = QemuDriver(qemu_conf).get_totals()
    assert read["vcpus"] == os.cpu_count() and read["memory_mb"] > 0 and read["local_gb"] > 0
    for name, value in (("memory_mb", 4096), ("local_gb", 40), ("vcpus", 3)):
        qemu_conf.set_override(name, value, "qemu")
    assert QemuDriver(qemu_conf).get_totals() == {"memory_mb": 4096, "local_gb": 40, "vcpus": 3}


def test_facts_say_qemu_and_its_version(qemu_conf):
    facts = QemuDriver(qemu_conf).get_facts()
    assert facts["hypervisor_type"] == "QEMU"
    assert facts["hypervisor_version"] == 7002022
    assert facts["vm_modes"] == ["hvm"] and facts["cpu_arch"]


def test_the_driver_declares_what_it_does():
    assert QemuDriver.capabilities == Capabilities(live_migration=True, measures_usage=True,
                                                   power_control=True)


def test_a_move_of_compute_api_1_is_refused(qemu_conf):
    with pytest.raises(MoveFailed, match=r"capped below it \(\[upgrade_levels\] compute\)"):
        QemuDriver(qemu_conf).migrate_in(_instance(), {"id": 1, "kind": "migration", "live": True})


def test_migrating_out_a_guest_that_does_not_run_here_fails(qemu_conf):
    with pytest.raises(MoveFailed, match="does not run here: nothing to migrate"):
        QemuDriver(qemu_conf).migrate_out(_instance(), {"id": 1, "live": True}, {"uri": "tcp:127.0.0.1:1"})


@pytest.mark.parametrize("image, says", [
    ("absent", "no image absent in"),
    (None, "the build names no image"),
])
def test_a_build_of_no_image_fails_with_the_reason_and_makes_nothing(qemu_conf, image, says):
    driver = QemuDriver(qemu_conf)
    instance = _instance(image)
    with pytest.raises(images.ImageError, match=says):
        driver.spawn(instance)
    assert not os.path.exists(os.path.join(qemu_conf.qemu.instances_path, instance["uuid"]))


def test_a_flavor_asking_its_root_disk_of_a_volume_is_refused_saying_this_driver_has_none(qemu_conf):
    _kernel_image(qemu_conf)
    instance = _instance()
    instance["flavor"] = dict(instance["flavor"], root_gb=20, extra_specs={"resources:DISK_GB": "0"})
    with pytest.raises(GuestFailed, match=r"the qemu driver has no volumes: the flavor asks its 20 GB root "
                                          r"disk of a volume \(resources:DISK_GB=0\)"):
        QemuDriver(qemu_conf).spawn(instance)
    assert not os.path.exists(os.path.join(qemu_conf.qemu.instances_path, instance["uuid"]))


def test_the_default_image_serves_a_build_that_names_none(qemu_conf, tmp_path):
    _kernel_image(qemu_conf)
    qemu_conf.set_override("default_image", "berth-test", "qemu")
    assert QemuDriver(qemu_conf).image_of(_instance(None)).name == "berth-test"


def test_a_qemu_that_will_not_start_fails_the_build_with_its_words_and_leaves_nothing(qemu_conf, tmp_path):
    _kernel_image(qemu_conf)
    said = "qemu-system-x86_64: -accel tcg: no accelerator found"
    qemu_conf.set_override("binary", write_script(tmp_path / "qemu", f'echo "{said}" >&2\nexit 1\n'), "qemu")
    instance = _instance()
    with pytest.raises(GuestFailed, match=f"qemu did not start: {said}"):
        QemuDriver(qemu_conf).spawn(instance)
    assert os.listdir(qemu_conf.qemu.instances_path) == []


def test_a_qemu_that_stops_once_daemonized_fails_the_build_with_the_words_of_its_log(qemu_conf, tmp_path):
    # As a qemu whose KVM cannot run the guest: it says why in its -D log, not on stderr.
    _kernel_image(qemu_conf)
    qemu_conf.set_override("binary", write_script(tmp_path / "qemu", """log=
for arg; do [ "$prev" = -D ] && log=$arg; prev=$arg; done
echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" > "$log"
exit 1
"""), "qemu")
    said = "qemu did not start: qemu-system-x86_64: error: failed to set MSR 0x10a"
    with pytest.raises(GuestFailed, match=said):
        QemuDriver(qemu_conf).spawn(_instance())
    assert os.listdir(qemu_conf.qemu.instances_path) == []


def test_an_agent_whose_qemu_is_not_installed_does_not_start(qemu_conf):
    qemu_conf.set_override("binary", "/nonexistent/qemu-system-x86_64", "qemu")
    with pytest.raises(CannotStart,
                       match=r"\[qemu\] binary /nonexistent/qemu-system-x86_64 is not installed"):
        QemuDriver(qemu_conf)


def test_a_guest_gone_before_it_ran_fails_the_build_with_its_console(qemu_conf, tmp_path):
    _kernel_image(qemu_conf)
    # "Starts" (exit 0) without running anything: as a guest that died at once.
    qemu_conf.set_override("binary", write_script(tmp_path / "qemu", "exit 0\n"), "qemu")
    instance = _instance()
    with pytest.raises(GuestFailed, match=r"the guest died during boot; its console's last lines: \(empty\)"):
        QemuDriver(qemu_conf).spawn(instance)
    assert os.listdir(qemu_conf.qemu.instances_path) == []


@pytest.mark.skipif(shutil.which("qemu-img") is None, reason="qemu-img is not installed (qemu-utils)")
def test_a_flavor_disk_smaller_than_the_images_is_refused(qemu_conf, tmp_path):
    import subprocess

    disk = os.path.join(qemu_conf.qemu.images_path, "big.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", disk, "2G"], check=True)
    instance = _instance("big", root_gb=1)
    with pytest.raises(GuestFailed, match="image big's disk is 2.00 GB, more than the flavor's root disk"):
        QemuDriver(qemu_conf).spawn(instance)
    assert os.listdir(qemu_conf.qemu.instances_path) == []


def test_an_instance_with_no_guest_is_lost_at_start_and_deleted_quietly(qemu_conf):
    driver = QemuDriver(qemu_conf)
    uuid = str(uuidlib.uuid4())
    lost = driver.attach([uuid])
    assert lost == {uuid: "its guest is gone (no qemu runs it); its console's last lines: (empty)"}
    driver.destroy({"uuid": uuid})


def test_a_kernel_panic_is_said_above_the_last_lines_of_the_console(tmp_path):
    from compute_agent.driver.qemu.guest_files import GuestFiles

    files = GuestFiles(str(tmp_path))
    panic = "[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root fs"
    trace = "".join(f"[ 1.{n}] frame {n}\r\n" for n in range(20))
    (tmp_path / "console.log").write_text(f"booting\r\n{panic}\r\n{trace}")
    assert files.console_tail(2) == f"{panic} | ... | [ 1.18] frame 18 | [ 1.19] frame 19"


def test_the_console_is_the_guests_serial_log_its_last_lines_oldest_first(qemu_conf):
    driver = QemuDriver(qemu_conf)
    instance = _instance()
    files = driver._files(instance["uuid"])
    assert driver.console_output(instance) == []  # no console yet
    os.makedirs(files.directory)
    with open(files.console, "wb") as f:
        f.write(b"berth-guest: up\r\nberth-guest: alive 1\r\nberth-guest: alive 2\r\n")
    assert driver.console_output(instance) == ["berth-guest: up", "berth-guest: alive 1",
                                               "berth-guest: alive 2"]
    assert driver.console_output(instance, 2) == ["berth-guest: alive 1", "berth-guest: alive 2"]


def test_powering_off_a_guest_whose_qemu_is_gone_does_nothing_and_keeps_its_disk(qemu_conf):
    driver = QemuDriver(qemu_conf)
    instance = _instance()
    files = driver._files(instance["uuid"])
    os.makedirs(files.directory)
    with open(files.disk, "wb") as f:
        f.write(b"disk")
    driver.power_off(instance)
    driver.restore_power_state(instance, powered_on=False)
    assert os.path.exists(files.disk)


def test_a_stopped_guest_boots_again_from_the_image_its_disk_was_made_from(qemu_conf, monkeypatch):
    """The agent's record of a stopped instance names no image, and no default_image is set."""
    _kernel_image(qemu_conf)
    driver = QemuDriver(qemu_conf)
    booted = []
    monkeypatch.setattr(driver, "_start", lambda argv, files: booted.append(argv))
    monkeypatch.setattr(driver, "_wait_until_up",
                        lambda files, uuid, image, since=0: booted.append(image.name))
    instance = _instance()
    driver.spawn(instance)
    assert driver._files(instance["uuid"]).read_image() == "berth-test"
    driver.power_on({"uuid": instance["uuid"], "flavor": instance["flavor"]})
    assert booted[-1] == "berth-test" and "-kernel" in booted[-2]


def test_a_second_agent_on_the_same_instances_path_does_not_start(qemu_conf):
    first, second = QemuDriver(qemu_conf), QemuDriver(qemu_conf)
    first.attach([])
    with pytest.raises(CannotStart, match=r"instances_path .* is used by another agent on this machine: give "
                       "each agent an instances_path of its own"):
        second.attach([])
    first.stop()
    second.attach([])  # free once the first stopped
    second.stop()


def test_guests_see_the_hosts_cpu_under_kvm_and_qemus_default_under_tcg_unless_a_model_is_set(qemu_conf):
    driver = QemuDriver(qemu_conf)
    assert driver.cpu_model() is None
    qemu_conf.set_override("cpu_model", "Haswell-noTSX", "qemu")
    assert driver.cpu_model() == "Haswell-noTSX"
    assert "under tcg (CPU Haswell-noTSX)" in driver.describe()
    kvm = QemuDriver(qemu_conf)
    kvm._accel = "kvm"
    qemu_conf.clear_override("cpu_model", "qemu")
    assert kvm.cpu_model() == "host"


def test_the_hosts_cpu_under_tcg_stops_the_agent_saying_why(qemu_conf):
    qemu_conf.set_override("cpu_model", "host", "qemu")
    with pytest.raises(CannotStart) as raised:
        QemuDriver(qemu_conf).describe()
    assert str(raised.value) == ("[qemu] cpu_model = host needs KVM, and guests run under TCG here "
                                 "([qemu] accel = tcg): set another cpu_model, or none")
