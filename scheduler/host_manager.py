"""Keeps one HostState per compute host, current with its agent's reports."""

import datetime
import ipaddress
import logging
import math
import re
import threading
import time

import numpy as np

from scheduler import host_load, host_names, instance_metrics
from scheduler.exception import InvalidRequest
from scheduler.host_state import HostTable
from scheduler.request_spec import parse_uuid
from scheduler.rpc import names
from scheduler.wire_numbers import is_finite

LOG = logging.getLogger(__name__)

MAX_INSTANCES_PER_HOST = 100_000
MAX_METRICS = 200
MAX_SUPPORTED = 100
#: cpu_info: at most this many features, each short text (a real x86 CPU lists about 150).
MAX_CPU_FEATURES = 1000
#: The integer columns of compute_nodes are 32-bit everywhere.
_INT32 = 2**31 - 1
_LIMIT = 2**53
_MAX_TIME_TEXT = 64
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# (key, integral, lowest, highest): the figures every report carries, with the
# bounds the database and the arithmetic can hold. "Used" figures include the
# host's reserves; "free" ones go negative on an overcommitted host.
_FIGURES = (
    ("memory_mb", True, 0, _INT32),
    ("free_ram_mb", True, -_INT32, _INT32),
    ("local_gb", True, 0, _INT32),
    ("free_disk_gb", False, -_LIMIT, _LIMIT),
    ("vcpus", True, 0, _INT32),
    ("vcpus_used", False, 0, _LIMIT),
)
_OPTIONAL_FIGURES = (
    ("memory_mb_used", True, 0, _INT32),
    ("local_gb_used", False, 0, _LIMIT),
    ("running_vms", True, 0, MAX_INSTANCES_PER_HOST),
    ("report_seq", True, 1, _LIMIT),
    ("reserved_host_memory_mb", False, 0, _INT32),
    ("reserved_host_disk_mb", False, 0, _LIMIT),
    ("reserved_host_cpus", False, 0, _INT32),
    ("hypervisor_version", True, 0, _LIMIT),
)


def check_report(host, resources):
    """Raise InvalidRequest unless ``resources`` is a usable report for ``host``.

    Every field the scheduler reads or stores is checked, against the bounds
    of the column that keeps it: a report that passes can be saved, and one
    that does not is refused whole, naming the field. But ``instance_usage``: a bad
    entry of it is dropped from ``resources``, with a warning, and the rest kept.
    """
    host_names.check(host, "report_resources: host")
    where = f"report_resources from {host}"
    if not isinstance(resources, dict):
        raise InvalidRequest(f"{where}: resources must be an object")
    if resources.get("host", host) != host:
        raise InvalidRequest(f"{where}: resources are for host {_shown(resources.get('host'))}")
    for key, integral, low, high in _FIGURES:
        value = resources.get(key)
        if type(value) is not int or not low <= value <= high:  # else fine: the common case, fast
            _check_figure(where, key, value, integral, low, high)
    for key, integral, low, high in _OPTIONAL_FIGURES:
        value = resources.get(key)
        if value is not None and (type(value) is not int or not low <= value <= high):
            _check_figure(where, key, value, integral, low, high)
    for key in ("nodename", "hypervisor_type"):
        value = resources.get(key)
        if value is not None and not _short_text(value):
            raise InvalidRequest(f"{where}: {key} must be text of 1 to 255 characters, got {_shown(value)}")
    for key in ("reported_at", "started_at"):
        value = resources.get(key)
        if value is not None and not _is_time(value):
            raise InvalidRequest(f"{where}: {key} must be an ISO-8601 time, got {_shown(value)}")
    uuids = resources.get("instance_uuids", [])
    if not isinstance(uuids, list) or len(uuids) > MAX_INSTANCES_PER_HOST:
        raise InvalidRequest(f"{where}: instance_uuids must be a list of at most {MAX_INSTANCES_PER_HOST}")
    for i, value in enumerate(uuids):
        if not isinstance(value, str) or not _UUID.fullmatch(value):  # uuid.UUID() costs 5 times more
            parse_uuid(value, f"{where}: instance_uuids[{i}]")  # says why
    _check_placement_facts(host, resources)
    host_load.check_report(host, resources)
    instance_metrics.clean_report_usage(host, resources)  # drops bad entries, keeps the report


