"""The qemu-nbd server a cold move's destination serves its new disk with, writable, for the
source to copy the instance's disk into; detached from the agent (``--fork``), found again by
the pid file and transfer file it leaves in the instance's directory."""

import json
import os
import signal
import subprocess
import time

PID_NAME = "nbd.pid"
TRANSFER_NAME = "nbd.json"


class NBDError(Exception):
    pass


def pid_file(directory):
    return os.path.join(directory, PID_NAME)


def transfer_file(directory):
    return os.path.join(directory, TRANSFER_NAME)


def read_pid(directory):
    try:
        with open(pid_file(directory), encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def runs(directory, disk):
    """Whether the qemu-nbd of the pid file in ``directory`` runs, serving ``disk``."""
    pid = read_pid(directory)
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
    return transfer if isinstance(transfer, dict) and isinstance(transfer.get("nbd"), str) else None


def port_of(uri):
    """The port of ``nbd://ADDRESS:PORT/EXPORT``."""
    return int(uri.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def serve(disk, directory, address, port, export, timeout):
    """Start a qemu-nbd serving the qcow2 ``disk`` writable on ``address:port`` as ``export``, to
    any number of connections one after the other (a copy run again connects again); its
    transfer recorded in ``directory``. Returns the transfer."""
    uri = f"nbd://{address}:{port}/{export}"
    argv = ["qemu-nbd", "--fork", "--persistent", f"--pid-file={pid_file(directory)}", f"--bind={address}",
            f"--port={port}", f"--export-name={export}", "--format=qcow2", "--discard=unmap", disk]
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
    transfer = {"nbd": uri}
    with open(transfer_file(directory), "w", encoding="utf-8") as f:
        json.dump(transfer, f)
    return transfer


def stop(directory, disk, timeout=10.0):
    """End the qemu-nbd of ``directory`` (SIGTERM: it flushes the disk; SIGKILL after ``timeout``)
    and forget its transfer. Whether none is left."""
    pid = read_pid(directory)
    if runs(directory, disk):
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while runs(directory, disk) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not runs(directory, disk):
                break
    if runs(directory, disk):
        return False
    for path in (pid_file(directory), transfer_file(directory)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return True
