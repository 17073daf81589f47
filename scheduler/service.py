"""The scheduler service: its RPC server, its periodic tasks, its start and stop."""

import logging
import threading

from scheduler import concurrency, rpc
from scheduler.admin import AdminEndpoint
from scheduler.client import TOPIC
from scheduler.manager import SchedulerManager

LOG = logging.getLogger(__name__)
BINARY = "berth-scheduler"


class SchedulerService:
    def __init__(self, conf, transport, database, rng=None):
        self.conf = conf
        self.database = database
        self.manager = SchedulerManager(conf, transport, database, rng=rng)
        self.admin = AdminEndpoint(conf, database, self.manager.host_manager)
        self._server = rpc.get_rpc_server(
            transport, rpc.Target(topic=TOPIC, server=conf.host), [self.manager, self.admin]
        )
        self._stopping = threading.Event()
        self._periodic = None

    def start(self):
        self.manager.host_manager.restore(self.database.list_compute_nodes())
        self.admin._reload()  # aggregates; reloaded by the periodic task too
        self._server.start()
        self._periodic = concurrency.spawn(self._run_periodic, name="scheduler-periodic")
        LOG.info(
            "Scheduler %s started: filters %s, weighers %s",
            self.conf.host,
            ", ".join(f.name for f in self.manager.selector.filters),
            ", ".join(w.name for w in self.manager.selector.weighers),
        )

    def stop(self):
        """Stop taking messages, finish the one in hand, save what is unsaved."""
        self._server.stop()
        self._server.wait()
        self._stopping.set()
        if self._periodic is not None:
            self._periodic.join()
        self.save_reports()
        LOG.info("Scheduler %s stopped", self.conf.host)

    def save_reports(self):
        reports = self.manager.reports.drain()
        if not reports:
            return
        # compute_nodes.updated_at doubles as each agent's last-seen time.
        self.database.save_compute_nodes([dict(r, host=h) for h, r in reports.items()])

    def _run_periodic(self):
        interval = self.conf.scheduler.periodic_interval
        while not self._stopping.wait(interval):
            try:
                self.save_reports()
                self.database.service_heartbeat(self.conf.host, BINARY, TOPIC)
                self.manager._expire_builds()  # not an RPC method: underscored
                self.admin._reload()  # aggregates changed through another scheduler
            except Exception:
                LOG.exception("Periodic task failed; retrying in %s s", interval)
