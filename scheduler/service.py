"""The scheduler service: its RPC server, its periodic tasks, its start and stop."""

import contextlib
import dataclasses
import functools
import logging
import threading
import time

import prometheus_client
from sqlalchemy import exc as sa_exc

from compute_agent.client import ComputeClient
from scheduler import concurrency, rpc
from scheduler.admin.flavors import FlavorEndpoint
from scheduler.admin.grouping import AdminEndpoint, known_host, reload_aggregates
from scheduler.admin.hosts import SCHEDULER_BINARY, HostAdminEndpoint, heartbeat, reload_disabled
from scheduler.client import AGENT_METHODS, AGENTS_TOPIC, REPORTS_TOPIC, TOPIC, SchedulerClient
from scheduler.conf import upgrade_levels
from scheduler.conf.filter_scheduler import allocation_ratios
from scheduler.db import api as db_api
from scheduler.fleet import report_digests
from scheduler.fleet.build_expiry import BuildExpiry
from scheduler.fleet.host_manager import HostManager
from scheduler.fleet.reconciler import Reconciler
from scheduler.fleet.report_owner import ReportOwners, live_schedulers
from scheduler.manager import ReportBuffer, SchedulerManager
from scheduler.moves.api import MoveEndpoint
from scheduler.moves.applier import MoveApplier
from scheduler.moves.expiry import MoveExpiry
from scheduler.moves.jobs.api import JobEndpoint
from scheduler.moves.jobs.runner import JobLoop, JobRunner, lease_owner
from scheduler.moves.planner import MovePlanner
from scheduler.moves.rebalance_api import RebalanceEndpoint
from scheduler.planning.applier import Applier
from scheduler.planning.claims import HostClaims
from scheduler.planning.fragmentation import FragmentationHints
from scheduler.planning.lookups import DatabaseLookups
from scheduler.planning.planner import Planner
from scheduler.planning.scheduling import Scheduling
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector
from scheduler.rpc import topology
from scheduler.scaling.api import ScalingGroupEndpoint
from scheduler.scaling.controller import ScalingController
from scheduler.scaling.instance_metrics_api import InstanceMetricsEndpoint
from scheduler.scaling.metrics import ScalingGroupsCollector
from scheduler.scaling.service import BrokerQueues, FleetMetrics, ScalingLoop, controller_settings
from scheduler.status_page import app as status_app
from scheduler.status_page.recent import Recent
from scheduler.status_page.snapshot import StatusSource
from scheduler.telemetry.scheduler_metrics import FleetCollector
from scheduler.transaction.outbox import Outbox
from scheduler.transaction.undo import UndoLog
from scheduler.transaction.unit_of_work import UnitOfWork
from scheduler.utils.log_once import LogOnce
from scheduler.utils.masking import mask_url

LOG = logging.getLogger(__name__)
BINARY = SCHEDULER_BINARY
#: Seconds between measures of the database's clock, and the gap worth a warning.
CLOCK_CHECK_INTERVAL = 300
CLOCK_WARNING = 2.0


@dataclasses.dataclass
class SchedulerParts:
    """What a scheduler is made of, wired together: its host table and reports, the planner that
    decides and the applier that claims and commits, the periodic jobs, and the RPC endpoint."""

    host_manager: HostManager
    reports: ReportBuffer
    outbox: Outbox
    undo: UndoLog
    compute: ComputeClient
    claims: HostClaims
    planner: Planner
    applier: Applier
    scheduling: Scheduling
    build_expiry: BuildExpiry
    reconciler: Reconciler
    refusals: Recent
    manager: SchedulerManager
    move_planner: MovePlanner
    move_applier: MoveApplier
    move_expiry: MoveExpiry
    moves: MoveEndpoint
    rebalance: RebalanceEndpoint


