"""berth-all-in-one --driver qemu, up to where it would start: its options, its defaults, the
image directory it checks, each agent's instances_path (the guests themselves: tests/guests)."""

import io
import shutil
import subprocess
import sys

import pytest

from scheduler.cmd import all_in_one, all_in_one_guests

QEMU = shutil.which("qemu-system-x86_64") is not None


def write_conf(tmp_path, *lines):
    path = tmp_path / "berth.conf"
    path.write_text("\n".join(["[DEFAULT]", f"state_path = {tmp_path / 'state'}", "[prometheus]",
                               "listen_port = 0", *lines]) + "\n")
    return str(path)


def loaded(tmp_path, *argv, lines=()):
    """The options berth-all-in-one runs with, and what main() returned (it is not started)."""
    seen = {}

    def run(conf, out, demo_log):
        seen["conf"] = conf
        return 0

    status = None
    original = all_in_one.run
    all_in_one.run = run
    try:
        status = all_in_one.main(["--config-file", write_conf(tmp_path, *lines), *argv], out=io.StringIO())
    finally:
        all_in_one.run = original
    return seen.get("conf"), status


def test_driver_qemu_gives_two_agents_a_laptops_host_each_and_migrations_over_loopback(tmp_path):
    (tmp_path / "state" / "images").mkdir(parents=True)
    (tmp_path / "state" / "images" / "berth-test.json").write_text("{}")
    conf, status = loaded(tmp_path, "--driver", "qemu")
    assert status == 0
    assert conf.compute_agent.driver == "qemu" and conf.agents == 2
    assert (conf.qemu.memory_mb, conf.qemu.vcpus, conf.compute_agent.host_ip) == (1536, 2, "127.0.0.1")
    assert all_in_one_guests.instances_path(conf, "vm-compute-2") == str(
        tmp_path / "state" / "instances" / "vm-compute-2")


def test_the_operators_sizes_and_agents_win_over_the_demos(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "mine.qcow2").write_text("")
    conf, status = loaded(tmp_path, "--driver", "qemu", "--agents", "3",
                          lines=["[qemu]", "memory_mb = 4096", f"images_path = {tmp_path / 'images'}"])
    assert status == 0 and (conf.agents, conf.qemu.memory_mb, conf.qemu.vcpus) == (3, 4096, 2)


def test_without_driver_qemu_nothing_changes(tmp_path):
    conf, status = loaded(tmp_path)
    assert status == 0
    assert (conf.compute_agent.driver, conf.agents, conf.qemu.memory_mb) == ("fake", 4, None)


@pytest.mark.parametrize("make, said", [(False, "does not exist"), (True, "holds no image")])
def test_an_image_directory_without_an_image_stops_the_start_saying_how_to_build_one(tmp_path, make, said):
    images = tmp_path / "state" / "images"
    if make:
        images.mkdir(parents=True)
        (images / "notes.txt").write_text("")
    conf, status = loaded(tmp_path, "--driver", "qemu")
    assert conf is None
    assert status == (f"berth-all-in-one: cannot start: [qemu] images_path {images} {said}: build the "
                      "test image into it first, from Berth's source tree: "
                      f"python3 tools/build-guest-image {images}")


@pytest.mark.parametrize("demo", ["--demo", "--demo-scaling"])
def test_the_fake_workload_demos_refuse_driver_qemu(tmp_path, demo):
    conf, status = loaded(tmp_path, "--driver", "qemu", demo)
    assert conf is None and status.startswith(f"berth-all-in-one: {demo} runs fake agents")


def test_an_unknown_driver_is_refused_naming_the_installed_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        loaded(tmp_path, "--driver", "xen")
    assert "unknown driver 'xen'; use one of" in str(exited.value.code)


@pytest.mark.skipif(not QEMU, reason="the qemu driver needs qemu-system-x86_64 installed")
def test_each_agents_driver_has_its_own_instances_path(tmp_path):
    (tmp_path / "state" / "images").mkdir(parents=True)
    (tmp_path / "state" / "images" / "berth-test.json").write_text("{}")
    conf, _ = loaded(tmp_path, "--driver", "qemu")
    drivers = all_in_one_guests.drivers(conf, all_in_one.agent_hosts(conf))
    assert {host: d.instances_path for host, d in drivers.items()} == {
        host: str(tmp_path / "state" / "instances" / host) for host in all_in_one.agent_hosts(conf)}


class Driver:
    def __init__(self, running):
        self.running = list(running)
        self.destroyed = []

    def guests_running(self):
        return list(self.running)

    def destroy(self, instance):
        self.destroyed.append(instance["uuid"])
        self.running.remove(instance["uuid"])


class Scheduler:
    """Lists the instances of each host; a delete makes one DELETED, or nothing (``deaf``)."""

    def __init__(self, by_host, deaf=False):
        self.rows = {uuid: {"uuid": uuid, "state": "ACTIVE", "host": host}
                     for host, uuids in by_host.items() for uuid in uuids}
        self.deaf = deaf
        self.deleted = []

    def list_instances(self, ctxt, host=None, uuids=None, **kwargs):
        if self.deaf:
            raise TimeoutError("no scheduler answered")
        if uuids is not None:
            return [self.rows[u] for u in uuids]
        return [r for r in self.rows.values() if r["host"] == host]

    def delete_instance(self, ctxt, uuid):
        self.deleted.append(uuid)
        self.rows[uuid]["state"] = "DELETED"


def test_ctrl_c_deletes_the_agents_guests_through_the_scheduler(capsys):
    drivers = {"h1": Driver([]), "h2": Driver([])}
    scheduler = Scheduler({"h1": ["a", "b"], "h2": ["c"]})
    scheduler.rows["b"]["state"] = "DELETED"
    ending = all_in_one_guests.EndGuests(scheduler, drivers)
    ending.stop()
    assert scheduler.deleted == ["a", "c"]
    said = capsys.readouterr().err
    assert said == "berth-all-in-one: deleting the 2 guest(s) of its qemu agents before it stops\n"


def test_ctrl_c_without_a_scheduler_answering_still_ends_every_guest_saying_so(capsys):
    drivers = {"h1": Driver(["a"]), "h2": Driver(["c"])}
    ending = all_in_one_guests.EndGuests(Scheduler({"h1": ["a"], "h2": ["c"]}, deaf=True), drivers)
    ending.stop()
    assert (drivers["h1"].destroyed, drivers["h2"].destroyed) == (["a"], ["c"])
    assert capsys.readouterr().err == ("berth-all-in-one: ended the qemu of 2 guest(s) whose delete had not "
                                       "finished (a, c): started again, it reports them in ERROR\n")


@pytest.mark.skipif(not QEMU, reason="the qemu driver needs qemu-system-x86_64 installed")
def test_a_qemu_that_cannot_run_here_stops_the_start_in_one_line(tmp_path):
    (tmp_path / "state" / "images").mkdir(parents=True)
    (tmp_path / "state" / "images" / "berth-test.json").write_text("{}")
    conf_file = write_conf(tmp_path, "[qemu]", "accel = tcg", "cpu_model = host")
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.all_in_one", "--config-file", conf_file,
                           "--driver", "qemu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "berth-all-in-one: cannot start: [qemu] cpu_model = host needs KVM, and guests run under TCG here "
        "([qemu] accel = tcg): set another cpu_model, or none")
    assert "Traceback" not in done.stderr
