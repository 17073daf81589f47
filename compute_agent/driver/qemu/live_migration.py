"""Live migration between two qemu drivers, in the three steps of a move between two agents, the
way libvirt migrates a guest whose disk is not shared.

The destination prepares: the instance's overlay of its image's disk (on the same image: both
hosts have it), and a qemu of the same flavor and image waiting for it (``-incoming defer``)
that exports its disk over NBD, writable (``nbd-server-start``, ``block-export-add``), then
listens for the guest's memory (``migrate-incoming``); the transfer is both addresses. The
source migrates: it mirrors its disk to that export (``blockdev-add`` of an nbd node,
``blockdev-mirror`` sync top: the overlay alone, what the image holds is on both hosts), and
once the mirror is ready (the two disks alike, the guest's writes mirrored as they come)
migrates its memory (``migrate``, paused before the switch-over); paused there, its disk
quiet, it ends the mirror (``block-job-cancel`` of a ready job: the target stays as the
source), then lets qemu switch over, until qemu says completed. Its guest then stays paused
until the instance is terminated here. The destination finishes once its guest runs, and
stops its NBD server. An ephemeral disk (a blank qcow2 of the flavor's size on both hosts) is
exported and mirrored beside the root disk, each disk a mirror of its own. A guest without a
disk (a kernel and initramfs alone) migrates its memory alone. Each step run again (the agent
was stopped or killed) carries on from what qemu says (query-migrate, query-block-jobs).
"""

import glob
import json
import logging
import os
import threading
import time

from compute_agent.driver import base, host_facts
from compute_agent.driver.qemu import cold_migration, ports, processes, qmp
from compute_agent.driver.qemu.command import DISK_NODE, EPHEMERAL_NODE

LOG = logging.getLogger(__name__)

#: query-migrate's statuses of a migration under way.
MIGRATING = ("setup", "active", "pre-switchover", "device", "postcopy-active", "wait-unplug")
#: The prefixes of the block job that mirrors each disk of a guest migrating out, and of the node of
#: its target (the destination's NBD export of that disk, named as its node).
MIRROR_JOB = "berth-mirror-"
MIRROR_TARGET = "berth-target-"
#: query-block-jobs' statuses of a job that ended (to be dismissed: a mirror is not dismissed by
#: itself, so that how it ended can be read).
JOB_ENDED = ("concluded", "null")
#: MiB/s as good as no limit (libvirt's largest bandwidth is about as large).
UNLIMITED_MIB = 1 << 30