def assemble(conf, transport, database, rng=None):
    """A scheduler's parts, on ``transport`` and ``database``."""
    host_manager = HostManager(conf)
    selector = Selector(filters.enabled_filters(conf), weighers.enabled_weighers(conf),
                        conf.filter_scheduler.host_subset_size, rng,
                        shuffle_best_same_weighed_hosts=conf.filter_scheduler.shuffle_best_same_weighed_hosts)
    outbox, undo, refusals = Outbox(batch=transport.publisher.batch), UndoLog(), Recent()
    compute = ComputeClient(transport)
    claims = HostClaims(database, host_manager, conf.scheduler.service_down_time)
    stored = DatabaseLookups(database)  # what the decision core reads, and all it reads
    planner = Planner(conf, stored, host_manager, selector, undo.add, filters.all_filters(),
                      weighers.all_weighers())
    applier = Applier(database, host_manager, claims, outbox, compute, refusals)
    scheduling = Scheduling(database, planner, applier)
    reports = ReportBuffer()
    move_applier = MoveApplier(database, host_manager, outbox, compute)
    move_planner = MovePlanner(conf, stored, planner)
    moves = MoveEndpoint(conf, database, host_manager, applier, move_planner, move_applier)
    planner.fragmentation = FragmentationHints(conf, stored, host_manager, selector.filters,
                                               move_planner.spec)
    return SchedulerParts(
        host_manager=host_manager, reports=reports, outbox=outbox, undo=undo, compute=compute, claims=claims,
        planner=planner, applier=applier, scheduling=scheduling,
        build_expiry=BuildExpiry(conf, database, scheduling.schedule, applier.terminate,
                                 functools.partial(UnitOfWork, database, outbox, undo)),
        reconciler=Reconciler(database, conf.scheduler.service_down_time, applier.terminate,
                              moves=move_applier, build=applier.send_build_again, power=applier.power),
        refusals=refusals,
        manager=SchedulerManager(conf, database, host_manager, reports, scheduling),
        move_planner=move_planner, move_applier=move_applier,
        move_expiry=MoveExpiry(conf, database, move_applier,
                               functools.partial(UnitOfWork, database, outbox, undo)),
        moves=moves, rebalance=RebalanceEndpoint(conf, database, host_manager, selector, moves),
    )


#: What the agents' server serves: the agents' words on their instances and moves (their own queue,
#: AGENTS_TOPIC) and their reports (from the reports' exchange).
AGENTS_SERVER_METHODS = AGENT_METHODS | {"report_resources"}


def agents_server(transport, endpoints, fanouts=(), **kwargs):
    """The RPC server of what the agents say, beside the clients' one: the agents' queue
    (AGENTS_TOPIC, shared by every scheduler) and, with ``fanouts`` or ``shared_fanouts``, the
    reports' exchange; the AGENTS_SERVER_METHODS of ``endpoints`` only. ``kwargs`` as
    rpc.get_rpc_server takes them."""
    return rpc.get_rpc_server(transport, rpc.Target(topic=AGENTS_TOPIC), endpoints,
                              methods=AGENTS_SERVER_METHODS, fanout_queue=bool(fanouts), fanouts=fanouts,
                              **kwargs)


