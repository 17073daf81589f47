"""What the scheduler looks up for a request before selection.

Filters and weighers read only the RequestSpec and the HostTable; the hints
that name things stored elsewhere are resolved here, once per request:

- ``availability_zone`` hint: copied to ``spec.availability_zone`` when the
  request's instance_properties do not name a zone;
- ``group`` hint (a server group uuid): the group's policy and rules, and the
  hosts of its members already placed; the request's instances become members;
- ``same_host`` / ``different_host`` hints (instance uuids): their hosts.

The decision core (the Planner, the MovePlanner, the fragmentation hint of a
refusal) reads through the narrow lookups below, never a database: the
service hands it DatabaseLookups, the tests lookups held in memory.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any, Protocol, cast

from berth_contract.request_spec import MAX_LIST, RequestSpec
from scheduler.db.api import Database, NotFound
from scheduler.exception import NoValidHost


class InstancesByUuid(Protocol):
    """The instances' rows, by uuid: a same_host or different_host hint's must exist."""

    def get_instances(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{uuid: row} of those of ``uuids`` that exist."""
        ...


class HostsOfInstances(Protocol):
    """Where instances are: a server group's members, a same_host or different_host hint's."""

    def hosts_of_instances(self, uuids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """{uuid: the hosts that hold it} of those of ``uuids`` on a host and neither DELETED nor
        in ERROR: its host, and while it moves its move_host too."""
        ...


class ServerGroups(Protocol):
    """A group hint's server group."""

    def get_server_group(self, uuid: str) -> dict[str, Any]:
        """The group of ``uuid`` (uuid, name, policy, rules, members); raises NotFound."""
        ...


class Lookups(InstancesByUuid, HostsOfInstances, ServerGroups, Protocol):
    """What prepare_spec reads: what a Planner and a MovePlanner are handed."""


class SettledInstances(Protocol):
    """The instances a migration may take off hosts: what a fragmentation hint reads."""

    def settled_instances_on_hosts(self, hosts: Iterable[str]) -> list[dict[str, Any]]:
        """The rows of the instances ACTIVE on one of ``hosts`` and not moving."""
        ...


class GroupMembers(Protocol):
    """Writes a server group's new members: the applier's, not the planner's."""

    def add_server_group_members(self, uuid: str, instance_uuids: Iterable[str]) -> None: ...


class DatabaseLookups:
    """The lookups read from the database (scheduler.db.api.Database): each call is the
    database's own method, its statements and transaction (the unit of work's) as they were.
    The decision core is handed this, never the database itself: it cannot write."""

    __slots__ = ("_db",)

    def __init__(self, database: Database) -> None:
        self._db = database

    def get_instances(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        return self._db.get_instances(uuids)

    def hosts_of_instances(self, uuids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return self._db.hosts_of_instances(uuids)

    def get_server_group(self, uuid: str) -> dict[str, Any]:
        return self._db.get_server_group(uuid)

    def settled_instances_on_hosts(self, hosts: Iterable[str]) -> list[dict[str, Any]]:
        return self._db.settled_instances_on_hosts(hosts)


class InvalidHint(NoValidHost):
    """A scheduler hint names something that does not exist: the instances go to ERROR."""


def _uuids(value: Any, hint: str) -> list[str]:
    from berth_contract.request_spec import parse_uuid
    from scheduler.exception import InvalidRequest

    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or len(values) > MAX_LIST:
        raise InvalidHint(f"Invalid scheduler hint {hint}: must be an instance UUID or a list of them")
    try:
        return [parse_uuid(v, f"scheduler hint {hint}") for v in values]
    except InvalidRequest as exc:
        raise InvalidHint(f"Invalid {exc}") from None


def reads_placements(spec: RequestSpec) -> bool:
    """Whether prepare_spec reads where instances are placed for ``spec``."""
    hints = spec.scheduler_hints
    return bool(hints.get("group") or hints.get("same_host") or hints.get("different_host"))


def prepare_spec(found: Lookups, spec: RequestSpec, add_members: bool = True) -> RequestSpec:
    """Fill ``spec`` with what the filters need, read through ``found``; raise InvalidHint.
    With ``add_members`` the request's instances join the server group of a
    ``group`` hint (``found`` must be GroupMembers too: a Database); without it
    nothing is written."""
    hints = spec.scheduler_hints
    zone = hints.get("availability_zone")
    if not spec.availability_zone and isinstance(zone, str) and zone:
        spec.availability_zone = zone
    if hints.get("group"):
        spec.group = resolve_group(found, hints["group"], spec.instance_uuids, add_members)
    for hint, field in (("same_host", "same_host_hosts"), ("different_host", "different_host_hosts")):
        if hints.get(hint):
            uuids = _uuids(hints[hint], hint)
            known = found.get_instances(uuids)
            missing = [u for u in uuids if u not in known]
            if missing:
                raise InvalidHint(f"Instance {missing[0]} does not exist (scheduler hint {hint})")
            holding = found.hosts_of_instances(uuids)  # a moving instance is on two hosts
            setattr(spec, field, sorted({host for hosts in holding.values() for host in hosts}))
    return spec


def add_members(database: GroupMembers, spec: RequestSpec) -> None:
    """Make the request's instances members of the server group of its ``group`` hint."""
    if spec.group is not None:
        database.add_server_group_members(spec.group["uuid"], spec.instance_uuids)


def resolve_group(found: Lookups, reference: Any, instance_uuids: list[str],
                  add_members: bool = True) -> dict[str, Any]:
    """The group of a ``group`` hint, read through ``found``, the request's instances added to its
    members (with ``add_members``: ``found`` must be GroupMembers too)."""
    if isinstance(reference, list) and len(reference) == 1:
        reference = reference[0]
    if not isinstance(reference, str):
        raise InvalidHint("Invalid scheduler hint group: must be a server group UUID")
    [uuid] = _uuids(reference, "group")
    try:
        group = found.get_server_group(uuid)
    except NotFound:
        raise InvalidHint(f"Server group {uuid} does not exist (scheduler hint group)") from None
    if add_members:
        cast(GroupMembers, found).add_server_group_members(uuid, instance_uuids)
    others = [m for m in group["members"] if m not in set(instance_uuids)]
    placed = found.hosts_of_instances(others)
    # A member moving is on two hosts until its move ends: both count for the group's rules.
    counted = collections.Counter(host for hosts in placed.values() for host in hosts)
    return {
        "uuid": group["uuid"],
        "name": group["name"],
        "policy": group["policy"],
        "rules": group["rules"],
        "members": others,
        "placed": sorted(placed),
        "hosts": dict(counted),
    }
