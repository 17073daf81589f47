"""Keeps one HostState per compute host, current with its agent's reports."""

import datetime
import logging
import math
import threading
import time

import numpy as np

from berth_contract.host_report import HostReport
from scheduler.exception import InvalidRequest
from scheduler.policy import host_load
from scheduler.policy.host_state import HostTable

LOG = logging.getLogger(__name__)

class HostManager:
    """The fleet as the scheduler sees it: a HostTable fed by validated reports.

    ``lock`` guards the table: hold it across a whole selection so that
    reports and placements interleave only between decisions.
    """

    def __init__(self, conf):
        self.conf = conf
        self.lock = threading.RLock()
        self.table = HostTable()
        # The moving average of measured load ([filter_scheduler] load_*, BalancedWeigher).
        self.table.load_half_life = getattr(
            conf.filter_scheduler, "load_half_life", host_load.DEFAULT_HALF_LIFE)
        self.table.load_stale_after = getattr(
            conf.filter_scheduler, "load_stale_after", host_load.DEFAULT_STALE_AFTER)
        #: host -> why an operator disabled it (None: no reason given); such a host takes nothing.
        self.disabled = {}
        self.disabled_changes = 0  # how many times set_disabled took a new set
        self.aggregate_changes = 0  # how many times the aggregates were reloaded
        #: hosts an operator deleted; one that reports again is back.
        self.deleted = set()
        #: hosts said to be down (no report for service_down_time, or their agent stopped), until they
        #: report again.
        self.down = set()
        #: host -> when (monotonic) its agent said, in its last report, that it stopped; until it reports
        #: again.
        self.stopped = {}
        #: since when (monotonic) this scheduler has been taking reports: a host whose report it has not
        #: had for service_down_time of its own listening is one it knows down (down_for_builds).
        self.listening_since = time.monotonic()
        #: since when (monotonic) this scheduler cannot take reports, if it cannot now.
        self.deaf_since = None
        #: what cannot hear (its source, see deaf()) -> since when.
        self._deaf = {}

    def update_from_report(self, report, now=None, restored=False):
        """Take ``report`` (a HostReport) as its host's new base; True, or False when it is older
        than the one taken last (the same agent process numbers its reports: ``started_at`` and
        ``report_seq``). A report delivered again after newer ones, as a batch handed
        back for redelivery would, must not give back room the newer ones took. ``restored``: one
        saved by an earlier run (a host stopped then is said down at INFO: no news of this run)."""
        host = report.host
        with self.lock:
            row = self.table.index.get(host)
            seq = report.report_seq
            if row is not None and seq is not None:
                last = self.table.extra.get(row, {}).get("order")
                if last is not None and last[0] == report.started_at and seq <= last[1]:
                    return False
            now = time.monotonic() if now is None else now
            silent = None
            if self.down and host in self.down:
                self.down.discard(host)
                stopped_at = self.stopped.pop(host, None)
                silent = now - (self.table.updated[row] if stopped_at is None else stopped_at)
            stops = bool(report.stopped)
            if stops:
                self.down.add(host)
                self.stopped[host] = now
            row = self.table.add(host, report.nodename)
            if host in self.deleted:
                self.deleted.discard(host)
                LOG.warning("Host %s was deleted by an operator and reports again: it is back", host)
            self.table.disabled[row] = host in self.disabled
            self.table.update_from_report(
                row,
                report,
                now,
                # read only where it is used: an option's lookup is a tenth of what a report costs here
                pending_ttl=self.conf.scheduler.service_down_time if row in self.table.pending else None,
            )
        if silent is not None and not stops:
            LOG.info("Host %s is up: it reports again after %s without a report", host, _duration(silent))
        if stops:
            LOG.log(logging.INFO if restored else logging.WARNING,
                    "Host %s is down: its agent stopped (its last report says so, report %s of the agent "
                    "started at %s); it takes no placement, and its builds not begun are placed again, "
                    "until it reports again", host, report.report_seq, report.started_at)
        return True

    def restore(self, compute_nodes, wall=None):
        """Start from the reports saved by an earlier run, aged by when they were saved
        (``wall``: naive UTC now, by the clock that timed them; default this machine's)."""
        now = time.monotonic()
        wall = datetime.datetime.now(datetime.UTC) if wall is None else wall.replace(tzinfo=datetime.UTC)
        for node in compute_nodes:
            report = dict(node.get("stats") or {}, **{k: v for k, v in node.items() if k != "stats"})
            saved = _parse_time(node.get("updated_at"))
            age = (wall - saved).total_seconds() if saved else math.inf
            try:
                report = HostReport.from_wire(report, node["host"])
            except InvalidRequest:
                continue
            self.update_from_report(report, now=now - max(age, 0.0), restored=True)

    def get_all_host_states(self):
        """Every host the scheduler knows, but those deleted."""
        with self.lock:
            return [view for view in self.table.views() if view.host not in self.deleted]

    def set_disabled(self, disabled, read_at=None):
        """Take ``{host: reason}`` as the hosts operators have disabled now; True if taken.

        ``read_at``: ``disabled_changes`` when ``disabled`` was read. A read that another change
        overtook (a periodic reload begun before an operator's enable committed) is dropped, so
        that it never undoes the newer one."""
        with self.lock:
            if read_at is not None and read_at != self.disabled_changes:
                return False
            self.disabled_changes += 1
            self.disabled = dict(disabled)
            self.table.disabled[:] = False
            for host in set(self.disabled) | self.deleted:
                row = self.table.index.get(host)
                if row is not None:
                    self.table.disabled[row] = True
            return True

    def forget(self, host):
        """An operator deleted ``host``: list it no more and place nothing on it, until its agent
        reports again."""
        with self.lock:
            row = self.table.index.get(host)
            if row is not None:
                self.deleted.add(host)
                self.table.disabled[row] = True

    def get(self, host):
        row = self.table.index.get(host)
        return None if row is None else self.table.view(row)

    def consume(self, host, instance_uuid, flavor):
        """Count a placement on ``host`` that its report does not show yet; one the
        host's last report lists is counted there already, and left alone."""
        with self.lock:
            row = self.table.index.get(host)
            if row is not None and not self.table.has_reported(row, instance_uuid):
                self.table.consume(row, instance_uuid, flavor)

    def release(self, host, instance_uuid):
        with self.lock:
            row = self.table.index.get(host)
            if row is not None:
                self.table.release(row, instance_uuid)

    # A report's age counts only the time this scheduler could hear reports: cut off from the
    # broker, or holding its messages while the database is away, it would otherwise take every
    # host for down, when it was not listening itself.

    def deaf(self, since, source=None):
        """This scheduler stopped taking reports at ``since`` (monotonic) from ``source`` (the RPC
        server: None; the other schedulers' digests: another): its connection to the broker was
        lost, or it holds its messages. Until every source that went deaf is heard again, report
        ages stand still: a host whose reports come by either way is not said down meanwhile."""
        with self.lock:
            self._deaf.setdefault(source, since)
            if self.deaf_since is None:
                self.deaf_since = since

    def heard(self, now, source=None):
        """This scheduler takes reports from ``source`` again: once no source is deaf, every report
        older than the deaf time is aged as if that time had not passed."""
        with self.lock:
            self._deaf.pop(source, None)
            if self._deaf:
                return  # another way still does not hear: ages stand still
            since, self.deaf_since = self.deaf_since, None
            if since is None or now <= since:
                return
            updated = self.table.updated
            before = np.flatnonzero(np.isfinite(updated) & (updated < since))
            self.table.updated[before] = updated[before] + (now - since)
        LOG.debug("Reports of %d host(s) aged as if the %.1f s this scheduler could not take reports had "
                  "not passed", len(before), now - since)

    def _now(self, now):
        now = time.monotonic() if now is None else now
        deaf_since = self.deaf_since
        return now if deaf_since is None else min(now, deaf_since)

    def is_up(self, state, now=None):
        now = self._now(now)
        return (
            state.updated is not None
            and now - state.updated <= self.conf.scheduler.service_down_time
        )

    def down_for_builds(self, now=None):
        """{host: why} of the hosts down whose builds are placed again (BuildExpiry.expire_on_down_hosts):
        those whose agent said it stopped, and, once this scheduler has listened for service_down_time
        (one that just started has not heard the agents yet), those silent for that long."""
        now = time.monotonic() if now is None else now
        down_time = self.conf.scheduler.service_down_time
        with self.lock:
            listened = self.deaf_since is None and now - self.listening_since >= down_time
            return {host: "its agent stopped" if host in self.stopped else
                    f"no report for more than service_down_time, {down_time} s"
                    for host in self.down
                    if host not in self.deleted and (host in self.stopped or listened)}

    def notice_down_hosts(self, now=None):
        """Say once of each host that it is down (a WARNING) when its last report is older than
        service_down_time; its next report says it is up again. Returns the hosts found down now."""
        now = self._now(now)
        down_time = self.conf.scheduler.service_down_time
        with self.lock:
            ages = now - self.table.updated
            found = [(self.table.names[row], float(ages[row])) for row in np.flatnonzero(ages > down_time)]
            found = [(host, age) for host, age in found if host not in self.down and host not in self.deleted]
            self.down.update(host for host, _ in found)
        for host, age in found:
            LOG.warning("Host %s is down: no report for %s (service_down_time is %d s)", host,
                        _duration(age), down_time)
        return [host for host, _ in found]


def _duration(seconds):
    return f"{seconds:.0f} s" if math.isfinite(seconds) else "longer than this scheduler knows of"


def _parse_time(value):
    if not value:
        return None
    if isinstance(value, datetime.datetime):
        parsed = value
    else:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