class LiveMigration:
    """The qemu driver's steps of a live migration (a mixin of QemuDriver)."""

    _ports_lock = threading.Lock()

    def prepare_move_in(self, instance, migration):
        if cold_migration.is_cold(migration):
            return self._prepare_cold_in(instance, migration)
        uuid = instance["uuid"]
        files = self._files(uuid)
        if processes.runs(files.read_pid(), uuid):
            transfer = _read_transfer(files)
            if transfer is not None:
                return transfer  # prepared before the agent stopped
        image = self.image_of(instance)
        try:
            with self._ports_lock:
                transfer = self._open_incoming(instance, image, files)
            self._wait_for_state(files, uuid, ("inmigrate",), "to wait for the migration")
        except base.BuildAborted:
            raise
        except BaseException as exc:
            self._kill(files, uuid)
            self._remove(files)
            if isinstance(exc, Exception) and not isinstance(exc, base.MoveFailed):
                raise base.MoveFailed(f"cannot prepare a qemu to take {uuid} in: {exc}") from exc
            raise
        LOG.info("A qemu waits for %s on %s%s", uuid, transfer["uri"],
                 f", its disk exported on nbd:{transfer['nbd']['host']}:{transfer['nbd']['port']}"
                 if "nbd" in transfer else "")
        return transfer

    def _open_incoming(self, instance, image, files):
        """Start the qemu that takes ``instance`` in, its disk exported over NBD (when it has one) and
        listening for its memory, on ports of [qemu] migration_port_min..max; the transfer, recorded
        (incoming.json) once all is open. Under _ports_lock: the ports are free until recorded."""
        address = host_facts.host_ip(self.conf.compute_agent.host_ip)
        taken = self._taken_ports()
        port = ports.free_port(address, self._options.migration_port_min, self._options.migration_port_max,
                               taken)
        transfer = {"uri": f"tcp:{address}:{port}"}
        self._launch(instance, image, files, extra=["-incoming", "defer"])
        with qmp.QMP(files.qmp) as monitor:
            disks = _disks(files)
            if disks:
                nbd_port = ports.free_port(address, self._options.migration_port_min,
                                           self._options.migration_port_max, taken | {port})
                monitor.execute("nbd-server-start",
                                addr={"type": "inet", "data": {"host": address, "port": str(nbd_port)}})
                for node in disks:
                    monitor.execute("block-export-add", type="nbd", id=node, name=node, writable=True,
                                    **{"node-name": node})
                transfer["nbd"] = {"host": address, "port": nbd_port, "exports": disks}
            monitor.execute("migrate-incoming", uri=transfer["uri"])
        with open(files.incoming, "w", encoding="utf-8") as f:
            json.dump(transfer, f)
        return transfer

    def migrate_out(self, instance, migration, transfer):
        """Mirror the disk, then migrate the memory (see the module); qemu's figures of the
        migration: {"downtime_ms", "total_ms", "memory_bytes"}. A cold move: cold_migration."""
        if cold_migration.is_cold(migration):
            return self._migrate_cold_out(instance, migration, transfer)
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not processes.runs(files.read_pid(), uuid):
            raise base.MoveFailed(f"the guest of {uuid} does not run here: nothing to migrate")
        uri = (transfer or {}).get("uri")
        if not isinstance(uri, str) or not uri.startswith("tcp:"):
            raise base.MoveFailed(f"the destination's transfer names no tcp: URI: {transfer!r}"[:300])
        disks = _disks(files)
        nbd = transfer.get("nbd")
        if disks and not (_is_nbd(nbd) and set(disks) <= set(nbd["exports"])):
            raise base.MoveFailed(f"the guest of {uuid} has disks {', '.join(disks)} but its destination "
                                  f"exports not all of them to mirror them to (its transfer: {transfer!r}); "
                                  "is its agent of an older release?"[:400])
        try:
            with qmp.QMP(files.qmp) as monitor:
                status = monitor.execute("query-migrate").get("status")
            if status not in MIGRATING and status != "completed":
                if disks:
                    self._mirror(files, uuid, nbd, disks)
                with qmp.QMP(files.qmp) as monitor:
                    # Paused before the switch-over, the disks quiet, the mirrors end (pre-switchover).
                    monitor.execute("migrate-set-capabilities", capabilities=[
                        {"capability": "pause-before-switchover", "state": bool(disks)}])
                    monitor.execute("migrate-set-parameters", **{"max-bandwidth": self._bandwidth()})
                    monitor.execute("migrate", uri=uri)
            info = self._until_migrated(files, uuid, uri)
        except qmp.QMPError as exc:
            raise base.MoveFailed(f"cannot migrate {uuid}: {exc}") from None
        figures = {"downtime_ms": info.get("downtime"), "total_ms": info.get("total-time"),
                   "memory_bytes": (info.get("ram") or {}).get("transferred")}
        LOG.info("Migrated %s to %s: %s ms downtime, %s ms in all, %s bytes of memory", uuid, uri,
                 figures["downtime_ms"], figures["total_ms"], figures["memory_bytes"])
        return {key: value for key, value in figures.items() if isinstance(value, int)}

    def _mirror(self, files, uuid, nbd, disks):
        """Mirror the guest's ``disks`` (node names) each to the destination's NBD export of it (its
        overlay alone: sync top), until every mirror is ready; mirrors begun before carry on."""
        speed = self._options.live_migration_bandwidth * 1024 * 1024  # 0: no limit
        with qmp.QMP(files.qmp) as monitor:
            jobs = _jobs(monitor)
            targets = _targets(monitor)
            for node in disks:
                if MIRROR_JOB + node in jobs:
                    continue
                if MIRROR_TARGET + node not in targets:
                    monitor.execute("blockdev-add", driver="nbd", export=node, **{
                        "node-name": MIRROR_TARGET + node,
                        "server": {"type": "inet", "host": nbd["host"], "port": str(nbd["port"])}})
                monitor.execute("blockdev-mirror", device=node, target=MIRROR_TARGET + node, sync="top",
                                speed=speed, **{"job-id": MIRROR_JOB + node, "auto-dismiss": False})
        where = f"nbd:{nbd['host']}:{nbd['port']}"
        while True:
            with qmp.QMP(files.qmp) as monitor:
                jobs = _jobs(monitor)
                for node in disks:
                    job = jobs.get(MIRROR_JOB + node)
                    if job is None:
                        raise base.MoveFailed(f"the mirror of {uuid}'s disk {node} to {where} is gone")
                    if job.get("status") in JOB_ENDED:
                        monitor.execute("job-dismiss", id=MIRROR_JOB + node)
                        raise base.MoveFailed(f"the mirror of {uuid}'s disk {node} to {where} ended before "
                                              f"it was ready: {job.get('error') or 'no reason given'}")
                if all(jobs[MIRROR_JOB + node].get("ready") for node in disks):
                    LOG.info("The disks of %s are mirrored to %s: %s", uuid, where, ", ".join(
                        f"{node} {jobs[MIRROR_JOB + node].get('len')} bytes" for node in disks))
                    return
            self._wait(0.2)

    def _until_migrated(self, files, uuid, uri):
        """Until qemu says the migration completed (query-migrate's answer), ending the mirror when it
        pauses before the switch-over; MoveFailed when it failed or was cancelled. The migration is
        continued once: qemu may still say pre-switchover for a moment after migrate-continue, and
        a second one, sent once it has moved on, fails the migration ("not in expected state")."""
        continued = False
        while True:
            with qmp.QMP(files.qmp) as monitor:
                info = monitor.execute("query-migrate")
                status = info.get("status")
                if status == "pre-switchover" and not continued:
                    self._end_mirror(monitor, uuid)
                    _del_target(monitor)
                    monitor.execute("migrate-continue", state="pre-switchover")
                    continued = True
                    continue
            if status == "completed":
                return info
            if status not in MIGRATING:
                raise base.MoveFailed(f"qemu's migration of {uuid} to {uri} is {status}: "
                                      f"{info.get('error-desc', 'no reason given')}")
            self._wait(0.2)

    def _end_mirror(self, monitor, uuid, force=False):
        """End the mirrors of the disks, if any: a ready one synced to its target first (the guest
        paused), unless ``force``; MoveFailed when one ended with an error and not ``force``."""
        jobs = _jobs(monitor)
        for name, job in jobs.items():
            if job.get("status") not in JOB_ENDED:
                monitor.execute("block-job-cancel", device=name, force=force)
        limit = self._options.stop_timeout + 60
        deadline = time.monotonic() + limit
        while any(job.get("status") not in JOB_ENDED for job in jobs.values()):
            if time.monotonic() >= deadline:
                raise base.MoveFailed(f"the mirrors of {uuid}'s disks did not end within {limit:g} s of "
                                      f"their cancel ([qemu] stop_timeout + 60 s): " + ", ".join(
                                          f"{name} {job.get('status')}" for name, job in jobs.items()))
            time.sleep(0.05)
            jobs = _jobs(monitor)
        failed = []
        for name, job in jobs.items():
            monitor.execute("job-dismiss", id=name)
            if job.get("error"):
                failed.append(f"{name[len(MIRROR_JOB):]}: {job['error']}")
        if failed and not force:
            raise base.MoveFailed(f"the mirror of {uuid}'s disks failed as it ended: {'; '.join(failed)}")

    def finish_move_in(self, instance, migration, transfer):
        if cold_migration.is_cold(migration):
            return self._finish_cold_in(instance, migration, transfer)
        uuid = instance["uuid"]
        files = self._files(uuid)
        self._wait_for_state(files, uuid, ("running",), "to run once migrated")
        try:
            with qmp.QMP(files.qmp) as monitor:
                if monitor.execute("query-block-exports"):
                    monitor.execute("nbd-server-stop")
        except qmp.QMPError as exc:
            raise base.MoveFailed(f"the guest of {uuid} runs, but its NBD server cannot be stopped: "
                                  f"{exc}") from None
        try:
            os.unlink(files.incoming)
        except FileNotFoundError:
            pass

    def abort_move_out(self, instance, migration):
        """Run the guest here again: cancel a migration under way and the mirror of its disk; a guest
        paused once its memory went over resumes. A cold move: cold_migration."""
        if cold_migration.is_cold(migration):
            return self._abort_cold_out(instance, migration)
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not processes.runs(files.read_pid(), uuid):
            LOG.warning("The guest of %s does not run here: nothing to run again", uuid)
            return
        with qmp.QMP(files.qmp) as monitor:
            if monitor.execute("query-migrate").get("status") in MIGRATING:
                monitor.execute("migrate_cancel")
                deadline = time.monotonic() + self._options.stop_timeout + 60
                while monitor.execute("query-migrate").get("status") in (*MIGRATING, "cancelling"):
                    if time.monotonic() >= deadline:
                        raise base.MoveFailed(f"the migration of {uuid} was not cancelled within "
                                              f"{self._options.stop_timeout + 60:g} s")
                    time.sleep(0.05)
            self._end_mirror(monitor, uuid, force=True)
            _del_target(monitor)
            if monitor.execute("query-status")["status"] != "running":
                monitor.execute("cont")
        LOG.info("The guest of %s runs here again", uuid)

    def migrate_in(self, instance, migration):
        """A move of compute API 1.x has no step on its source: a guest cannot be handed over."""
        raise base.MoveFailed("the qemu driver moves an instance through both its hosts' agents (compute "
                              "API 2.0); this scheduler is capped below it ([upgrade_levels] compute)")

    def _bandwidth(self):
        """qemu's max-bandwidth (bytes/s) of a migration out: [qemu] live_migration_bandwidth, or no
        limit (qemu's default would be 32 MiB/s)."""
        return (self._options.live_migration_bandwidth or UNLIMITED_MIB) * 1024 * 1024

    def _wait_for_state(self, files, uuid, states, what):
        """Until QMP says the guest is in one of ``states``; MoveFailed when qemu ends first or
        boot_timeout passes."""
        deadline = time.monotonic() + self._options.boot_timeout
        state = None
        while True:
            if not processes.runs(files.read_pid(), uuid):
                raise base.MoveFailed(f"the qemu of {uuid} ended, waiting {what}; its log: "
                                      f"{_tail(files.log) or '(empty)'}")
            try:
                state = qmp.status(files.qmp)
            except qmp.QMPError:
                state = None
            if state in states:
                return
            if time.monotonic() >= deadline:
                raise base.MoveFailed(f"the guest of {uuid} is {state or 'not answering'}, not "
                                      f"{' or '.join(states)}, after {self._options.boot_timeout:g} s "
                                      f"([qemu] boot_timeout), waiting {what}")
            self._wait(0.2)

    def _incoming_ports(self):
        """The ports of the migrations this host waits for (their memory's and their disk's)."""
        taken = set()
        for path in glob.glob(os.path.join(self.instances_path, "*", "incoming.json")):
            try:
                with open(path, encoding="utf-8") as f:
                    transfer = json.load(f)
                taken.add(int(transfer["uri"].rsplit(":", 1)[1]))
                if "nbd" in transfer:
                    taken.add(int(transfer["nbd"]["port"]))
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue
        return taken


