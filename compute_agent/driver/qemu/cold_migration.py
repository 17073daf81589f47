"""Cold moves between two qemu drivers (a cold migration, a resize to another host, an
evacuation), in the three steps of a move between two agents.

Migration or resize: the destination prepares the instance's directory with an overlay of its
image at the new flavor's root disk size (and a blank ephemeral disk of the new flavor's, if
any), each served writable by a qemu-nbd on [compute_agent] host_ip and a port of [qemu]
migration_port_min..max; the transfer is ``{"nbd": URI}`` (and ``"nbd_ephemeral": URI``). The
source powers its guest off and copies its disks into those exports (zero regions as NBD
write-zeroes: a sparse disk costs little), its own left as they were for a revert. The
destination stops qemu-nbd and boots the guest from the copies at the new flavor.

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
from compute_agent.driver.qemu import nbd, ports, qemu_img
from compute_agent.resource_tracker import normalize_flavor

LOG = logging.getLogger(__name__)

GIB = 1024 * 1024 * 1024
EVACUATION = "evacuation"
#: Written in the source's instance directory while its guest is off for a cold move out: the
#: guest is not lost, it runs on the destination (or again here once the move is aborted).
HANDED_OVER_NAME = "moving-out.json"


#: The transfer's key of each disk served: the root disk, the ephemeral disk.
TRANSFER_KEYS = {"disk": "nbd", "ephemeral": "nbd_ephemeral"}


def disks(files):
    """{name: path} of the disks of ``files`` a cold move copies, whether they exist or not."""
    return {"disk": files.disk, "ephemeral": files.ephemeral}


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
        transfer = nbd.read_transfer(files.directory)
        if not evacuation and transfer and all(
                nbd.runs(files.directory, path, name) for name, path in disks(files).items()
                if TRANSFER_KEYS[name] in transfer):
            return transfer  # prepared before the agent stopped
        try:
            image = self.image_of(instance)
            root_gb = normalize_flavor(instance.get("flavor"))["root_gb"]
            if not evacuation and image.disk is not None:
                self._check_not_shrunk(uuid, image, root_gb, migration.get("old_flavor"))
            self._make_directory(instance, image, files)
            transfer = {}
            if not evacuation:
                with self._ports_lock:
                    address = host_facts.host_ip(self.conf.compute_agent.host_ip)
                    for name, path in disks(files).items():
                        if os.path.exists(path):
                            port = ports.free_port(address, self._options.migration_port_min,
                                                   self._options.migration_port_max, self._taken_ports())
                            export = uuid if name == "disk" else f"{uuid}-{name}"
                            transfer[TRANSFER_KEYS[name]] = nbd.serve(
                                path, files.directory, address, port, export, self._options.boot_timeout,
                                name)
                    nbd.write_transfer(files.directory, transfer)
        except BaseException as exc:
            self._remove(files)
            if isinstance(exc, Exception) and not isinstance(exc, base.MoveFailed):
                raise base.MoveFailed(f"cannot prepare the disks of {uuid} to take it in: {exc}") from exc
            raise
        if transfer:
            LOG.info("qemu-nbd waits for the disks of %s on %s", uuid, ", ".join(transfer.values()))
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
        return qemu_img.virtual_size(image.disk, image.disk_format,
                                     f"cannot read the disk of image {image.name}", base.MoveFailed)

    def _taken_ports(self):
        """The ports of the moves this host waits for, live or cold."""
        taken = set(self._incoming_ports())
        for path in glob.glob(os.path.join(self.instances_path, "*", nbd.TRANSFER_NAME)):
            for uri in (nbd.read_transfer(os.path.dirname(path)) or {}).values():
                try:
                    taken.add(nbd.port_of(uri))
                except (ValueError, IndexError):
                    continue
        return taken

    def _finish_cold_in(self, instance, migration, transfer):
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not nbd.stop(files.directory, disks(files)):
            raise base.MoveFailed(f"a qemu-nbd serving the disks of {uuid} in {files.directory} does not "
                                  "end: cannot boot from those disks")
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
        copies = []
        for name, path in disks(files).items():
            if not os.path.exists(path):
                continue
            uri = (transfer or {}).get(TRANSFER_KEYS[name])
            if not isinstance(uri, str) or not uri.startswith("nbd://"):
                raise base.MoveFailed(f"the destination's transfer names no nbd:// URI for the {name} of "
                                      f"{uuid} ({TRANSFER_KEYS[name]}): {transfer!r}"[:300])
            copies.append((path, uri))
        with open(os.path.join(files.directory, HANDED_OVER_NAME), "w", encoding="utf-8") as f:
            json.dump({"migration": migration.get("id"), "transfer": transfer}, f)
        self.power_off(instance)
        for path, uri in copies:
            self._copy_disk(uuid, path, uri)
        LOG.info("Handed the disks of %s over to %s", uuid, migration.get("dest_host"))

    def _copy_disk(self, uuid, path, uri):
        size = qemu_img.virtual_size(path, "qcow2", f"cannot read the disk {path} of {uuid}", base.MoveFailed)
        target = qemu_img.virtual_size(uri, "raw", f"cannot reach the destination's disk of {uuid}",
                                       base.MoveFailed)
        if target < size:
            raise base.MoveFailed(f"the destination's disk of {uuid} ({uri}) is {target} bytes, smaller than "
                                  f"its disk here ({path}, {size} bytes): qemu cannot shrink a disk")
        argv = ["qemu-img", "convert", "-n", "-f", "qcow2", path, "-O", "raw", uri]
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
            raise base.MoveFailed(f"cannot copy the disk of {uuid} to {uri}: "
                                  f"{qemu_img.last_line(said) or f'qemu-img exit status {copy.returncode}'}")

    def _abort_cold_out(self, instance, migration):
        """Boot the guest here again from its own disk, which the move left as it was."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        # The mark goes once the guest runs again: the agent's look at its guests, in another thread,
        # would take a guest still off for a guest gone.
        try:
            self.power_on(instance)
        finally:
            try:
                os.unlink(os.path.join(files.directory, HANDED_OVER_NAME))
            except FileNotFoundError:
                pass
        LOG.info("The guest of %s runs here again, from its own disk", uuid)
