"""The scheduler's RPC endpoint for operators' host and service commands.

``berth host disable|enable|delete`` and ``berth service list``. A disabled
host takes no new instance whatever the filters, and ``berth host list`` shows
why; a deleted host is forgotten (its last report, its agent's service row,
its aggregate memberships) and comes back if its agent reports again. As
with aggregates, the scheduler that makes a change applies it at once and,
once committed, tells the others (a fanout cast of ``hosts_changed``); their
periodic task reloads the disabled hosts too, should a cast be lost.
"""

import logging

from scheduler import api_versions, rpc
from scheduler.db.api import Conflict, to_db_time
from scheduler.exception import InvalidRequest
from scheduler.version import version

LOG = logging.getLogger(__name__)
AGENT_BINARY = "berth-compute-agent"
AGENT_TOPIC = "compute"
SCHEDULER_BINARY = "berth-scheduler"
MAX_REASON = 255


def _reason(value):
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON or not value.isprintable():
        raise InvalidRequest(f"reason must be printable text of at most {MAX_REASON} characters")
    return value


def reload_disabled(database, hosts):
    """Take the disabled hosts from the database into ``hosts`` (a HostManager), unless another
    reload took newer ones meanwhile; returns them as read."""
    read_at = hosts.disabled_changes
    disabled = {s["host"]: s.get("disabled_reason")
                for s in database.list_services(AGENT_BINARY) if s.get("disabled")}
    hosts.set_disabled(disabled, read_at)
    return disabled


class HostAdminEndpoint:
    RPC_API = api_versions.ADMIN

    def __init__(self, conf, database, host_manager, known_host, announce=None):
        self._conf = conf
        self._db = database
        self._hosts = host_manager
        self._known_host = known_host  # known_host(name) -> name, or InvalidRequest
        self._announce = announce  # announce(deleted_hosts): tell the other schedulers, after the commit

    def _reload(self):
        return reload_disabled(self._db, self._hosts)

    def _changed(self, deleted=()):
        self._reload()
        if self._announce is not None:
            self._announce(list(deleted))

    @rpc.read_only
    @rpc.callers(rpc.SCHEDULER)
    def hosts_changed(self, context, by, deleted=()):
        """Another scheduler disabled, enabled or deleted hosts: apply it now."""
        if by == self._conf.host:
            return
        for host in deleted or ():
            if isinstance(host, str):
                self._hosts.forget(host)
        self._reload()
        LOG.info("Hosts changed through scheduler %s%s", str(by)[:200],
                 f": deleted {', '.join(map(str, deleted))[:500]}" if deleted else "")

    @rpc.callers(rpc.OPERATOR)
    def host_disable(self, context, host, reason=None):
        host, reason = self._known_host(host), _reason(reason)
        self._db.set_service_disabled(host, AGENT_BINARY, AGENT_TOPIC, True, reason)
        self._changed()
        LOG.info("Host %s disabled%s", host, f": {reason}" if reason else "")
        return self._host(host)

    @rpc.callers(rpc.OPERATOR)
    def host_enable(self, context, host):
        host = self._known_host(host)
        was_disabled = host in self._reload()
        self._db.set_service_disabled(host, AGENT_BINARY, AGENT_TOPIC, False)
        self._changed()
        LOG.info("Host %s enabled%s", host, "" if was_disabled else " (it was not disabled)")
        return dict(self._host(host), was_disabled=was_disabled)

    @rpc.callers(rpc.OPERATOR)
    def host_delete(self, context, host):
        host = self._known_host(host)
        try:
            result = self._db.delete_compute_host(host, AGENT_BINARY)
        except Conflict as exc:
            raise InvalidRequest(str(exc)) from None
        self._hosts.forget(host)
        self._changed(deleted=[host])
        LOG.info("Host %s deleted (and removed from %d aggregate(s))", host, result["aggregates_left"])
        return {"host": host, **result}

    def _host(self, host):
        return {"host": host, "disabled": host in self._hosts.disabled,
                "disabled_reason": self._hosts.disabled.get(host)}

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_services(self, context):
        """The schedulers (by their heartbeats) and the compute agents (by their reports)."""
        down_time = self._conf.scheduler.service_down_time
        now = self._db.now()
        found = []
        for s in self._db.list_services(SCHEDULER_BINARY):
            seen = to_db_time(s.get("last_seen_at"))
            age = (now - seen).total_seconds() if seen else None
            found.append({"binary": SCHEDULER_BINARY, "host": s["host"],
                          "status": "disabled" if s.get("disabled") else "enabled",
                          "state": "up" if age is not None and age <= down_time else "down",
                          "updated_at": s.get("last_seen_at"), "version": s.get("version"),
                          "disabled_reason": s.get("disabled_reason")})
        with self._hosts.lock:
            for view in sorted(self._hosts.get_all_host_states(), key=lambda v: v.host):
                disabled = view.host in self._hosts.disabled
                found.append({"binary": AGENT_BINARY, "host": view.host,
                              "status": "disabled" if disabled else "enabled",
                              "state": "up" if self._hosts.is_up(view) else "down",
                              "updated_at": view.reported_at, "version": view.version,
                              "disabled_reason": self._hosts.disabled.get(view.host)})
        return found


def heartbeat(database, conf, topic):
    """The scheduler's own heartbeat, with its version."""
    database.service_heartbeat(conf.host, SCHEDULER_BINARY, topic, version=version())