def _shown(value):
    return repr(value)[:60]


def _check_figure(where, key, value, integral, low, high):
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise InvalidRequest(f"{where}: {key} must be a number, got {_shown(value)}")
    if integral and isinstance(value, float) and not value.is_integer():
        raise InvalidRequest(f"{where}: {key} must be a whole number, got {_shown(value)}")
    if not low <= value <= high:
        raise InvalidRequest(f"{where}: {key} must be between {low} and {high}, got {_shown(value)}")


def _is_time(value):
    if not isinstance(value, str) or len(value) > _MAX_TIME_TEXT:
        return False
    text = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    try:
        datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _short_text(value):
    return isinstance(value, str) and 0 < len(value) <= 255 and not names.CONTROL.search(value)


def _check_placement_facts(host, resources):
    """The optional keys the placement filters and weighers read (ImageProperties, IoOps...)."""
    where = f"report_resources from {host}"
    for key in ("io_workload", "failed_builds"):
        value = resources.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _LIMIT:
            raise InvalidRequest(f"{where}: {key} must be a count, got {value!r}"[:300])
    for key in ("cpu_arch", "hypervisor_type"):
        value = resources.get(key)
        if value is not None and not _short_text(value):
            raise InvalidRequest(f"{where}: {key} must be a string of at most 255 characters")
    modes = resources.get("vm_modes")
    if modes is not None and not (
        isinstance(modes, list) and len(modes) <= MAX_SUPPORTED and all(_short_text(m) for m in modes)
    ):
        raise InvalidRequest(f"{where}: vm_modes must be a list of strings")
    triples = resources.get("supported_instances")
    if triples is not None and not (
        isinstance(triples, list)
        and len(triples) <= MAX_SUPPORTED
        and all(isinstance(t, list | tuple) and len(t) == 3 and all(_short_text(p) for p in t)
                for t in triples)
    ):
        raise InvalidRequest(
            f"{where}: supported_instances must be a list of [architecture, hypervisor_type, vm_mode]"
        )
    host_ip = resources.get("host_ip")
    if host_ip is not None:
        try:
            ipaddress.ip_address(host_ip if isinstance(host_ip, str) else None)
        except ValueError:
            raise InvalidRequest(f"{where}: host_ip must be an IP address, got {_shown(host_ip)}") from None
    _check_host_description(where, resources)


def _check_host_description(where, resources):
    """cpu_info, image_properties, version and stats: what the host says of itself."""
    cpu_info = resources.get("cpu_info")
    if cpu_info is not None:
        _check_cpu_info(where, cpu_info)
    image_properties = resources.get("image_properties")
    if image_properties is not None and not (
        isinstance(image_properties, dict) and len(image_properties) <= MAX_METRICS
        and all(_short_text(k) and isinstance(v, dict) and len(v) <= MAX_INSTANCES_PER_HOST
                and all(isinstance(value, str) and len(value) <= 255 and type(n) is int
                        and 0 < n <= MAX_INSTANCES_PER_HOST for value, n in v.items())
                for k, v in image_properties.items())):
        raise InvalidRequest(f"{where}: image_properties must map each image property to "
                             f"{{value: how many instances}}")
    version = resources.get("version")
    if version is not None and not (_short_text(version) and len(version) <= 64):
        raise InvalidRequest(f"{where}: version must be text of at most 64 characters")
    stats = resources.get("stats")
    if stats is not None and not (
        isinstance(stats, dict) and len(stats) <= MAX_METRICS
        and all(_short_text(k) and not isinstance(v, bool) and (
            isinstance(v, int) and -_LIMIT <= v <= _LIMIT or isinstance(v, str) and len(v) <= 255)
            for k, v in stats.items())):
        raise InvalidRequest(f"{where}: stats must map at most {MAX_METRICS} names to a number or "
                             "text (Nova's compute node stats: num_instances, num_proj_<project>...)")
    metrics = resources.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, dict) or len(metrics) > MAX_METRICS:
            raise InvalidRequest(f"{where}: metrics must be an object of at most {MAX_METRICS} entries")
        for name, value in metrics.items():
            if not _short_text(name) or not is_finite(value):
                raise InvalidRequest(f"{where}: metrics[{str(name)[:50]!r}] must be a finite number")


