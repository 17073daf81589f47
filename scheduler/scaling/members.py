"""A scaling group's members as its controller handles them: the run_instance request of a
new member (from the group's template), a member row as the policy sees it, the members a
scale-down deletes first, and the back-off of replacing ERROR members. No I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from berth_contract.request_spec import RequestSpec
from scheduler import states
from scheduler.db.engine import to_db_time
from scheduler.exception import InvalidRequest
from scheduler.policy.hints import GROUP
from scheduler.scaling.spec import CPU, DEFAULT_SAMPLE_WINDOW_S, Member

TEMPLATE_KEYS = ("flavor_name", "memory_mb", "root_gb", "ephemeral_gb", "vcpus", "scheduler_hints",
                 "availability_zone", "server_group_uuid", "image")
_SIZES = ("memory_mb", "root_gb", "ephemeral_gb", "vcpus")

#: The members a group counts: all but those being deleted (ERROR ones until replaced; SHUTOFF ones,
#: and those whose power changes, counted not ready: never replaced, their samples set aside).
COUNTED_STATES = (states.SCHEDULING, states.SCHEDULED, states.BUILDING, *states.RUNNING, states.ERROR,
                  *states.POWER)
#: The order a scale-down deletes members in (Kubernetes' getPodsToDelete): not placed yet,
#: failed, not ready, then ready ones.
_DELETE_RANK = {states.SCHEDULING: 0, states.ERROR: 1, states.SCHEDULED: 2, states.BUILDING: 2,
                **dict.fromkeys(states.POWER, 2), **dict.fromkeys(states.RUNNING, 3)}


class TemplateError(ValueError):
    """A group's template that no run_instance request can be made of."""


#: The fields of a stored flavor a request carries.
FLAVOR_FIELDS = ("name", *_SIZES, "extra_specs")


def _flavor(template: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    name = template.get("flavor_name")
    if any(key in template for key in _SIZES):
        flavor: dict[str, Any] = {key: template.get(key, 0) for key in _SIZES}
        if name is not None:
            flavor["name"] = name
        return flavor
    if name is None:
        raise TemplateError("template: give flavor_name or the sizes "
                            "(memory_mb, vcpus, root_gb, ephemeral_gb)")
    stored = flavors.get(name) if isinstance(name, str) else None
    if stored is None:
        raise TemplateError(f"template.flavor_name: no flavor named {name!r}")
    return {key: stored[key] for key in FLAVOR_FIELDS if key in stored}


def member_request(group: Mapping[str, Any], uuid: str, name: str | None,
                   flavors: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request_spec, filter_properties) of run_instance for the new member ``uuid`` named
    ``name``: the template's flavor (its sizes, or the one of ``flavors``, the stored flavors
    by name, that it names), image, zone and hints, its server group as the ``group`` hint.
    Raises TemplateError when the scheduler would refuse the request."""
    template = group["template"]
    unknown = sorted(set(template) - set(TEMPLATE_KEYS))
    if unknown:
        raise TemplateError(f"template: unknown key(s) {', '.join(unknown)} "
                            f"(known: {', '.join(TEMPLATE_KEYS)})")
    properties: dict[str, Any] = {"project_id": group.get("project_id")}
    if template.get("availability_zone"):
        properties["availability_zone"] = template["availability_zone"]
    if name is not None:
        properties["display_name"] = name
    image: dict[str, Any] = {"properties": {}}
    if template.get("image") is not None:
        image_id = template["image"]
        if not (isinstance(image_id, str) and image_id and image_id.isprintable()
                and image_id == image_id.strip()):
            raise TemplateError(f"template.image: must be an image's name (printable text without "
                                f"surrounding spaces), got {image_id!r}"[:300])
        image["id"] = image_id
    request_spec = {"instance_uuids": [uuid], "num_instances": 1,
                    "instance_type": _flavor(template, flavors or {}),
                    "instance_properties": properties, "image": image}
    hints = dict(template.get("scheduler_hints") or {})
    if template.get("server_group_uuid"):
        hints[GROUP] = template["server_group_uuid"]
    filter_properties = {"scheduler_hints": hints}
    try:
        RequestSpec.from_wire(request_spec, filter_properties)
    except InvalidRequest as exc:
        raise TemplateError(f"template: {exc}") from None
    return request_spec, filter_properties


def member_row(group: Mapping[str, Any], uuid: str, name: str,
               flavors: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The instance row of a new member, holding its request as the scheduler stores one."""
    request_spec, filter_properties = member_request(group, uuid, name, flavors)
    flavor = request_spec["instance_type"]
    return {"uuid": uuid, "display_name": name, "flavor_name": flavor.get("name"),
            "memory_mb": flavor["memory_mb"], "root_gb": flavor.get("root_gb", 0),
            "ephemeral_gb": flavor.get("ephemeral_gb", 0), "vcpus": flavor["vcpus"],
            "request_spec": request_spec, "filter_properties": filter_properties, "attempts": 0}


