"""The qemu-nbd servers a cold move's destination serves its new disks with, writable, for the
source to copy the instance's disks into: one per disk, each named (disk, ephemeral), detached
from the agent (``--fork``), found again by the pid files and the transfer file left in the
instance's directory."""

import json
import os
import signal
import subprocess
import time

PID_NAME = "nbd.pid"
TRANSFER_NAME = "nbd.json"


class NBDError(Exception):
    pass


def pid_file(directory, name="disk"):
    return os.path.join(directory, PID_NAME if name == "disk" else f"nbd-{name}.pid")


def transfer_file(directory):
    return os.path.join(directory, TRANSFER_NAME)


def read_pid(directory, name="disk"):
    try:
        with open(pid_file(directory, name), encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def runs(directory, disk, name="disk"):
    """Whether the qemu-nbd of ``directory``'s pid file of ``name`` runs, serving ``disk``."""
    pid = read_pid(directory, name)
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z" and b"qemu-nbd" in argv[0] and os.fsencode(disk) in argv


def read_transfer(directory):
    """The transfer the server of ``directory`` was started for, or None."""
    try:
        with open(transfer_file(directory), encoding="utf-8") as f:
            transfer = json.load(f)
    except (OSError, ValueError):
        return None
    return transfer if isinstance(transfer, dict) and all(isinstance(v, str) for v in transfer.values()) \
        else None


def write_transfer(directory, transfer):
    with open(transfer_file(directory), "w", encoding="utf-8") as f:
        json.dump(transfer, f)


def port_of(uri):
    """The port of ``nbd://ADDRESS:PORT/EXPORT``."""
    return int(uri.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def serve(disk, directory, address, port, export, timeout, name="disk"):
    """Start a qemu-nbd serving the qcow2 ``disk`` writable on ``address:port`` as ``export``, to
    any number of connections one after the other (a copy run again connects again), its pid
    in ``directory``'s pid file of ``name``. Returns its URI."""
    argv = ["qemu-nbd", "--fork", "--persistent", f"--pid-file={pid_file(directory, name)}",
            f"--bind={address}", f"--port={port}", f"--export-name={export}", "--format=qcow2",
            "--discard=unmap", disk]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NBDError("qemu-nbd is not installed (Debian: qemu-utils)") from None
    except subprocess.TimeoutExpired:
        raise NBDError(f"qemu-nbd did not start within {timeout:g} s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise NBDError(f"qemu-nbd cannot serve {disk} on {address}:{port}: "
                       f"{said[-1] if said else f'exit status {done.returncode}'}")
    return f"nbd://{address}:{port}/{export}"


def stop(directory, disks, timeout=10.0):
    """End the qemu-nbd of each of ``disks`` ({name: path}) in ``directory`` (SIGTERM: it flushes
    its disk; SIGKILL after ``timeout``) and forget the transfer. Whether none is left."""
    left = False
    for name, disk in disks.items():
        pid = read_pid(directory, name)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not runs(directory, disk, name):
                break
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + timeout
            while runs(directory, disk, name) and time.monotonic() < deadline:
                time.sleep(0.05)
        if runs(directory, disk, name):
            left = True
            continue
        try:
            os.unlink(pid_file(directory, name))
        except FileNotFoundError:
            pass
    if left:
        return False
    try:
        os.unlink(transfer_file(directory))
    except FileNotFoundError:
        pass
    return True
