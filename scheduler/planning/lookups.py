"""What the scheduler looks up for a request before selection.

Filters and weighers read only the RequestSpec and the HostTable; the hints
that name things stored elsewhere are resolved here, once per request:

- ``availability_zone`` hint: copied to ``spec.availability_zone`` when the
  request's instance_properties do not name a zone;
- ``group`` hint (a server group uuid): the group's policy and rules, and the
  hosts of its members already placed; the request's instances become members;
- ``same_host`` / ``different_host`` hints (instance uuids): their hosts.
"""

import collections

from berth_contract.request_spec import MAX_LIST
from scheduler.db.api import NotFound
from scheduler.exception import NoValidHost


class InvalidHint(NoValidHost):
    """A scheduler hint names something that does not exist: the instances go to ERROR."""


def _uuids(value, hint):
    from berth_contract.request_spec import parse_uuid
    from scheduler.exception import InvalidRequest

    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or len(values) > MAX_LIST:
        raise InvalidHint(f"Invalid scheduler hint {hint}: must be an instance UUID or a list of them")
    try:
        return [parse_uuid(v, f"scheduler hint {hint}") for v in values]
    except InvalidRequest as exc:
        raise InvalidHint(f"Invalid {exc}") from None


def reads_placements(spec):
    """Whether prepare_spec reads where instances are placed for ``spec``."""
    hints = spec.scheduler_hints
    return bool(hints.get("group") or hints.get("same_host") or hints.get("different_host"))


def prepare_spec(database, spec, add_members=True):
    """Fill ``spec`` with what the filters need from the database; raise InvalidHint.
    With ``add_members`` the request's instances join the server group of a
    ``group`` hint; without it nothing is written."""
    hints = spec.scheduler_hints
    zone = hints.get("availability_zone")
    if not spec.availability_zone and isinstance(zone, str) and zone:
        spec.availability_zone = zone
    if hints.get("group"):
        spec.group = resolve_group(database, hints["group"], spec.instance_uuids, add_members)
    for hint, field in (("same_host", "same_host_hosts"), ("different_host", "different_host_hosts")):
        if hints.get(hint):
            uuids = _uuids(hints[hint], hint)
            known = database.get_instances(uuids)
            missing = [u for u in uuids if u not in known]
            if missing:
                raise InvalidHint(f"Instance {missing[0]} does not exist (scheduler hint {hint})")
            holding = database.hosts_of_instances(uuids)  # a moving instance is on two hosts
            setattr(spec, field, sorted({host for hosts in holding.values() for host in hosts}))
    return spec


def add_members(database, spec):
    """Make the request's instances members of the server group of its ``group`` hint."""
    if spec.group is not None:
        database.add_server_group_members(spec.group["uuid"], spec.instance_uuids)


def resolve_group(database, reference, instance_uuids, add_members=True):
    """The group of a ``group`` hint, the request's instances added to its members
    (with ``add_members``)."""
    if isinstance(reference, list) and len(reference) == 1:
        reference = reference[0]
    if not isinstance(reference, str):
        raise InvalidHint("Invalid scheduler hint group: must be a server group UUID")
    [uuid] = _uuids(reference, "group")
    try:
        group = database.get_server_group(uuid)
    except NotFound:
        raise InvalidHint(f"Server group {uuid} does not exist (scheduler hint group)") from None
    if add_members:
        database.add_server_group_members(uuid, instance_uuids)
    others = [m for m in group["members"] if m not in set(instance_uuids)]
    placed = database.hosts_of_instances(others)
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
