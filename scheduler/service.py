"""The scheduler service: its RPC server, its periodic tasks, its start and stop."""

import contextlib
import logging
import threading

from scheduler import concurrency, rpc
from scheduler.admin import AdminEndpoint
from scheduler.client import TOPIC
from scheduler.db import api as db_api
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
            transport, rpc.Target(topic=TOPIC, server=conf.host), [self.manager, self.admin],
            batch_size=conf.scheduler.batch_size, unit_of_work=self._unit_of_work,
        )
        self._stopping = threading.Event()
        self._periodic = None

    def start(self):
        self.manager.host_manager.restore(self.database.list_compute_nodes())
        self.manager._learn_claims_of_others()  # every host's generation and pending placements
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

    def _unit_of_work(self):
        return UnitOfWork(self.database, self.manager.outbox)

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


class UnitOfWork:
    """A batch of messages: one database transaction; the casts it decided go out after it commits.

    Nothing of a batch is acknowledged before this exits cleanly (see
    RPCServer), so a worker that dies at any point loses nothing: its
    messages are redelivered, and a redelivered request sends the builds of
    what was committed again instead of placing it twice.
    """

    def __init__(self, database, outbox):
        self._database = database
        self._outbox = outbox

    def __enter__(self):
        self._collecting = self._outbox.collecting()
        self._collecting.__enter__()
        self._transaction = self._database.unit_of_work()
        try:
            self._transaction.__enter__()
        except BaseException:
            self._collecting.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self._transaction.__exit__(exc_type, exc, tb)
            if exc_type is None:
                self._outbox.release()
        finally:
            self._collecting.__exit__(None, None, None)
        return False

    #: Methods that write nothing to the database need no savepoint of their own.
    READ_ONLY = frozenset({"report_resources", "select_destinations", "list_hosts", "list_instances",
                           "show_instance"})

    @contextlib.contextmanager
    def step(self, method):
        try:
            if method in self.READ_ONLY:
                yield
                return
            with self._database.step(), self._outbox.step():
                yield
        except Exception as exc:
            if db_api.is_transient(exc):
                raise rpc.RetryLater(f"passing database failure: {exc}") from exc
            raise