def new_names(group_name: str, rows: Sequence[Mapping[str, Any]], count: int) -> list[str]:
    """``count`` names ``<group>-<n>`` with the smallest numbers no listed member holds."""
    prefix = f"{group_name}-"
    used = set()
    for row in rows:
        name = row.get("display_name") or ""
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            used.add(int(name[len(prefix):]))
    names: list[str] = []
    number = 1
    while len(names) < count:
        if number not in used:
            names.append(f"{prefix}{number}")
        number += 1
    return names


#: Decimals already made, by (type, value): a fleet's flavors and samples repeat, and
#: Decimal(str(value)) per member was a third of a sync's policy time. Cleared when full.
_DECIMALS: dict[tuple[type, Any], Decimal] = {}
#: Members' requests by (vcpus, memory_mb), shared: the policy only reads them.
_REQUESTS: dict[tuple[Any, Any], Mapping[str, Decimal]] = {}
_CACHED = 65536
_new_member = object.__new__


def sample_number(value: Any) -> Decimal:
    """A sample as the policy reads it: a Decimal, made once per distinct value."""
    if isinstance(value, Decimal):
        return value
    key = (type(value), value)
    try:
        return _DECIMALS[key]
    except KeyError:
        pass
    except TypeError:  # unhashable: made each time
        return Decimal(str(value))
    number = Decimal(str(value))
    if len(_DECIMALS) >= _CACHED:
        _DECIMALS.clear()
    _DECIMALS[key] = number
    return number


def requests_of(vcpus: Any, memory_mb: Any) -> Mapping[str, Decimal]:
    """A member's requests (its flavor's vCPUs and RAM), shared by the members of one flavor."""
    key = (vcpus, memory_mb)
    try:
        return _REQUESTS[key]
    except KeyError:
        pass
    requests = {CPU: Decimal(vcpus or 0), "memory": Decimal(memory_mb or 0)}
    if len(_REQUESTS) >= _CACHED:
        _REQUESTS.clear()
    _REQUESTS[key] = requests
    return requests


def seconds_between(earlier: Any, later: datetime) -> float | None:
    """Seconds from ``earlier`` (a row's time, None: unknown) to ``later``, at least 0."""
    if earlier is None:
        return None
    return max(0.0, (later - to_db_time(earlier)).total_seconds())


def to_member(row: Mapping[str, Any], usage: Mapping[str, Any], now: datetime) -> Member:
    """A member row as the policy sees it: its flavor's vCPUs and RAM as requests, its last
    samples as usage, ready when ACTIVE (or moving, running all the while), started when it was
    launched."""
    # Member's fields set as its __init__ would, without a frozen dataclass's
    # object.__setattr__ per field: two thirds of the time of a sync's 100,000 members.
    member = _new_member(Member)
    member.__dict__.update(
        state=states.ACTIVE if row["state"] in states.RUNNING else row["state"],
        ready=row["state"] in states.RUNNING,
        requests=requests_of(row["vcpus"], row["memory_mb"]),
        usage={metric: sample_number(value) for metric, value in usage.items()},
        started_s_ago=seconds_between(row.get("launched_at"), now),
        ready_since_s_ago=None,
        sample_s_ago=0.0,
        sample_window_s=DEFAULT_SAMPLE_WINDOW_S,
        name=row.get("display_name"),
    )
    return member


def victims(rows: Sequence[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]]:
    """The ``count`` members a scale-down deletes, first first: not placed yet (SCHEDULING),
    ERROR, not ready (SCHEDULED, BUILDING), then those on the host holding the most members
    of the group, newest first. ``rows`` oldest first, as the database lists them."""
    per_host = Counter(row["host"] for row in rows if row.get("host"))

    def rank(item: tuple[int, Mapping[str, Any]]) -> tuple[int, int, int]:
        index, row = item
        return (_DELETE_RANK.get(row["state"], 0), -per_host.get(row.get("host"), 0), -index)

    return [row for _, row in sorted(enumerate(rows), key=rank)[:max(0, count)]]


def replace_delay(failures: int, base_s: float, cap_s: float) -> float:
    """Seconds before ERROR members may be replaced again after ``failures`` replacements
    in a row: ``base_s`` doubling each time, at most ``cap_s`` (a CrashLoopBackOff)."""
    return min(cap_s, base_s * 2 ** min(failures, 32))
