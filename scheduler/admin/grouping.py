"""The scheduler's RPC endpoint for operators: host aggregates and server groups.

Registered beside the SchedulerManager; every public method is an RPC
method (the ``berth aggregate ...`` and ``berth server group ...`` commands).
Arguments are checked before anything changes, and every refusal is an
InvalidRequest whose message says what is wrong. The scheduler that handles
a change reloads its aggregates at once and, once the change has committed,
tells the others (a fanout cast of ``aggregates_changed``, sent before the
caller's reply), so that a request sent after the reply finds the change on
every scheduler. Their periodic task reloads too, should a cast be lost.
"""

import contextlib
import logging
import re
import uuid as uuidlib

from berth_contract import traits
from berth_contract.json_checks import is_integer, json_object
from berth_contract.request_spec import parse_uuid
from scheduler import api_versions, rpc
from scheduler.db.api import Conflict, NotFound
from scheduler.exception import InvalidRequest
from scheduler.policy import filters, server_groups, weighers
from scheduler.policy.aggregates import AZ_KEY, Aggregate, as_number

LOG = logging.getLogger(__name__)
MAX_TEXT = 255
#: The filter that reads an aggregate's trait:NAME=required metadata.
ISOLATING = "IsolatedAggregateFilter"
MAX_METADATA = 100
MAX_SERVER_PER_HOST = 1000
_KEY = re.compile(r"^[A-Za-z0-9_.:\-]+$")


@contextlib.contextmanager
def _refused(*errors):
    """The database's ``errors`` (NotFound, Conflict) refuse the request, in the database's words."""
    try:
        yield
    except errors as exc:
        raise InvalidRequest(str(exc)) from None


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
    _check_numbers(checked)
    _check_traits(checked)
    return checked


def _check_traits(metadata):
    """``trait:NAME=required`` only: what IsolatedAggregateFilter reads (Nova's isolated aggregates)."""
    for key, value in metadata.items():
        if value is None or not key.startswith(traits.TRAIT):
            continue
        where = f"metadata {key}"
        traits.check_name(key[len(traits.TRAIT):], where)
        if value != traits.REQUIRED:
            raise InvalidRequest(f"{where}={value[:50]!r}: an aggregate can only require a trait "
                                 f"(IsolatedAggregateFilter); give {key}={traits.REQUIRED}")


def numeric_metadata():
    """{key: (the value it must exceed or None, [plugins reading it])} over every installed plugin."""
    found = {}
    for name, cls in sorted({**filters.all_filters(), **weighers.all_weighers()}.items()):
        for key, low in cls.aggregate_numbers.items():
            found.setdefault(key, (low, []))[1].append(name)
    return found


def _check_numbers(metadata):
    """Refuse a value a plugin would read as a number and could not (it would fall back, unsaid)."""
    numeric = numeric_metadata()
    for key, value in metadata.items():
        if value is None or key not in numeric:
            continue
        low, readers = numeric[key]
        number = as_number(value)
        if number is None or (low is not None and number <= low):
            bound = "a number" if low is None else f"a number greater than {low:g}"
            raise InvalidRequest(f"metadata {key}={value[:50]!r}: {', '.join(readers)} reads it as a "
                                 f"number; give {bound}, e.g. {key}=1.5")


def check_rules(policy, rules):
    rules = json_object(rules or {}, "rules")
    allowed = server_groups.RULES.get(policy, ())
    for key in rules:
        if key not in allowed:
            raise InvalidRequest(
                f"rule {str(key)[:50]!r} does not apply to policy {policy}"
                + (f" (it takes {', '.join(allowed)})" if allowed else " (it takes no rules)")
            )
    value = rules.get("max_server_per_host")
    if value is not None and (not is_integer(value) or not 1 <= value <= MAX_SERVER_PER_HOST):
        raise InvalidRequest(f"max_server_per_host must be a whole number from 1 to {MAX_SERVER_PER_HOST}")
    return dict(rules)


def reload_aggregates(database, hosts):
    """Load every aggregate from the database into the host table of ``hosts`` (a HostManager),
    unless another reload took newer ones meanwhile (see HostManager.set_disabled)."""
    read_at = hosts.aggregate_changes
    found = database.list_aggregates()
    with hosts.lock:
        if hosts.aggregate_changes == read_at:
            hosts.aggregate_changes += 1
            hosts.table.set_aggregates(found)
    return found