def _read_transfer(files):
    try:
        with open(files.incoming, encoding="utf-8") as f:
            transfer = json.load(f)
    except (OSError, ValueError):
        return None
    return transfer if isinstance(transfer, dict) and isinstance(transfer.get("uri"), str) else None


def _disks(files):
    """The node names of the guest's disks: its root disk's overlay, its ephemeral disk."""
    return ([DISK_NODE] if files.has_disk() else []) + ([EPHEMERAL_NODE] if os.path.exists(files.ephemeral)
                                                         else [])


def _is_nbd(nbd):
    return (isinstance(nbd, dict) and isinstance(nbd.get("host"), str) and isinstance(nbd.get("port"), int)
            and isinstance(nbd.get("exports"), list))


def _jobs(monitor):
    """{job id: job} of the mirrors (query-block-jobs)."""
    return {job["device"]: job for job in monitor.execute("query-block-jobs")
            if str(job.get("device")).startswith(MIRROR_JOB)}


def _targets(monitor):
    """The node names of the mirrors' targets."""
    return {node["node-name"] for node in monitor.execute("query-named-block-nodes", flat=True)
            if str(node.get("node-name")).startswith(MIRROR_TARGET)}


def _del_target(monitor):
    """Remove the mirrors' target nodes (their connection to the destination's NBD server)."""
    for node in _targets(monitor):
        monitor.execute("blockdev-del", **{"node-name": node})


def _tail(path, lines=3):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            kept = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(kept[-lines:])
