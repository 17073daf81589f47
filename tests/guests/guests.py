"""What the guest tests look at: an instance's qemu process and files on this machine."""

import os

import psutil

from compute_agent import conf as agent_conf
from compute_agent.driver.qemu.guest_files import GuestFiles
from scheduler import conf as berth_conf

#: What the test image prints on its serial console once it is up (tools/build-guest-image).
MARKER = "berth-guest: up"


def qemu_conf(state_path, images):
    """Options of a qemu driver standing for one agent of this machine (the guest tests'): its
    state under ``state_path``, the test image's directory ``images``."""
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([])
    conf.set_override("state_path", str(state_path))
    conf.set_override("images_path", str(images), "qemu")
    conf.set_override("host_ip", "127.0.0.1", "compute_agent")
    return conf


def state_path(fleet, host):
    """Each agent of the guest tests has a state_path of its own: a live migration between two of
    them has the instance in both's instances_path."""
    return fleet.tmp / host


def files(fleet, host, uuid):
    return GuestFiles.of(str(state_path(fleet, host) / "instances"), uuid)


def console(fleet, host, uuid):
    try:
        with open(files(fleet, host, uuid).console, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def qemu_processes(uuid):
    """The qemu processes of instance ``uuid`` running on this machine."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if process.info["status"] != psutil.STATUS_ZOMBIE and any(f"guest={uuid}," in arg for arg in cmdline):
            found.append(process)
    return found


def kill_leftovers(uuids):
    """SIGKILL whatever qemu of ``uuids`` a failed test left running (not the test's verdict)."""
    for uuid in uuids:
        for process in qemu_processes(uuid):
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass


def files_left(fleet, hosts, uuid):
    """The hosts of ``hosts`` that have a directory of instance ``uuid``."""
    return [host for host in hosts if os.path.exists(files(fleet, host, uuid).directory)]
