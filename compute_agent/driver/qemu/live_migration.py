"""Live migration between two qemu drivers, in the three steps of a move between two agents.

The destination prepares: the instance's overlay of its image's disk, and a qemu of the same
flavor and image waiting for it (``-incoming tcp:ADDRESS:PORT``); the transfer is that URI. The
source migrates: QMP ``migrate`` to the URI, its disk with it (block migration of the overlay
alone: both hosts have the image), until qemu says completed; its guest then stays paused until
the instance is terminated here. The destination finishes once its guest runs. Each step run
again (the agent was stopped or killed) carries on from what qemu says.
"""

import glob
import json
import logging
import os
import threading
import time

from compute_agent.driver import base, host_facts
from compute_agent.driver.qemu import cold_migration, ports, processes, qmp

LOG = logging.getLogger(__name__)

#: query-migrate's statuses of a migration under way.
MIGRATING = ("setup", "active", "pre-switchover", "device", "postcopy-active", "wait-unplug")


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
                address = host_facts.host_ip(self.conf.compute_agent.host_ip)
                port = ports.free_port(address, self._options.migration_port_min,
                                       self._options.migration_port_max, self._incoming_ports())
                uri = f"tcp:{address}:{port}"
                self._launch(instance, image, files, extra=["-incoming", uri])
                with open(files.incoming, "w", encoding="utf-8") as f:
                    json.dump({"uri": uri}, f)
            self._wait_for_state(files, uuid, ("inmigrate",), "to wait for the migration")
        except base.BuildAborted:
            raise
        except BaseException as exc:
            self._kill(files, uuid)
            self._remove(files)
            if isinstance(exc, Exception) and not isinstance(exc, base.MoveFailed):
                raise base.MoveFailed(f"cannot prepare a qemu to take {uuid} in: {exc}") from exc
            raise
        LOG.info("A qemu waits for %s on %s", uuid, uri)
        return {"uri": uri}

    def migrate_out(self, instance, migration, transfer):
        if cold_migration.is_cold(migration):
            return self._migrate_cold_out(instance, migration, transfer)
        uuid = instance["uuid"]
        files = self._files(uuid)
        if not processes.runs(files.read_pid(), uuid):
            raise base.MoveFailed(f"the guest of {uuid} does not run here: nothing to migrate")
        uri = (transfer or {}).get("uri")
        if not isinstance(uri, str) or not uri.startswith("tcp:"):
            raise base.MoveFailed(f"the destination's transfer names no tcp: URI: {transfer!r}"[:300])
        try:
            with qmp.QMP(files.qmp) as monitor:
                status = monitor.execute("query-migrate").get("status")
                if status == "completed":
                    return  # migrated before the agent stopped
                if status not in MIGRATING:
                    monitor.execute("migrate-set-parameters", **{"max-bandwidth": self._bandwidth()})
                    # Its disk goes with it: the overlay alone (inc), the image being on both hosts.
                    monitor.execute("migrate", uri=uri, blk=files.has_disk(), inc=files.has_disk())
            while True:
                with qmp.QMP(files.qmp) as monitor:
                    info = monitor.execute("query-migrate")
                status = info.get("status")
                if status == "completed":
                    LOG.info("Migrated %s to %s: %s ms downtime, %s ms in all, %s bytes of memory", uuid,
                             uri, info.get("downtime"), info.get("total-time"),
                             (info.get("ram") or {}).get("total"))
                    return
                if status not in MIGRATING:
                    raise base.MoveFailed(f"qemu's migration of {uuid} to {uri} is {status}: "
                                          f"{info.get('error-desc', 'no reason given')}")
                self._wait(0.2)
        except qmp.QMPError as exc:
            raise base.MoveFailed(f"cannot migrate {uuid}: {exc}") from None

    def finish_move_in(self, instance, migration, transfer):
        if cold_migration.is_cold(migration):
            return self._finish_cold_in(instance, migration, transfer)
        uuid = instance["uuid"]
        files = self._files(uuid)
        self._wait_for_state(files, uuid, ("running",), "to run once migrated")
        try:
            os.unlink(files.incoming)
        except FileNotFoundError:
            pass

    def abort_move_out(self, instance, migration):
        """Run the guest here again: cancel a migration under way; a guest paused once its memory
        went over resumes."""
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
        """The ports of the migrations this host waits for."""
        taken = set()
        for path in glob.glob(os.path.join(self.instances_path, "*", "incoming.json")):
            try:
                with open(path, encoding="utf-8") as f:
                    taken.add(int(json.load(f)["uri"].rsplit(":", 1)[1]))
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


def _tail(path, lines=3):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            kept = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(kept[-lines:])
