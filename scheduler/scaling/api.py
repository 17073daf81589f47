"""The scheduler's RPC endpoint for scaling groups: ``berth scaling group create``, ``list``,
``show``, ``set``, ``pause``, ``resume`` and ``delete``.

Registered beside the AdminEndpoint; every public method is an RPC method. A request is
checked whole before anything is written, and every refusal is an InvalidRequest whose
message names what is wrong (``spec.metrics[0].target_utilization: ...``). This endpoint
writes a group's spec, template, desired count and paused flag, and marks it deleting; the
scaling controller (scheduler.scaling.controller) does the rest at its next sync: it
creates and deletes members, and writes the group's ``status``, which ``show`` returns.

A change is written with a compare-and-set on the group's version, read, checked and
written again when a controller's sync (or another operator) wrote the group meanwhile.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from berth_contract.request_spec import RequestSpec, parse_uuid
from scheduler import api_versions, rpc
from scheduler.admin.grouping import MAX_TEXT
from scheduler.db.api import Conflict, NotFound
from scheduler.exception import InvalidRequest
from scheduler.planning import lookups
from scheduler.policy import filters, hints, weighers
from scheduler.scaling.members import TemplateError, member_request
from scheduler.scaling.service import QUEUE_PREFIX, external_metric_error
from scheduler.scaling.spec import EXTERNAL, GroupSpec, SpecError, parse_spec

LOG = logging.getLogger(__name__)

#: A group's members are named ``<group>-<n>``: room for the dash and ten digits.
MAX_NAME = MAX_TEXT - 11
#: The most members a group may have: what the database's desired column holds.
MAX_MEMBERS = 2**31 - 1
#: Compare-and-set attempts of one change before it is refused (nothing written).
UPDATE_ATTEMPTS = 5
#: What update_scaling_group changes: the spec's parts, the template, the desired count.
SPEC_CHANGES = ("min", "max", "metrics", "tolerance", "behavior")
CHANGES = SPEC_CHANGES + ("template", "desired")

ACTIVE = "active"
PAUSED = "paused"
PAUSED_AT_ZERO = "paused (desired 0)"
DELETING = "deleting"

#: (values to write or None to write nothing, the reply's message) of a group as read.
Change = Callable[[dict[str, Any]], tuple[dict[str, Any] | None, str]]


def _is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


def check_name(value: Any) -> str:
    """A scaling group's name: printable text of 1 to MAX_NAME characters, not a UUID
    (the commands take a group's name or its UUID); spaces around it are dropped."""
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_NAME:
        raise InvalidRequest(f"scaling group name must be a non-empty string of at most {MAX_NAME} "
                             "characters (its members are named <name>-<n>)")
    name = value.strip()
    if not name.isprintable():
        raise InvalidRequest(f"scaling group name {name[:60]!r}: must be printable text")
    if _is_uuid(name):
        raise InvalidRequest(f"scaling group name {name!r}: must not be a UUID (the commands take a "
                             "group's name or its UUID)")
    return name


def check_spec(value: Any, max_members: int = MAX_MEMBERS) -> GroupSpec:
    """``value`` as parse_spec reads it, its max within what a group may hold
    (``max_members``: [scaling] max_members), and each external metric one Berth can read."""
    try:
        spec = parse_spec(value)
    except SpecError as exc:
        raise InvalidRequest(str(exc)) from None
    if spec.max > max_members:
        raise InvalidRequest(f"spec.max: must be at most {max_members} ([scaling] max_members, the most "
                             f"members a group may have), got {spec.max}")
    for index, metric in enumerate(spec.metrics):
        why = external_metric_error(metric.name) if metric.type == EXTERNAL else None
        if why is not None:
            raise InvalidRequest(f"spec.metrics[{index}].name: {why}")
    if spec.min == 0 and not any(metric.type == EXTERNAL for metric in spec.metrics):
        raise InvalidRequest("spec.min: 0 needs an external metric: a group of no members has no cpu, "
                             "memory or instance metric to grow on again (Kubernetes' scale to zero has "
                             "the same rule)")
    return spec


def check_desired(value: Any, spec: GroupSpec, pausing: bool = False) -> int:
    """A desired count within ``spec``'s min..max; with ``pausing``, 0 too (a group whose
    desired count is 0 while its min is not is paused, as in Kubernetes)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequest(f"desired: must be a whole number of at least 0, got {value!r}")
    if pausing and value == 0:
        return value
    if not spec.min <= value <= spec.max:
        extra = " (or 0, to pause the group)" if pausing and spec.min > 0 else ""
        raise InvalidRequest(f"desired: must be within min..max ({spec.min}..{spec.max}){extra}, got {value}")
    return value


def _project(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise InvalidRequest(f"project_id must be a non-empty string of at most {MAX_TEXT} characters")
    return value.strip()


def _time(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _spec_min(group: Mapping[str, Any]) -> int:
    value = (group.get("spec") or {}).get("min", 1)
    return value if isinstance(value, int) else 1


def state_of(group: Mapping[str, Any]) -> str:
    """deleting, paused, paused (desired 0), or active."""
    if group.get("deleted_at") is not None:
        return DELETING
    if group.get("paused"):
        return PAUSED
    if group["desired"] == 0 and _spec_min(group) > 0:
        return PAUSED_AT_ZERO
    return ACTIVE


def view(group: Mapping[str, Any]) -> dict[str, Any]:
    """A group as the endpoint answers with it (times in ISO 8601, the database's clock)."""
    shown = {key: _time(group.get(key)) for key in (
        "uuid", "name", "project_id", "spec", "template", "desired", "paused", "status", "version",
        "created_at", "updated_at", "last_synced_at", "deleted_at", "lease_owner", "lease_expires_at")}
    shown["state"] = state_of(group)
    return shown


def _members(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"uuid": row["uuid"], "name": row.get("display_name"), "state": row["state"],
             "host": row.get("host"), "created_at": _time(row.get("created_at")),
             "fault_reason": row.get("fault_reason")} for row in rows]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class ScalingGroupEndpoint:
    """Scaling groups for operators; see the module's docstring."""

    RPC_API = api_versions.SCALING

    def __init__(self, conf: Any, database: Any, queues: Any = None) -> None:
        self._conf = conf
        self._db = database
        self._queues = queues  # BrokerQueues: whether an external metric's queue exists
        self._enabled: list[Any] | None = None  # the filters and weighers, built on first use

    # -- checks -------------------------------------------------------------------------

    def _plugins(self) -> list[Any]:
        if self._enabled is None:
            self._enabled = [*filters.enabled_filters(self._conf), *weighers.enabled_weighers(self._conf)]
        return self._enabled

    def _check_queues(self, spec: GroupSpec) -> None:
        """Refuse an external metric whose queue the broker says does not exist: its depth could
        never be read (``show`` would say ``<unknown>`` at every sync)."""
        if self._queues is None:
            return
        for index, metric in enumerate(spec.metrics):
            if metric.type == EXTERNAL and metric.name.startswith(QUEUE_PREFIX):
                queue = metric.name[len(QUEUE_PREFIX):]
                if self._queues.missing(queue):
                    raise InvalidRequest(
                        f"spec.metrics[{index}].name: external metric {metric.name!r}: the scheduler's "
                        f"broker has no queue {queue!r}; declare it first (the group scales on its depth)")

    def _check_template(self, template: Any, name: str, project_id: str | None) -> dict[str, Any]:
        """``template`` as stored: a run_instance request can be made of it, its server group
        exists, and the enabled filters and weighers honour its zone, hints and group policy
        (else every member would go to ERROR)."""
        if not isinstance(template, dict):
            raise InvalidRequest(f"template: must be an object, got {type(template).__name__}")
        template = dict(template)
        given_hints = template.get("scheduler_hints")
        if isinstance(given_hints, dict) and hints.GROUP in given_hints:
            raise InvalidRequest("template.scheduler_hints.group: give the server group as "
                                 "template.server_group_uuid (berth scaling group create --server-group)")
        if template.get("server_group_uuid") is not None:
            group = parse_uuid(template["server_group_uuid"], "template.server_group_uuid")
            try:
                self._db.get_server_group(group)
            except NotFound:
                raise InvalidRequest(f"template.server_group_uuid: no server group {group}") from None
            template["server_group_uuid"] = group
        self._check_zone(template.get("availability_zone"))
        try:
            request_spec, filter_properties = member_request(
                {"template": template, "project_id": project_id}, str(uuidlib.uuid4()), f"{name}-1",
                self._stored_flavor(template.get("flavor_name")))
        except TemplateError as exc:
            raise InvalidRequest(str(exc)) from None
        spec = RequestSpec.from_wire(request_spec, filter_properties)
        try:
            lookups.prepare_spec(self._db, spec, add_members=False)
        except lookups.InvalidHint as exc:
            raise InvalidRequest(f"template: {exc}") from None
        why = hints.unhonoured(spec, self._plugins(), filters.all_filters(), weighers.all_weighers())
        if why is not None:
            raise InvalidRequest(f"template: {why}")
        return template

    def _stored_flavor(self, name: Any) -> dict[str, Any]:
        """{name: the stored flavor} of the one a template names; {} when it names none that is stored."""
        if not isinstance(name, str) or not name:
            return {}
        try:
            return {name: self._db.get_flavor(name)}
        except NotFound:
            return {}

    def _check_zone(self, zone: Any) -> None:
        """A zone no aggregate has (nor is the default one) would put every member in ERROR:
        refused, as Nova refuses a server in a zone it does not know."""
        if not zone or not isinstance(zone, str):
            return
        known = {self._conf.filter_scheduler.default_availability_zone}
        known |= {a["availability_zone"] for a in self._db.list_aggregates() if a["availability_zone"]}
        if zone not in known:
            raise InvalidRequest(f"template.availability_zone: no availability zone {zone!r}; known: "
                                 f"{', '.join(sorted(known))} (a zone is an aggregate's, or the default one)")

    def _find(self, reference: Any) -> dict[str, Any]:
        if not isinstance(reference, str) or not reference.strip():
            raise InvalidRequest("give a scaling group's name or UUID")
        reference = reference.strip()
        try:
            if _is_uuid(reference):
                return dict(self._db.get_scaling_group(str(uuidlib.UUID(reference))))
            return dict(self._db.get_scaling_group_by_name(reference))
        except NotFound as exc:
            raise InvalidRequest(str(exc)) from None

    def _write(self, reference: Any, change: Change, verb: str) -> dict[str, Any]:
        """Apply ``change`` to the group with a compare-and-set on its version, read and
        checked again on each attempt; the group's view with the change's message."""
        group = self._find(reference)
        for _ in range(UPDATE_ATTEMPTS):
            if group["deleted_at"] is not None:
                raise InvalidRequest(f"scaling group {group['name']} is being deleted: it cannot be {verb}")
            values, message = change(group)
            if values is None:
                return dict(view(group), message=message)
            written = self._db.update_scaling_group_if(group["uuid"], group["version"], values)
            if written is not None:
                LOG.info("Scaling group %s (%s) %s: %s", group["name"], group["uuid"], verb, message)
                return dict(view(written), message=message)
            try:
                group = dict(self._db.get_scaling_group(group["uuid"]))
            except NotFound:
                raise InvalidRequest(f"scaling group {group['name']} was deleted meanwhile; "
                                     "nothing changed") from None
        raise InvalidRequest(f"scaling group {group['name']} was written by others {UPDATE_ATTEMPTS} times "
                             f"while it was being {verb}; nothing changed, try again")

    # -- the groups ---------------------------------------------------------------------

    @rpc.callers(rpc.CLIENT)
    def create_scaling_group(self, context: Any, name: Any, spec: Any, template: Any,
                             desired: Any = None, project_id: Any = None) -> dict[str, Any]:
        """A new group, its members created by the controller's next sync: ``spec`` as the
        what-if input's (min, max, metrics, tolerance, behavior), ``template`` what each
        member is booted as (flavor_name or memory_mb/vcpus/root_gb/ephemeral_gb,
        scheduler_hints, availability_zone, server_group_uuid), ``desired`` the count to
        start from (default: min), ``project_id`` the members' (default: the caller's)."""
        name = check_name(name)
        checked = check_spec(spec, self._conf.scaling.max_members)
        self._check_queues(checked)
        if project_id is None:
            values = context.to_dict() if hasattr(context, "to_dict") else dict(context or {})
            project_id = values.get("project_id")
        project_id = _project(project_id)
        template = self._check_template(template, name, project_id)
        desired = checked.min if desired is None else check_desired(desired, checked)
        try:
            created = self._db.create_scaling_group(str(uuidlib.uuid4()), name, dict(spec), template,
                                                    desired, project_id=project_id)
        except Conflict as exc:
            raise InvalidRequest(str(exc)) from None
        LOG.info("Created scaling group %s (%s): %d..%d members, %d desired", name, created["uuid"],
                 checked.min, checked.max, desired)
        found = dict(view(created), message=f"scaling group {name} created: the controller brings it to "
                     f"{_plural(desired, 'member')} at its next sync")
        clashing = self._names_taken(name)
        if clashing:
            found["warning"] = (
                f"instances outside the group already carry the names its members get ({name}-1, "
                f"{name}-2...): {', '.join(clashing[:5])}{', ...' if len(clashing) > 5 else ''}; a "
                f"command naming {clashing[0]} will be refused as ambiguous once the group has a member "
                "of that name: name the group otherwise, or use UUIDs")
        return found

    def _names_taken(self, name: str) -> list[str]:
        """Names of instances not DELETED of the form NAME-N, as the group will name its members."""
        prefix = f"{name}-"
        return [n for n in self._db.display_names_starting(prefix)
                if n[len(prefix):].isdigit() and not n[len(prefix):].startswith("0")]

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def list_scaling_groups(self, context: Any) -> list[dict[str, Any]]:
        """Every group, by name, with its members counted by state."""
        groups = self._db.list_scaling_groups()
        counts = self._db.count_scaling_group_members([g["uuid"] for g in groups]) if groups else {}
        return [dict(view(g), member_counts=counts.get(g["uuid"], {})) for g in groups]

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_scaling_group(self, context: Any, name_or_uuid: Any) -> dict[str, Any]:
        """The group, its status as its last sync wrote it (None: never synced), its members
        (not DELETED, oldest first), its template's server group, the database's time
        (``now``), for ages, and how often groups are due to be synced (``sync_period_s``)."""
        group = self._find(name_or_uuid)
        rows = self._db.list_scaling_group_members(group["uuid"])
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["state"]] = counts.get(row["state"], 0) + 1
        return dict(view(group), members=_members(rows), member_counts=dict(sorted(counts.items())),
                    server_group=self._server_group(group["template"]), now=_time(self._db.now()),
                    sync_period_s=self._conf.scaling.sync_period)

    def _server_group(self, template: Mapping[str, Any]) -> dict[str, Any] | None:
        """The template's server group: {uuid, name, policy}, or {uuid, missing: True} once deleted."""
        uuid = template.get("server_group_uuid") if isinstance(template, Mapping) else None
        if not uuid:
            return None
        try:
            found = self._db.get_server_group(uuid)
        except NotFound:
            return {"uuid": uuid, "missing": True}
        return {"uuid": uuid, "name": found["name"], "policy": found["policy"]}

    @rpc.callers(rpc.CLIENT)
    def update_scaling_group(self, context: Any, name_or_uuid: Any, changes: Any) -> dict[str, Any]:
        """Change ``changes``' keys of the group: min, max, metrics, tolerance, behavior (a
        None value: back to the default), template (the whole of it) and desired. The spec
        is checked whole, as create checks it; desired 0 while min is not pauses the group."""
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest(f"changes: give at least one of {', '.join(CHANGES)}")
        unknown = sorted(str(key) for key in changes if key not in CHANGES)
        if unknown:
            raise InvalidRequest(f"changes: unknown key(s) {', '.join(unknown)} "
                                 f"(known: {', '.join(CHANGES)})")
        return self._write(name_or_uuid, lambda group: self._updated(group, changes), "updated")

    def _updated(self, group: dict[str, Any], changes: dict[str, Any]) -> tuple[dict[str, Any], str]:
        data = dict(group["spec"])
        for key in SPEC_CHANGES:
            if key in changes:
                if changes[key] is None:
                    data.pop(key, None)
                else:
                    data[key] = changes[key]
        spec = check_spec(data, self._conf.scaling.max_members)
        if "metrics" in changes:
            self._check_queues(spec)
        values: dict[str, Any] = {}
        if any(key in changes for key in SPEC_CHANGES):
            values["spec"] = data
        if "template" in changes:
            values["template"] = self._check_template(changes["template"], group["name"], group["project_id"])
        desired = group["desired"]
        notes = []
        if "desired" in changes:
            desired = values["desired"] = check_desired(changes["desired"], spec, pausing=True)
        if group["paused"]:
            notes.append("the group is paused: nothing changes until it is resumed")
        elif desired == 0 and spec.min > 0:
            notes.append(f"desired 0 with min {spec.min} pauses the group: the controller leaves its "
                         f"members as they are until desired is set within {spec.min}..{spec.max} again "
                         "(or the group is resumed)")
        elif not spec.min <= desired <= spec.max:
            bound = spec.min if desired < spec.min else spec.max
            notes.append(f"desired {desired} is outside {spec.min}..{spec.max}: the controller sets it to "
                         f"{bound} at its next sync")
        elif "desired" in changes:
            notes.append(f"the controller brings the group to {_plural(desired, 'member')} at its next sync; "
                         "its metrics and behavior may change the count again from there")
        changed = ", ".join(f"{key} {'unset' if changes[key] is None else 'set'}"
                            if key in ("metrics", "behavior", "template")
                            else f"{key} {'default' if changes[key] is None else changes[key]}"
                            for key in CHANGES if key in changes)
        message = f"scaling group {group['name']} updated: {changed}"
        return values, "; ".join([message, *notes])

    @rpc.callers(rpc.CLIENT)
    def pause_scaling_group(self, context: Any, name_or_uuid: Any) -> dict[str, Any]:
        """Pause the group: the controller leaves its members as they are (neither scales nor
        replaces ERROR ones) and writes its status only, until it is resumed."""
        def change(group: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
            if group["paused"]:
                return None, f"scaling group {group['name']} is paused already"
            return {"paused": True}, (f"scaling group {group['name']} paused: the controller leaves its "
                                      "members as they are until it is resumed")
        return self._write(name_or_uuid, change, "paused")

    @rpc.callers(rpc.CLIENT)
    def resume_scaling_group(self, context: Any, name_or_uuid: Any) -> dict[str, Any]:
        """Resume a paused group; a group paused by desired 0 gets its min as desired."""
        def change(group: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
            values: dict[str, Any] = {}
            if group["paused"]:
                values["paused"] = False
            low = _spec_min(group)
            if group["desired"] == 0 and low > 0:
                values["desired"] = low
            if not values:
                return None, f"scaling group {group['name']} is not paused"
            message = f"scaling group {group['name']} resumed: the controller syncs it again"
            if "desired" in values:
                message += f", from desired {low} (its min; it was 0)"
            return values, message
        return self._write(name_or_uuid, change, "resumed")

    @rpc.callers(rpc.CLIENT)
    def delete_scaling_group(self, context: Any, name_or_uuid: Any) -> dict[str, Any]:
        """Delete the group: at once if it has no member left, else mark it deleting; the
        controller then deletes its members, and then the group."""
        group = self._find(name_or_uuid)
        name = group["name"]
        if group["deleted_at"] is not None:
            return {"uuid": group["uuid"], "name": name, "deleted": False,
                    "message": f"scaling group {name} is being deleted already"}
        members = len(self._db.list_scaling_group_members(group["uuid"]))
        try:
            gone = self._db.delete_scaling_group(group["uuid"])
        except NotFound:
            raise InvalidRequest(f"scaling group {name} was deleted meanwhile") from None
        if gone:
            message = f"scaling group {name} deleted"
            LOG.info("Deleted scaling group %s (%s)", name, group["uuid"])
        else:
            message = (f"scaling group {name} is being deleted: the controller deletes its "
                       f"{_plural(members, 'member')}, then the group (its name stays taken until then)")
            LOG.info("Scaling group %s (%s) marked deleting: %d member(s) to delete", name, group["uuid"],
                     members)
        return {"uuid": group["uuid"], "name": name, "deleted": gone, "message": message}
