"""Berth on its embedded defaults (filesystem:// and SQLite under state_path) whose disk fills
up while requests wait: nothing is lost, nothing is dead-lettered, and once space comes back
every request is placed within seconds, not after a build timeout."""

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from tests.functional.fleet import write_conf

SIZE_MB = 48
FIRST, WAITING = 3, 10


@contextlib.contextmanager
def small_disk(path):
    """A tmpfs of SIZE_MB mounted on ``path`` (root only), unmounted afterwards."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small file system to fill: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(disk):
    """Take every free byte of ``disk``."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        block = b"\0" * (1 << 20)
        while True:
            f.write(block)
    with open(filler, "ab", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 512)
    return filler


def test_a_full_disk_holds_the_requests_and_they_are_placed_once_space_is_back(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        conf = write_conf(tmp_path / "berth.conf", {
            "DEFAULT": {"state_path": disk / "state", "log_file": tmp_path / "all-in-one.log"},
            "prometheus": {"enabled": "false"},
            "compute_agent": {"fake_build_time": "0.2"},
        })

        def berth(*args, timeout=60):
            return subprocess.run([sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(conf),
                                   *args], capture_output=True, text=True, timeout=timeout, cwd=tmp_path)

        def states():
            done = berth("instances", "-f", "json")
            return [i["STATE"] for i in json.loads(done.stdout)] if done.returncode == 0 else None

        proc = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.all_in_one", "--config-file", str(conf),
                                 "--agents", "2"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            log = tmp_path / "all-in-one.log"
            while not (log.exists() and " started on filesystem://" in log.read_text(errors="replace")):
                assert time.monotonic() < deadline, "the all-in-one never started"
                time.sleep(0.2)
            while berth("hosts", "-f", "value", "-c", "state").stdout.split() != ["up", "up"]:
                assert time.monotonic() < deadline, "the all-in-one never came up"
                time.sleep(0.5)
            done = berth("boot", "--flavor", "m1.tiny", "--count", str(FIRST), "--wait", timeout=120)
            assert done.returncode == 0, done.stderr
            os.kill(proc.pid, 19)  # SIGSTOP: the requests wait while the disk fills
            try:
                # By sizes (m1.tiny's): a cast the transport holds; a flavor by name would first ask
                # the stopped scheduler for it.
                done = berth("boot", "--flavor-ram", "512", "--flavor-disk", "1", "--flavor-vcpus", "1",
                             "--name", "waiting-%d", "--count", str(WAITING))
                assert done.returncode == 0, done.stderr
                filler = fill(disk)
            finally:
                os.kill(proc.pid, 18)  # SIGCONT
            time.sleep(5)  # the scheduler meets the full disk
            filler.unlink()
            freed = time.monotonic()
            while time.monotonic() - freed < 60:
                found = states()
                if found is not None and found.count("ACTIVE") == FIRST + WAITING:
                    break
                time.sleep(0.2)
            took = time.monotonic() - freed
            found = states()
            assert found is not None and sorted(found) == ["ACTIVE"] * (FIRST + WAITING), found
            log = (tmp_path / "all-in-one.log").read_text(errors="replace")
            for lost in ("UNABLE TO RESTORE", "EMERGENCY DUMP", "Dead-lettered"):
                assert lost not in log, log[-3000:]
            assert "the database is unavailable: database or disk is full; holding" in log
            print(f"\n{WAITING} requests held through a full disk: ACTIVE {took:.1f} s after space came back")
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