def known_host(database, hosts, host):
    """``host``, checked as a name and known to the scheduler or the database; else InvalidRequest."""
    host = _name(host, "host")
    with hosts.lock:
        if host in hosts.table.index:
            return host
    if any(node["host"] == host for node in database.list_compute_nodes()):
        return host
    raise InvalidRequest(f"unknown host {host!r}: no compute agent of that name has reported")


class AdminEndpoint:
    RPC_API = api_versions.ADMIN

    def __init__(self, conf, database, host_manager, announce=None):
        self._conf = conf
        self._db = database
        self._hosts = host_manager
        self._announce = announce  # announce(): tell the other schedulers, after the commit

    def _reload(self):
        return reload_aggregates(self._db, self._hosts)

    def _known_host(self, host):
        return known_host(self._db, self._hosts, host)

    def _changed(self, result=None):
        self._reload()
        if self._announce is not None:
            self._announce()
        return result

    @rpc.read_only
    @rpc.callers(rpc.SCHEDULER)
    def aggregates_changed(self, context, by):
        """Another scheduler changed the aggregates: reload them now."""
        if by == self._conf.host:
            return  # reloaded when it made the change
        found = self._reload()
        LOG.info("Aggregates changed through scheduler %s: reloaded %d aggregate(s)",
                 str(by)[:200], len(found))

    # -- host aggregates ----------------------------------------------------

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_aggregates(self, context):
        return self._db.list_aggregates()

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_aggregate(self, context, name):
        with _refused(NotFound):
            return self._db.get_aggregate(_name(name, "aggregate name"))

    @rpc.callers(rpc.OPERATOR)
    def create_aggregate(self, context, name, availability_zone=None):
        name = _name(name, "aggregate name")
        if availability_zone is not None:
            availability_zone = _name(availability_zone, "availability zone")
        metadata = {AZ_KEY: availability_zone} if availability_zone else {}
        with _refused(Conflict):
            created = self._db.create_aggregate(name, availability_zone, metadata)
            LOG.info("Created aggregate %s (availability zone %s)", name, availability_zone or "none")
            return self._changed(created)

    @rpc.callers(rpc.OPERATOR)
    def delete_aggregate(self, context, name):
        """Delete an aggregate that holds no host (as Nova does: remove its hosts first)."""
        with _refused(NotFound, Conflict):
            self._db.delete_aggregate(_name(name, "aggregate name"))
        LOG.info("Deleted aggregate %s", name.strip())
        self._changed()

    @rpc.callers(rpc.OPERATOR)
    def aggregate_add_host(self, context, name, host):
        name = _name(name, "aggregate name")
        host = self._known_host(host)
        self._check_host_keeps_its_zone(name, host, adding=True)
        with _refused(NotFound, Conflict):
            changed = self._db.add_aggregate_host(name, host)
            LOG.info("Added host %s to aggregate %s", host, name)
            return self._changed(changed)

    @rpc.callers(rpc.OPERATOR)
    def aggregate_remove_host(self, context, name, host):
        name, host = _name(name, "aggregate name"), _name(host, "host")
        self._check_host_keeps_its_zone(name, host, adding=False)
        with _refused(NotFound):
            changed = self._db.remove_aggregate_host(name, host)
            LOG.info("Removed host %s from aggregate %s", host, name)
            return self._changed(changed)

    @rpc.callers(rpc.OPERATOR)
    def aggregate_set_metadata(self, context, name, metadata):
        """Merge ``metadata`` (a None value unsets a key); key availability_zone sets the zone."""
        name = _name(name, "aggregate name")
        metadata = check_metadata(metadata)
        self._check_read(metadata)
        zone_given = AZ_KEY in metadata
        zone = metadata.get(AZ_KEY)
        if zone_given and zone is not None:
            zone = _name(zone, "availability zone")
        if zone_given:
            self._check_zone_change(name, zone)
        with _refused(NotFound):
            changed = self._db.update_aggregate(name, metadata, availability_zone=zone, set_zone=zone_given)
            LOG.info("Set the metadata of aggregate %s: %s", name, ", ".join(
                f"{k} unset" if v is None else f"{k}={v}" for k, v in sorted(metadata.items())))
            return self._changed(changed)

    def _check_read(self, metadata):
        """Refuse a trait requirement no enabled filter would honour: set, it would change nothing."""
        asked = sorted(k for k, v in metadata.items() if v is not None and k.startswith(traits.TRAIT))
        if asked and ISOLATING not in {f.name for f in filters.enabled_filters(self._conf)}:
            raise InvalidRequest(f"metadata {asked[0]}: is read by {ISOLATING}, which is not enabled: add "
                                 "it to [filter_scheduler] enabled_filters, or leave the key out")

    def _zones(self, host, aggregates):
        zones = {z for a in aggregates if host in a["hosts"] for z in Aggregate.from_dict(a).zones}
        return zones or {self._conf.filter_scheduler.default_availability_zone}

    def _check_host_keeps_its_zone(self, name, host, adding):
        """Refuse to move a host that holds instances to other zones by joining or leaving
        ``name``: its instances were placed in the zones they asked for."""
        aggregates = self._db.list_aggregates()
        if not any(a["name"] == name for a in aggregates):
            return  # the database says so, in its own words
        changed = [dict(a, hosts=(sorted(set(a["hosts"]) | {host}) if adding
                                  else [h for h in a["hosts"] if h != host]))
                   if a["name"] == name else a for a in aggregates]
        before, after = self._zones(host, aggregates), self._zones(host, changed)
        if before == after:
            return
        held = self._db.count_instances_on_hosts([host]).get(host, 0)
        if held:
            raise InvalidRequest(
                f"cannot {'add' if adding else 'remove'} host {host!r} {'to' if adding else 'from'} "
                f"aggregate {name!r}: it holds {held} instance(s) placed in availability zone "
                f"{','.join(sorted(before))}, which would then be in {','.join(sorted(after))}")

    def _check_zone_change(self, name, zone):
        """Refuse to move hosts that hold instances to another zone (Nova refuses it too):
        those instances were placed in the zone they asked for."""
        with _refused(NotFound):
            aggregate = self._db.get_aggregate(name)
        if aggregate["availability_zone"] == zone or not aggregate["hosts"]:
            return
        holding = self._db.count_instances_on_hosts(aggregate["hosts"])
        if holding:
            listed = ", ".join(f"{host} ({count})" for host, count in sorted(holding.items())[:10])
            raise InvalidRequest(
                f"cannot change the availability zone of aggregate {name!r} from "
                f"{aggregate['availability_zone'] or 'none'} to {zone or 'none'}: its hosts hold "
                f"{sum(holding.values())} instance(s) placed in the old zone: {listed}"
            )

    # -- server groups ------------------------------------------------------

    @rpc.callers(rpc.CLIENT)
    def create_server_group(self, context, name, policy, rules=None):
        name = _name(name, "server group name")
        if policy not in server_groups.POLICIES:
            raise InvalidRequest(
                f"unknown policy {str(policy)[:50]!r}: use one of {', '.join(server_groups.POLICIES)}"
            )
        rules = check_rules(policy, rules)
        values = context.to_dict() if hasattr(context, "to_dict") else dict(context or {})
        project = values.get("project_id")
        created = self._db.create_server_group(str(uuidlib.uuid4()), name, policy, rules, project)
        LOG.info("Created server group %s (%s, policy %s%s)", created["uuid"], name, policy,
                 f", rules {rules}" if rules else "")
        return created

    # Members are the instances not DELETED: one in ERROR stays a member until deleted, as in Nova.

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_server_groups(self, context, name=None):
        """Every server group, or with ``name`` those of that name (names need not be unique)."""
        if name is not None:
            name = _name(name, "server group name")
        return self._db.list_server_groups(name=name, live_members=True)

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_server_group(self, context, group_uuid):
        with _refused(NotFound):
            return self._db.get_server_group(parse_uuid(group_uuid, "server group"), live_members=True)

    @rpc.callers(rpc.CLIENT)
    def delete_server_group(self, context, group_uuid):
        with _refused(NotFound):
            self._db.delete_server_group(parse_uuid(group_uuid, "server group"))
        LOG.info("Deleted server group %s", group_uuid)
