"""The scheduler's RPC endpoint for operators: host aggregates and server groups.

Registered beside the SchedulerManager; every public method is an RPC
method (the ``berth aggregate ...`` and ``berth server-group ...`` commands).
Arguments are checked before anything changes, and every refusal is an
InvalidRequest whose message says what is wrong. The scheduler that handles
a change reloads its aggregates at once; the others pick it up in their
periodic task (:meth:`AdminEndpoint._reload`).
"""

import logging
import re
import uuid as uuidlib

from scheduler import rpc, server_groups
from scheduler.aggregates import AZ_KEY
from scheduler.db.api import Conflict, NotFound
from scheduler.exception import InvalidRequest
from scheduler.request_spec import parse_uuid

LOG = logging.getLogger(__name__)
MAX_TEXT = 255
MAX_METADATA = 100
MAX_SERVER_PER_HOST = 1000
_KEY = re.compile(r"^[A-Za-z0-9_.:\-]+$")


def _name(value, what):
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise InvalidRequest(f"{what} must be a non-empty string of at most {MAX_TEXT} characters")
    return value.strip()


def check_metadata(metadata):
    """``{key: str or None}``: keys are letters, digits and ``_.:-``; None unsets the key."""
    if not isinstance(metadata, dict) or not metadata or len(metadata) > MAX_METADATA:
        raise InvalidRequest(f"metadata must be 1 to {MAX_METADATA} key=value pairs")
    checked = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not _KEY.match(key) or len(key) > MAX_TEXT:
            raise InvalidRequest(f"metadata key {str(key)[:50]!r}: use letters, digits, '_', '.', ':', '-'")
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            raise InvalidRequest(
                f"metadata {key}: the value must be a string of at most {MAX_TEXT} characters"
            )
        checked[key] = value
    return checked


def check_rules(policy, rules):
    rules = rules or {}
    if not isinstance(rules, dict):
        raise InvalidRequest("rules must be an object")
    allowed = server_groups.RULES.get(policy, ())
    for key in rules:
        if key not in allowed:
            raise InvalidRequest(
                f"rule {str(key)[:50]!r} does not apply to policy {policy}"
                + (f" (it takes {', '.join(allowed)})" if allowed else " (it takes no rules)")
            )
    value = rules.get("max_server_per_host")
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SERVER_PER_HOST
    ):
        raise InvalidRequest(f"max_server_per_host must be a whole number from 1 to {MAX_SERVER_PER_HOST}")
    return dict(rules)


class AdminEndpoint:
    def __init__(self, conf, database, host_manager):
        self._conf = conf
        self._db = database
        self._hosts = host_manager

    def _reload(self):
        """Load every aggregate from the database into the host table."""
        found = self._db.list_aggregates()
        with self._hosts.lock:
            self._hosts.table.set_aggregates(found)
        return found

    def _known_host(self, host):
        host = _name(host, "host")
        with self._hosts.lock:
            if host in self._hosts.table.index:
                return host
        if any(node["host"] == host for node in self._db.list_compute_nodes()):
            return host
        raise InvalidRequest(f"unknown host {host!r}: no compute agent of that name has reported")

    def _changed(self, result):
        self._reload()
        return result

    # -- host aggregates ----------------------------------------------------

    @rpc.read_only
    def list_aggregates(self, context):
        return self._db.list_aggregates()

    @rpc.read_only
    def show_aggregate(self, context, name):
        try:
            return self._db.get_aggregate(_name(name, "aggregate name"))
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None

    def create_aggregate(self, context, name, availability_zone=None):
        name = _name(name, "aggregate name")
        if availability_zone is not None:
            availability_zone = _name(availability_zone, "availability zone")
        metadata = {AZ_KEY: availability_zone} if availability_zone else {}
        try:
            return self._changed(self._db.create_aggregate(name, availability_zone, metadata))
        except Conflict as exc:
            raise InvalidRequest(str(exc)) from None

    def delete_aggregate(self, context, name):
        try:
            self._db.delete_aggregate(_name(name, "aggregate name"))
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None
        self._reload()

    def aggregate_add_host(self, context, name, host):
        name = _name(name, "aggregate name")
        host = self._known_host(host)
        try:
            return self._changed(self._db.add_aggregate_host(name, host))
        except (NotFound, Conflict) as exc:
            raise InvalidRequest(str(exc)) from None

    def aggregate_remove_host(self, context, name, host):
        try:
            return self._changed(
                self._db.remove_aggregate_host(_name(name, "aggregate name"), _name(host, "host"))
            )
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None

    def aggregate_set_metadata(self, context, name, metadata):
        """Merge ``metadata`` (a None value unsets a key); key availability_zone sets the zone."""
        name = _name(name, "aggregate name")
        metadata = check_metadata(metadata)
        zone_given = AZ_KEY in metadata
        zone = metadata.get(AZ_KEY)
        if zone_given and zone is not None:
            zone = _name(zone, "availability zone")
        try:
            return self._changed(
                self._db.update_aggregate(name, metadata, availability_zone=zone, set_zone=zone_given)
            )
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None

    # -- server groups ------------------------------------------------------

    def create_server_group(self, context, name, policy, rules=None):
        name = _name(name, "server group name")
        if policy not in server_groups.POLICIES:
            raise InvalidRequest(
                f"unknown policy {str(policy)[:50]!r}: use one of {', '.join(server_groups.POLICIES)}"
            )
        rules = check_rules(policy, rules)
        values = context.to_dict() if hasattr(context, "to_dict") else dict(context or {})
        project = values.get("project_id")
        return self._db.create_server_group(str(uuidlib.uuid4()), name, policy, rules, project)

    @rpc.read_only
    def list_server_groups(self, context):
        return self._db.list_server_groups()

    @rpc.read_only
    def show_server_group(self, context, group_uuid):
        try:
            return self._db.get_server_group(parse_uuid(group_uuid, "server group"))
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None

    def delete_server_group(self, context, group_uuid):
        try:
            self._db.delete_server_group(parse_uuid(group_uuid, "server group"))
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None
