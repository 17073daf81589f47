"""The qemu processes of instances, found by pid: they are not the agent's children (they
daemonize), so they are watched through /proc and signalled by pid."""

import os
import signal
import time


def runs(pid, uuid):
    """Whether ``pid`` is a live qemu of instance ``uuid`` (not a zombie, nor a pid reused by
    another process since its pid file was written)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z" and f"guest={uuid},".encode() in cmdline


def wait_gone(pid, uuid, timeout):
    """Whether the qemu ``pid`` of ``uuid`` is gone within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while runs(pid, uuid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def kill(pid, uuid, timeout=10.0):
    """SIGKILL the qemu ``pid`` of ``uuid`` (if it still runs) and wait until it is gone."""
    if runs(pid, uuid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
    return wait_gone(pid, uuid, timeout)
