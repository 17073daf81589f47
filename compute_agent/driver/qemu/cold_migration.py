"""Cold moves between two qemu drivers (a cold migration, a resize to another host, an
evacuation), in the three steps of a move between two agents.

Migration or resize: the destination prepares the instance's directory with an overlay of its
image at the new flavor's root disk size, served writable by a qemu-nbd on [compute_agent]
host_ip and a port of [qemu] migration_port_min..max; the transfer is ``{"nbd": URI}``. The
source powers its guest off and copies its disk into that export (zero regions as NBD
write-zeroes: a sparse disk costs little), its own disk left as it was for a revert. The
destination stops qemu-nbd and boots the guest from the copy at the new flavor.

Evacuation (the source is down, it has no step): the destination rebuilds the instance from
its image, a fresh disk; what the old disk held is lost.

Each step run again (the agent was stopped or killed) carries on from what it finds.
"""

import glob
import json
import logging
import os
import subprocess

from compute_agent.driver import base, host_facts
from compute_agent.driver.qemu import nbd, ports
from compute_agent.resource_tracker import normalize_flavor

LOG = logging.getLogger(__name__)

GIB = 1024 * 1024 * 1024
EVACUATION = "evacuation"
#: Written in the source's instance directory while its guest is off for a cold move out: the
#: guest is not lost, it runs on the destination (or again here once the move is aborted).
HANDED_OVER_NAME = "moving-out.json"


def is_cold(migration):
    return not migration.get("live")


def handed_over(files):
    """Whether the guest of ``files`` is off here for a cold move out."""
    return os.path.exists(os.path.join(files.directory, HANDED_OVER_NAME))


