"""``berth-all-in-one --driver qemu``: real guests on one machine.

Each agent keeps its guests in a directory of its own, ``<[qemu] instances_path>/<host>``, so that
two of them can live-migrate a guest between them; each reports a host a laptop holds (unless
``[qemu] memory_mb`` and ``vcpus`` say otherwise); the image directory must hold an image before
anything starts; and Ctrl-C deletes the guests: a demo's guests do not outlive it.
"""

import glob
import logging
import os
import shlex
import sys

from compute_agent.driver import installed
from scheduler import states
from scheduler.cmd.waiting import Silent, wait_for

LOG = logging.getLogger(__name__)
PROG = "berth-all-in-one"
DRIVER = "qemu"
#: What each agent reports unless [qemu] says otherwise: room for a few small guests (the test image's
#: take 128 MB, and their qemu about 200 MB more), not the whole machine once per agent.
TOTALS = {"memory_mb": 1536, "vcpus": 2}
#: Agents unless --agents says otherwise: two, for a live migration.
AGENTS = 2
#: Seconds Ctrl-C waits for the guests' deletes before it ends whatever qemu is left.
DELETE_TIMEOUT = 60


def runs_guests(conf):
    return conf.compute_agent.driver == DRIVER


def set_defaults(conf):
    """The demo's defaults, which the configuration and the command line override."""
    for name, value in TOTALS.items():
        conf.set_default(name, value, group="qemu")
    conf.set_default("agents", AGENTS)
    # The agents are on this machine: a live migration between them goes over loopback.
    conf.set_default("host_ip", "127.0.0.1", group="compute_agent")


def instances_path(conf, host):
    return os.path.join(conf.qemu.instances_path, host)


def check_images(conf):
    """Why the demo cannot boot any guest (its image directory holds no image), or None."""
    path = conf.qemu.images_path
    images = [p for pattern in ("*.json", "*.qcow2", "*.raw") for p in glob.glob(os.path.join(path, pattern))]
    if images:
        return None
    where = "does not exist" if not os.path.isdir(path) else "holds no image"
    return (f"[qemu] images_path {path} {where}: build the test image into it first, from Berth's source "
            f"tree: python3 tools/build-guest-image {shlex.quote(path)}")


def drivers(conf, hosts):
    """{host: its qemu driver, with an instances_path of its own}."""
    driver_class = installed.driver_class(DRIVER)
    return {host: driver_class(conf, instances_path=instances_path(conf, host)) for host in hosts}


def say(conf):
    print(f"{PROG}: real guests under qemu: images from {conf.qemu.images_path} "
          "(berth server create --image NAME), "
          f"each agent's guests in {os.path.join(conf.qemu.instances_path, '<host>')}; Ctrl-C deletes "
          "them", file=sys.stderr)


class EndGuests:
    """Started after the scheduler and the agents, so stopped before them: deletes every instance
    of the agents' hosts through the scheduler, then ends whatever qemu is left in their
    instances_path (a build under way, a member a scaling group made meanwhile)."""

    def __init__(self, client, by_host):
        self.client = client
        self.by_host = by_host

    def start(self):
        pass

    def stop(self):
        try:
            self._delete_all()
        except Exception as exc:  # the qemu left are ended below all the same
            LOG.warning("Cannot delete the guests through the scheduler (%s): ending their qemu", exc)
        ended = [uuid for driver in self.by_host.values() for uuid in end_all(driver)]
        if ended:
            print(f"{PROG}: ended the qemu of {len(ended)} guest(s) whose delete had not finished "
                  f"({', '.join(ended)}): started again, it reports them in ERROR", file=sys.stderr)

    def _delete_all(self):
        uuids = [row["uuid"] for host in self.by_host for row in self.client.list_instances({}, host=host)
                 if row["state"] != states.DELETED]
        print(f"{PROG}: deleting the {len(uuids)} guest(s) of its qemu agents before it stops",
              file=sys.stderr)
        for uuid in uuids:
            self.client.delete_instance({}, uuid)
        if uuids:
            wait_for(self.client, uuids, DELETE_TIMEOUT, settled=(states.DELETED,), progress=Silent())


def end_all(driver):
    """End every guest whose qemu runs in ``driver``'s instances_path; the uuids it ended."""
    ended = driver.guests_running()
    for uuid in ended:
        driver.destroy({"uuid": uuid})
    return ended
