"""`berth-all-in-one --driver qemu --agents 3` as a newcomer runs it, on the embedded default
(the filesystem:// transport and SQLite in its state_path, no broker or database server):

- six guests booted at once with `berth server create --image berth-test` go ACTIVE on the three agents,
  and `berth console log show` shows each one's marker;
- `berth server migrate --live` moves one to another agent, where it goes on counting;
- Ctrl-C (SIGINT) deletes them, says so, and leaves no qemu running.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.functional.fleet import child_env
from tests.guests.guests import MARKER, kill_leftovers, qemu_processes

HOSTS = ("vm-compute-1", "vm-compute-2", "vm-compute-3")
FLAVOR = ("--flavor-ram", "128", "--flavor-disk", "1", "--flavor-vcpus", "1")
#: Guests boot under TCG in seconds alone, slower on a loaded two-core machine.
BOOT_TIMEOUT = 180
#: Against hangs only.
GUARD = 120


def all_in_one_command():
    script = os.path.join(os.path.dirname(sys.executable), "berth-all-in-one")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "scheduler.cmd.all_in_one"]


class AllInOne:
    def __init__(self, tmp_path, images):
        self.tmp = tmp_path
        self.images = images
        self.conf_file = tmp_path / "berth.conf"
        self.conf_file.write_text("\n".join([
            "[DEFAULT]", f"state_path = {tmp_path / 'state'}",
            "[prometheus]", "listen_port = 0",
            "[compute_agent]", "report_interval = 2",
            "[qemu]", f"images_path = {images}", "kvm_probe_timeout = 3",
        ]) + "\n")
        self.out, self.err = tmp_path / "out.log", tmp_path / "err.log"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.process = subprocess.Popen(
                [*all_in_one_command(), "--driver", "qemu", "--agents", str(len(HOSTS)),
                 "--config-file", str(self.conf_file)],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=tmp_path, env=child_env())

    def said(self):
        return self.err.read_text(errors="replace")

    def berth(self, *args, timeout=GUARD + BOOT_TIMEOUT):
        argv = [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(self.conf_file), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.tmp,
                              env=child_env())
        assert done.returncode == 0, done.stderr
        return done.stdout

    def instances(self):
        rows = self.berth("instances", "-f", "value", "-c", "uuid", "-c", "state", "-c", "host").split("\n")
        return {uuid: (state, host) for uuid, state, host in (row.split() for row in rows if row.strip())}

    def wait(self, predicate, timeout, what):
        """Poll ``predicate`` until it is true; what it returned then."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            assert self.process.poll() is None, f"berth-all-in-one exited: {self.said()[-2000:]}"
            assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
            time.sleep(1)
        return value


@pytest.fixture
def all_in_one(tmp_path, guest_image):
    started = AllInOne(tmp_path, guest_image)
    started.booted = []
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.process.kill()
            started.process.wait()
        kill_leftovers(started.booted)


def test_all_in_one_with_driver_qemu_boots_migrates_and_ends_its_guests_at_ctrl_c(all_in_one):
    all_in_one.wait(lambda: "real guests under qemu" in all_in_one.said(), GUARD, "berth-all-in-one to start")
    assert f"images from {all_in_one.images} (berth server create --image NAME)" in all_in_one.said()
    uuids = all_in_one.berth("boot", *FLAVOR, "--image", "berth-test", "--count", "6").split()
    all_in_one.booted += uuids

    def all_active():  # one `berth server list` a look: each command starts an interpreter
        rows = all_in_one.instances()
        return all(rows.get(u, ("",))[0] == "ACTIVE" for u in uuids) and rows
    rows = all_in_one.wait(all_active, BOOT_TIMEOUT, "the six guests ACTIVE")
    assert {rows[u][1] for u in uuids} == set(HOSTS)  # spread over the three agents
    for uuid in uuids:
        assert MARKER in all_in_one.berth("console-log", uuid, "--lines", "100")

    moved = uuids[0]
    source = rows[moved][1]
    all_in_one.berth("migrate", moved, "--live")

    def moved_off():
        state, host = all_in_one.instances()[moved]
        return state == "ACTIVE" and host != source
    all_in_one.wait(moved_off, GUARD, f"{moved} ACTIVE off {source}")
    counted = all_in_one.berth("console-log", moved, "--lines", "1")
    all_in_one.wait(lambda: all_in_one.berth("console-log", moved, "--lines", "1") != counted, GUARD,
                    "the migrated guest to go on counting")
    assert [p.pid for p in qemu_processes(moved)] != []

    all_in_one.process.send_signal(signal.SIGINT)
    assert all_in_one.process.wait(GUARD) == 0, all_in_one.said()[-2000:]
    assert "berth-all-in-one: deleting the 6 guest(s) of its qemu agents before it stops" in all_in_one.said()
    assert {u: qemu_processes(u) for u in uuids} == dict.fromkeys(uuids, [])
    for host in HOSTS:  # no instance's directory left (its lock file stays)
        assert [p.name for p in (all_in_one.tmp / "state" / "instances" / host).iterdir()] == [".agent.lock"]