class ColdMigration:
    """The qemu driver's steps of a cold move (a mixin of QemuDriver)."""

    # -- destination --------------------------------------------------------------------

    def _prepare_cold_in(self, instance, migration):
        uuid = instance["uuid"]
        files = self._files(uuid)
        evacuation = migration.get("kind") == EVACUATION
        if not evacuation and nbd.runs(files.directory, files.disk):
            transfer = nbd.read_transfer(files.directory)
            if transfer is not None:
                return transfer  # prepared before the agent stopped
        try:
            image = self.image_of(instance)
            root_gb = normalize_flavor(instance.get("flavor"))["root_gb"]
            if not evacuation and image.disk is not None:
                self._check_not_shrunk(uuid, image, root_gb, migration.get("old_flavor"))
            self._make_directory(instance, image, files)
            if evacuation or image.disk is None:
                return {}
            with self._ports_lock:
                address = host_facts.host_ip(self.conf.compute_agent.host_ip)
                port = ports.free_port(address, self._options.migration_port_min,
                                       self._options.migration_port_max, self._taken_ports())
                transfer = nbd.serve(files.disk, files.directory, address, port, uuid,
                                     self._options.boot_timeout)
        except BaseException as exc:
            self._remove(files)
            if isinstance(exc, Exception) and not isinstance(exc, base.MoveFailed):
                raise base.MoveFailed(f"cannot prepare the disk of {uuid} to take it in: {exc}") from exc
            raise
        LOG.info("A qemu-nbd waits for the disk of %s on %s", uuid, transfer["nbd"])
        return transfer

    def _check_not_shrunk(self, uuid, image, root_gb, old_flavor):
        """MoveFailed when the new root disk is smaller than the instance's (its old flavor's, the
        image's size when it says 0)."""
        size = self._image_size(image)
        old_gb = normalize_flavor(old_flavor)["root_gb"] if old_flavor else 0
        current = max(old_gb * GIB, size)
        wanted = max(root_gb * GIB, size)
        if wanted < current:
            raise base.MoveFailed(f"cannot give {uuid} a root disk of {root_gb} GB: its disk is "
                                  f"{current / GIB:g} GB and qemu cannot shrink a disk; choose a flavor with "
                                  f"a root disk of {current / GIB:g} GB or more")

    @staticmethod
    def _image_size(image):
        return _virtual_size(image.disk, image.disk_format, f"cannot read the disk of image {image.name}")

    def _make_directory(self, instance, image, files):
        """The instance's directory anew: its image's name and its disk, an overlay of the
        image's at its flavor's root disk size."""
        self._kill(files, instance["uuid"])
        self._remove(files)
        os.makedirs(files.directory)
        with open(files.image, "w", encoding="utf-8") as f:
            f.write(image.name)
        if image.disk is not None:
            self._make_overlay(image, files, normalize_flavor(instance.get("flavor"))["root_gb"])

    def _taken_ports(self):
        """The ports of the moves this host waits for, live or cold."""
        taken = set(self._incoming_ports())
        for path in glob.glob(os.path.join(self._options.instances_path, "*", nbd.TRANSFER_NAME)):
            transfer = nbd.read_transfer(os.path.dirname(path))
            try:
                taken.add(nbd.port_of(transfer["nbd"]))
            except (TypeError, ValueError, IndexError):
                continue
        return taken

    def _finish_cold_in(self, instance, migration, transfer):
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not nbd.stop(files.directory, files.disk):
            pid = nbd.read_pid(files.directory)
            raise base.MoveFailed(f"the qemu-nbd serving the disk of {uuid} (pid {pid}) "
                                  "does not end: cannot boot from that disk")
        if not os.path.isdir(files.directory):
            raise base.MoveFailed(f"the directory of {uuid} ({files.directory}) is gone: nothing to boot")
        try:
            self.power_on(instance)
        except (base.BuildAborted, base.MoveFailed):
            raise
        except Exception as exc:
            raise base.MoveFailed(f"cannot boot {uuid} on its new host: {exc}") from exc
        LOG.info("The guest of %s runs here (%s)", uuid,
                 "rebuilt from its image" if migration.get("kind") == EVACUATION else "booted from its disk")

    # -- source ---------------------------------------------------------------------------

    def _migrate_cold_out(self, instance, migration, transfer):
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not os.path.isdir(files.directory):
            raise base.MoveFailed(f"the instance {uuid} has no directory here ({files.directory}): "
                                  "nothing to migrate")
        uri = (transfer or {}).get("nbd")
        if files.has_disk() and (not isinstance(uri, str) or not uri.startswith("nbd://")):
            raise base.MoveFailed(f"the destination's transfer names no nbd:// URI: {transfer!r}"[:300])
        with open(os.path.join(files.directory, HANDED_OVER_NAME), "w", encoding="utf-8") as f:
            json.dump({"migration": migration.get("id"), "transfer": transfer}, f)
        self.power_off(instance)
        if files.has_disk():
            self._copy_disk(uuid, files, uri)
        LOG.info("Handed the disk of %s over to %s", uuid, uri or migration.get("dest_host"))

    def _copy_disk(self, uuid, files, uri):
        size = _virtual_size(files.disk, "qcow2", f"cannot read the disk of {uuid}")
        target = _virtual_size(uri, "raw", f"cannot reach the destination's disk of {uuid}")
        if target < size:
            raise base.MoveFailed(f"the destination's disk of {uuid} ({uri}) is {target} bytes, smaller than "
                                  f"its disk here ({size} bytes): qemu cannot shrink a disk")
        argv = ["qemu-img", "convert", "-n", "-f", "qcow2", files.disk, "-O", "raw", uri]
        copy = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            while copy.poll() is None:
                self._wait(0.2)
        finally:
            if copy.poll() is None:
                copy.kill()
            _, said = copy.communicate()
        if copy.returncode != 0:
            said = [line for line in said.splitlines() if line.strip()]
            raise base.MoveFailed(f"cannot copy the disk of {uuid} to {uri}: "
                                  f"{said[-1] if said else f'qemu-img exit status {copy.returncode}'}")

    def _abort_cold_out(self, instance, migration):
        """Boot the guest here again from its own disk, which the move left as it was."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        try:
            os.unlink(os.path.join(files.directory, HANDED_OVER_NAME))
        except FileNotFoundError:
            pass
        self.power_on(instance)
        LOG.info("The guest of %s runs here again, from its own disk", uuid)



def _virtual_size(path, disk_format, what):
    """The size the guest sees of the disk ``path`` (a file, or an nbd:// URI); MoveFailed saying
    ``what`` could not be done."""
    argv = ["qemu-img", "info", "--output=json", "-U", "-f", disk_format, path]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise base.MoveFailed(f"{what}: {exc}") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise base.MoveFailed(f"{what}: {said[-1] if said else f'qemu-img exit status {done.returncode}'}")
    return int(json.loads(done.stdout)["virtual-size"])