def _check_cpu_info(where, cpu_info):
    """``{arch, model, vendor: text; topology: {name: count}; features: [text];
    maxphysaddr: {mode, bits}}`` (the shape of Nova's libvirt driver), each optional."""
    if not isinstance(cpu_info, dict):
        raise InvalidRequest(f"{where}: cpu_info must be an object")
    for key, value in cpu_info.items():
        if key in ("arch", "model", "vendor"):
            ok = value is None or _short_text(value)
        elif key == "topology":
            ok = isinstance(value, dict) and len(value) <= 10 and all(
                _short_text(k) and type(v) is int and 0 <= v <= _INT32 for k, v in value.items())
        elif key == "features":
            ok = isinstance(value, list) and len(value) <= MAX_CPU_FEATURES and all(map(_short_text, value))
        elif key == "maxphysaddr":
            ok = isinstance(value, dict) and set(value) <= {"mode", "bits"} and (
                type(value.get("bits", 0)) is int and 0 <= value.get("bits", 0) <= 1024
                and (value.get("mode") is None or _short_text(value["mode"])))
        else:
            ok = False
        if not ok:
            raise InvalidRequest(f"{where}: cpu_info[{str(key)[:50]!r}] is not what a cpu_info holds "
                                 f"(arch, model, vendor: text; topology: counts; features: a list of text; "
                                 f"maxphysaddr: mode and bits)")


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
        #: hosts an operator deleted; one that reports again is back.
        self.deleted = set()
        #: hosts said to be down (no report for service_down_time), until they report again.
        self.down = set()
        #: since when (monotonic) this scheduler cannot take reports, if it cannot now.
        self.deaf_since = None

    def update_from_report(self, host, resources, now=None):
        """Take a report as the host's new base; True, or False when it is older than the
        one taken last (the same agent process numbers its reports: ``started_at`` and
        ``report_seq``). A report delivered again after newer ones, as a batch handed
        back for redelivery would, must not give back room the newer ones took."""
        check_report(host, resources)
        with self.lock:
            row = self.table.index.get(host)
            seq = resources.get("report_seq")
            if row is not None and seq is not None:
                last = self.table.extra.get(row, {}).get("order")
                if last is not None and last[0] == resources.get("started_at") and seq <= last[1]:
                    return False
            silent = None
            if self.down and host in self.down:
                self.down.discard(host)
                silent = (time.monotonic() if now is None else now) - self.table.updated[row]
            row = self.table.add(host, resources.get("nodename"))
            if host in self.deleted:
                self.deleted.discard(host)
                LOG.warning("Host %s was deleted by an operator and reports again: it is back", host)
            self.table.disabled[row] = host in self.disabled
            self.table.update_from_report(
                row,
                resources,
                time.monotonic() if now is None else now,
                pending_ttl=self.conf.scheduler.service_down_time,
            )
        if silent is not None:
            LOG.info("Host %s is up: it reports again after %s without a report", host, _duration(silent))
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
                self.update_from_report(node["host"], report, now=now - max(age, 0.0))
            except InvalidRequest:
                continue

    def get_all_host_states(self):
        """Every host the scheduler knows, but those deleted."""
        with self.lock:
            return [view for view in self.table.views() if view.host not in self.deleted]

    def set_disabled(self, disabled):
        """Take ``{host: reason}`` as the hosts operators have disabled now."""
        with self.lock:
            self.disabled = dict(disabled)
            self.table.disabled[:] = False
            for host in set(self.disabled) | self.deleted:
                row = self.table.index.get(host)
                if row is not None:
                    self.table.disabled[row] = True

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

    def deaf(self, since):
        """This scheduler stopped taking reports at ``since`` (monotonic): its connection to the
        broker was lost, or it holds its messages. Until heard(), report ages stand still."""
        with self.lock:
            if self.deaf_since is None:
                self.deaf_since = since

    def heard(self, now):
        """This scheduler takes reports again: every report older than the deaf time is aged as if
        that time had not passed."""
        with self.lock:
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