class SchedulerService:
    def __init__(self, conf, transport, database, rng=None):
        self.conf = conf
        self.database = database
        self.transport = transport
        self.parts = parts = assemble(conf, transport, database, rng)
        self.manager = parts.manager
        hosts = parts.host_manager
        self.admin = AdminEndpoint(conf, database, hosts, announce=self._announce_aggregates)
        self.host_admin = HostAdminEndpoint(conf, database, hosts,
                                            functools.partial(known_host, database, hosts),
                                            announce=self._announce_hosts)
        self.moves = parts.moves
        self.jobs = JobEndpoint(database, self.host_admin, parts.rebalance)
        self._reload_aggregates = functools.partial(reload_aggregates, database, hosts)
        self._reload_disabled = functools.partial(reload_disabled, database, hosts)
        self._peers = SchedulerClient(transport)
        self._queues = BrokerQueues(transport)  # the external metrics' queues
        access = rpc.Access.from_conf(conf)
        shared = conf.scheduler.report_ingestion == report_digests.SHARED
        self.digests_out = self.digests_in = None
        if shared:
            self.digests_out = report_digests.DigestSender(transport, conf.host,
                                                           conf.scheduler.report_digest_interval,
                                                           conf.scheduler.report_digest_size)
            self.digests_in = report_digests.DigestReceiver(
                transport, conf.host, report_digests.taker(parts.host_manager, parts.reports), access,
                hearing=parts.host_manager)
            self.manager.forward = (topology.fanout_exchange(REPORTS_TOPIC).name, self.digests_out.add)
        self._server = rpc.get_rpc_server(
            transport, rpc.Target(topic=TOPIC, server=conf.host),
            [self.manager, self.moves, self.admin, self.host_admin, FlavorEndpoint(database, conf),
             parts.rebalance, self.jobs, ScalingGroupEndpoint(conf, database, self._queues),
             InstanceMetricsEndpoint(conf, database)],
            batch_size=conf.scheduler.batch_size, unit_of_work=self._unit_of_work,
            access=access,
        )
        #: What the agents say, in a server of its own: a placement is ACTIVE when its agent says
        #: so, and a host's report is heard, whatever backlog of requests waits. The reports: each
        #: scheduler takes them all, or they share them (see scheduler.fleet.report_digests); the
        #: hosts are not down for the time this server could not take them (``hearing``).
        self._agents_server = agents_server(
            transport, [self.manager, self.moves], batch_size=conf.scheduler.batch_size,
            unit_of_work=self._unit_of_work, access=access, hearing=self.parts.host_manager,
            fanouts=() if shared else (REPORTS_TOPIC,),
            shared_fanouts=((REPORTS_TOPIC, report_digests.REPORT_TTL),) if shared else ())
        self._agents_server.dead_letters.recent = self._server.dead_letters.recent  # one list on the page
        #: Which hosts' reports this scheduler writes, and the hosts it knows have a row.
        self.report_owners = ReportOwners(conf.host)
        if conf.scheduler.prefer_owned_hosts:  # with other schedulers live: fewer claim conflicts
            self.parts.planner.selector.owners = self.report_owners
        self._saved_hosts = set()
        self._stopping = threading.Event()
        self._periodic = None
        self._task_logs = LogOnce(LOG)  # a database away: one line a minute per task, not a traceback
        #: Reports' samples of other hosts' members: one warning per host a minute.
        self._strays = LogOnce(LOG)
        self.scaling = self._scaling_loop() if conf.scaling.enabled else None
        #: Carries on the drains and rebalance plans, with the other schedulers (by lease).
        self.job_loop = JobLoop(JobRunner(database, self.moves, parts.rebalance, self._unit_of_work,
                                          lease_owner(conf), conf.jobs.lease_time), conf.jobs.interval)
        down_after_s = lambda: conf.scheduler.service_down_time  # noqa: E731 - read at each scrape
        self._collectors = [FleetCollector(self.parts.host_manager, down_after_s,
                                           lambda: conf.prometheus.per_host_series)]
        if self.scaling is not None:
            scaling = self.scaling
            self._collectors.append(ScalingGroupsCollector(lambda: scaling.last_results))
        self.status = StatusSource(
            conf.host, self.parts.host_manager, database.count_instances_by_state,
            lambda: conf.filter_scheduler.default_availability_zone, down_after_s, self.parts.refusals,
            self._server.dead_letters.recent, None if self.scaling is None else self.scaling.history,
            moves=self._moves_in_progress, ratios=lambda: allocation_ratios(conf))

    def _scaling_loop(self):
        casts = SchedulerClient(self.transport)
        controller = ScalingController(
            controller_settings(self.conf), self.database,
            cast_run_instance=lambda spec, properties: casts.run_instance({}, spec, properties),
            cast_run_instances=lambda requests: casts.run_instances(
                [({}, spec, properties) for spec, properties in requests]),
            cast_delete_instance=lambda uuid: casts.delete_instance({}, uuid),
            metrics_source=FleetMetrics(self.database, self._queues, self.conf.scaling.metric_max_age),
        )
        return ScalingLoop(controller, self.conf.scaling.sync_period)

    def start(self):
        upgrade_levels.log_caps(self.conf)
        self.check_clock()
        self.restore_hosts()
        self.parts.claims.learn()  # every host's generation and pending placements
        self._reload_aggregates()  # reloaded by the periodic task too
        self._reload_disabled()  # likewise
        if self.digests_in is not None:
            self.digests_in.start()
            self.digests_out.start()
        self._agents_server.start()
        self._server.start()
        for collector in self._collectors:
            prometheus_client.REGISTRY.register(collector)
        self._periodic = concurrency.spawn(self._run_periodic, name="scheduler-periodic")
        if self.scaling is not None:
            self.scaling.start()
        self.job_loop.start()
        LOG.info(
            "Scheduler %s started on %s, exchange %s%s: filters %s, weighers %s",
            self.conf.host,
            self.transport.safe_url,
            self.conf.control_exchange,
            durability(self.transport),
            ", ".join(f.name for f in self.parts.planner.selector.filters),
            ", ".join(w.name for w in self.parts.planner.selector.weighers),
        )

    def restore_hosts(self):
        """Take the hosts' last reports saved by any scheduler into the host table."""
        nodes = self.database.list_compute_nodes()
        self.parts.host_manager.restore(nodes, wall=self.database.now())
        self._saved_hosts.update(node["host"] for node in nodes)

    def stop(self):
        """Stop syncing scaling groups and carrying on jobs (their leases given up), stop taking
        messages, finish the one in hand, save what is unsaved."""
        if self.scaling is not None:
            self.scaling.stop()
        self.job_loop.stop()
        self._server.stop()
        self._agents_server.stop()
        self._server.wait()
        self._agents_server.wait()
        self._queues.close()  # after the last create or set that may have opened it again
        if self.digests_in is not None:
            self.digests_out.stop()  # what it took goes to the others
            self.digests_in.stop()
        self._stopping.set()
        if self._periodic is not None:
            self._periodic.join()
        self.save_reports()
        for collector in self._collectors:
            with contextlib.suppress(KeyError):  # not started
                prometheus_client.REGISTRY.unregister(collector)
        LOG.info("Scheduler %s stopped", self.conf.host)

    def _announce_aggregates(self):
        # Through the outbox: out once the change commits, and before the caller's reply; read
        # again once committed, as _announce_hosts does.
        self.parts.outbox.send(self._reload_aggregates)
        self.parts.outbox.send(self._peers.aggregates_changed, {}, self.conf.host)

    def _announce_hosts(self, deleted):
        # Read again once committed: a periodic reload that read before the commit is dropped.
        self.parts.outbox.send(self._reload_disabled)
        self.parts.outbox.send(self._peers.hosts_changed, {}, self.conf.host, deleted)

    def _unit_of_work(self):
        return UnitOfWork(self.database, self.parts.outbox, self.parts.undo)

    def save_reports(self):
        """Save the newest report of each host this scheduler writes (see _to_write); should
        they fail together for a reason other than a passing one, each is saved alone and one
        that fails is left out. Then save the instances' usage those reports carry
        (instance_metrics, not in the hosts' rows), and prune the samples of instances gone, at
        most once a minute. Every report drained is reconciled, written here or not."""
        reports = self.parts.reports.drain()
        if reports:
            try:
                written = self._to_write(reports)
            except db_api.DatabaseUnavailable:
                self.parts.reports.put_back(reports)
                raise
            # compute_nodes.updated_at doubles as each agent's last-seen time.
            rows = [r.to_wire(usage=False) for r in written.values()]
            try:
                if rows:
                    self.database.save_compute_nodes(rows)
            except db_api.DatabaseUnavailable:
                self.parts.reports.put_back(reports)  # saved once the database is back
                raise
            except (sa_exc.DataError, sa_exc.IntegrityError, ValueError, TypeError) as exc:
                # What one row holds, not the database being away: worth saving each alone.
                if len(rows) == 1:
                    raise
                LOG.warning("Saving %d host reports together failed (%s); saving each alone", len(rows),
                            mask_url(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
                for row in rows:
                    try:
                        self.database.save_compute_nodes([row])
                    except (sa_exc.DataError, sa_exc.IntegrityError, ValueError, TypeError) as exc:
                        LOG.error("Cannot save the report of host %s, left out: %s", row["host"],
                                  str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                        reports.pop(row["host"])
                        written.pop(row["host"])
            self._saved_hosts.update(written)
            self.parts.reconciler.run(reports)
            try:
                _, strays = self.database.save_instance_usage(written) if written else (0, {})
            except (sa_exc.DataError, sa_exc.IntegrityError, ValueError, TypeError) as exc:
                LOG.error("Cannot save the instances' usage of %d host report(s), left out: %s", len(written),
                          str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            else:
                for host, uuids in strays.items():
                    shown = ", ".join(uuids[:5]) + (", ..." if len(uuids) > 5 else "")
                    self._strays.log(host, logging.WARNING, "Report of host %s: usage samples of %d scaling "
                                     "group member(s) the database places on another host dropped, not "
                                     "stored: %s", host, len(uuids), shown)
        now = time.monotonic()
        pruned_at = getattr(self, "_instance_metrics_pruned_at", None)
        if pruned_at is None or now - pruned_at >= self.database.INSTANCE_METRICS_PRUNE_INTERVAL_S:
            self._instance_metrics_pruned_at = now
            self.database.prune_instance_metrics(self.conf.scaling.metric_max_age)

    def _to_write(self, reports):
        """The reports of ``reports`` this scheduler writes: those of the hosts it owns among the
        live schedulers (every scheduler takes every report; one writes it), and the first report
        of a host it knows no row of, so that a new host's row exists after one period whatever
        its owner's state (a cost of one write per scheduler, once per host)."""
        heartbeats = {s["host"]: db_api.to_db_time(s.get("last_seen_at"))
                      for s in self.database.list_services(BINARY)}
        self.report_owners.set_live(live_schedulers(heartbeats, self.database.now(),
                                                    self.conf.scheduler.service_down_time, self.conf.host))
        owns, saved = self.report_owners.owns, self._saved_hosts
        return {host: report for host, report in reports.items() if host not in saved or owns(host)}

    def _moves_in_progress(self):
        """The moves under way and the resizes waiting for confirmation, newest first, at most 50."""
        moves = [*self.database.list_migrations(status="migrating", limit=50),
                 *self.database.list_migrations(status="finished", limit=50)]
        return sorted(moves, key=lambda m: (m["created_at"], m["id"]), reverse=True)[:50]

    def check_clock(self):
        """Time records by the database's clock; say so when this machine's is off."""
        offset = self.database.sync_clock()
        if abs(offset) > CLOCK_WARNING:
            LOG.warning("This machine's clock is %.1f s %s the database's; Berth times its records "
                        "by the database's clock", abs(offset), "behind" if offset > 0 else "ahead of")

    def _periodic_tasks(self):
        return (
            ("saving host reports", self.save_reports),
            ("host liveness", self.parts.host_manager.notice_down_hosts),
            ("builds on hosts down", lambda: self.parts.build_expiry.expire_on_down_hosts(
                self.parts.host_manager.down_for_builds())),
            ("heartbeat", lambda: heartbeat(self.database, self.conf, TOPIC)),
            ("build expiry", self.parts.build_expiry.expire),
            ("move expiry", self.parts.move_expiry.expire),
            ("aggregates reload", self._reload_aggregates),  # changed through another scheduler
            ("disabled hosts reload", self._reload_disabled),
        )

    def run_periodic_tasks(self, check_clock=False):
        """Run each periodic task on its own: one that fails is logged and tried
        again next time, and the others run regardless."""
        tasks = self._periodic_tasks()
        if check_clock:
            tasks = (("clock check", self.check_clock), *tasks)
        for name, task in tasks:
            try:
                task()
            except db_api.DatabaseUnavailable as exc:
                self._task_logs.log(name, logging.WARNING, "Periodic task %s: %s; trying again in %s s", name,
                                    exc, self.conf.scheduler.periodic_interval)
            except Exception:
                LOG.exception("Periodic task %s failed; trying again in %s s", name,
                              self.conf.scheduler.periodic_interval)

    def _run_periodic(self):
        interval = self.conf.scheduler.periodic_interval
        next_clock_check = time.monotonic() + CLOCK_CHECK_INTERVAL
        while not self._stopping.wait(interval):
            check_clock = time.monotonic() >= next_clock_check
            if check_clock:
                next_clock_check = time.monotonic() + CLOCK_CHECK_INTERVAL
            self.run_periodic_tasks(check_clock)


def status_routes(conf, service):
    """The status page's routes on the scheduler's endpoint, none with [prometheus] status_page off."""
    if not conf.prometheus.status_page:
        return {}
    return status_app.routes(service.status.snapshot)


def durability(transport):
    """What the start-up line says of the exchange: what an oslo.messaging client must match."""
    if not transport.is_rabbit:
        return ""
    if transport.durable:
        return " (durable: clients must set [oslo_messaging_rabbit] amqp_durable_queues = true)"
    return " (not durable)"
