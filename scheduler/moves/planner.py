"""Deciding where an instance that exists goes: resize, cold and live migration, evacuation.

A move is placed by the same filters, weighers and claims as a build, from the
request the instance was built with: its zone, hints and server group, with the
new flavor of a resize. The instance's own host is left out, but for a resize
that still fits there once the instance's own allocation is left out
(``[scheduler] resize_in_place``, Cloud Director's rule) on a host whose driver
resizes in place (its agent reports berth_contract.traits.RESIZE_IN_PLACE).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from typing import Any

from oslo_config import cfg

from berth_contract import traits
from berth_contract.request_spec import Flavor, RequestSpec, Retry
from scheduler import states
from scheduler.exception import BerthError, InstanceNotFound, InvalidRequest, NoValidHost
from scheduler.planning import lookups
from scheduler.planning.plan import Placement
from scheduler.policy.selection import Decision

LOG = logging.getLogger(__name__)

RESIZE = "resize"
MIGRATION = "migration"
LIVE_MIGRATION = "live-migration"
EVACUATION = "evacuation"
KINDS = (RESIZE, MIGRATION, LIVE_MIGRATION, EVACUATION)

opts: list[cfg.Opt] = [
    cfg.BoolOpt(
        "resize_in_place",
        default=True,
        help="Resize an instance on its own host when that host still passes every enabled filter for "
        "the new size once the instance's own allocation is left out (Cloud Director's rule) and its "
        "driver resizes in place (not qemu's: its agent reports no CUSTOM_BERTH_RESIZE_IN_PLACE); else, "
        "and always with false, the resize moves it to another host, as Nova's "
        "allow_resize_to_same_host = false does.",
    ),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("scheduler", opts)]


class MoveRefused(BerthError):
    """A move that cannot be done as asked; the message says why. Nothing was changed."""

    invalid_input = True


@dataclasses.dataclass
class Move:
    """A request to move one instance: what it is, where to, and who asked."""

    context: Any
    instance: dict[str, Any]
    kind: str
    #: The size it has after the move: the new flavor of a resize, its own otherwise.
    flavor: Flavor
    host: str | None = None
    force: bool = False

    @property
    def live(self) -> bool:
        return self.kind == LIVE_MIGRATION

    @property
    def source(self) -> str:
        return self.instance["host"]


@dataclasses.dataclass
class MoveStart:
    """Where a move goes, consumed in this scheduler's table: what the applier records and casts."""

    move: Move
    spec: RequestSpec
    placement: Placement
    decision: Decision | None

    @property
    def in_place(self) -> bool:
        return self.placement.host == self.move.source


def flavor_of(instance: dict[str, Any]) -> Flavor:
    """The flavor an instance's row records: its figures, and the extra specs of its stored request
    (its GPUs, dedicated CPUs and traits move with it). Raises MoveRefused if they cannot be read."""
    stored = (instance.get("request_spec") or {}).get("instance_type") or {}
    try:
        return Flavor(memory_mb=instance["memory_mb"], root_gb=instance["root_gb"],
                      ephemeral_gb=instance["ephemeral_gb"], vcpus=instance["vcpus"],
                      name=instance.get("flavor_name"), extra_specs=dict(stored.get("extra_specs") or {}))
    except InvalidRequest as exc:
        raise MoveRefused(f"Instance {instance['uuid']} cannot be moved: the extra specs of its stored "
                          f"flavor cannot be read ({exc})") from None


def check_movable(instance: dict[str, Any] | None, uuid: str, verb: str) -> dict[str, Any]:
    """The row of an instance that may be moved now; raises InstanceNotFound or MoveRefused."""
    if instance is None:
        raise InstanceNotFound(f"No instance {uuid}")
    if instance["state"] == states.DELETED:
        raise MoveRefused(f"Instance {uuid} is DELETED: nothing to move")
    state = instance["state"]
    if state in states.MOVING:
        raise MoveRefused(f"Instance {uuid} cannot be {verb}: it is {state} (a move is under way from "
                          f"{instance['host']} to {instance['move_host']}); wait for it to end"
                          + (", or confirm or revert the resize" if state == states.VERIFY_RESIZE else ""))
    if state != states.ACTIVE or not instance["host"]:
        raise MoveRefused(f"Instance {uuid} cannot be {verb}: it is {state}, and only an ACTIVE instance "
                          "on a host can be")
    return instance


class MovePlanner:
    """The destination of a move, chosen as a build's host is and consumed like one."""

    def __init__(self, conf: Any, stored: lookups.Lookups, planner: Any) -> None:
        self._conf = conf
        self._stored = stored  # read only, as the planner's: the hints' instances, hosts, groups
        self._planner = planner  # scheduler.planning.planner.Planner: its selector, host table, undo log

    def spec(self, move: Move) -> RequestSpec:
        """The request the instance was built with, for one instance of the move's size: its zone,
        hints and server group as they are now. Raises MoveRefused when it cannot be read."""
        instance = move.instance
        try:
            spec = RequestSpec.from_wire(instance["request_spec"], instance["filter_properties"] or {})
        except (InvalidRequest, TypeError) as exc:
            raise MoveRefused(f"Instance {instance['uuid']} cannot be moved: its stored request cannot be "
                              f"read ({exc})") from None
        spec = dataclasses.replace(spec, instance_uuids=[instance["uuid"]], flavor=move.flavor, retry=Retry(),
                                   force_hosts=[], force_nodes=[], ignore_hosts=[])
        try:
            lookups.prepare_spec(self._stored, spec, add_members=False)
            self._planner.check_honoured(spec)
        except NoValidHost as exc:
            raise MoveRefused(f"Instance {instance['uuid']} cannot be moved: {exc}") from None
        return spec

    def choose(self, move: Move, spec: RequestSpec, decided: dict[str, Decision]) -> list[Placement]:
        """The destination of ``move`` (one Placement), for ``spec`` (as ``spec()`` made it, perhaps
        with the hosts other schedulers are claiming left out), consumed in the table; how it was
        chosen into ``decided``. Raises NoValidHost with the filters' reasons, or MoveRefused."""
        planner = self._planner
        table = planner.hosts.table
        source, uuid = move.source, move.instance["uuid"]
        if move.kind == RESIZE and move.host is None and self._conf.scheduler.resize_in_place:
            row = table.index.get(source)
            if row is not None and traits.RESIZE_IN_PLACE not in table.view(row).traits:
                LOG.info("Instance %s is resized on another host: the driver of %s does not resize in place "
                         "(its agent does not report %s)", uuid, source, traits.RESIZE_IN_PLACE)
            elif row is not None:
                with table.leaving_out(row, flavor_of(move.instance)):
                    try:
                        return planner.select(spec, decided, among=[table.view(row)])
                    except NoValidHost as exc:
                        LOG.info("Instance %s no longer fits on %s at its new size (%s); resized on another "
                                 "host", uuid, source, exc)
        if move.host is not None:
            if move.host == source:
                raise MoveRefused(f"Instance {uuid} is on {source} already: name another host")
            row = table.index.get(move.host)
            if row is None:
                near = difflib.get_close_matches(move.host, list(table.index), n=1, cutoff=0.7)
                raise MoveRefused(f"No host {move.host} has reported to this scheduler: it cannot take "
                                  f"instance {uuid}" + (f" (did you mean {near[0]}?)" if near else ""))
            target = table.view(row)
            if not planner.hosts.is_up(target):
                # Forced or not: an agent that does not report cannot take the instance in.
                down_time = self._conf.scheduler.service_down_time
                raise MoveRefused(f"Host {move.host} is down (no report for more than [scheduler] "
                                  f"service_down_time, {down_time} s): it cannot take instance {uuid}")
            if table.disabled[row]:
                why = planner.hosts.disabled.get(move.host)
                raise MoveRefused(f"Host {move.host} is disabled{f' ({why})' if why else ''}: it takes no "
                                  f"instance; enable it first (berth host enable {move.host})")
            if move.force:
                spec = dataclasses.replace(spec, force_hosts=[move.host])
            return planner.select(spec, decided, among=[target])
        away = dataclasses.replace(spec, ignore_hosts=[*spec.ignore_hosts, source])
        # Moves come many at once (a drain): on the owned hosts alone they would pile up there.
        return planner.select(away, decided, whole_fleet=True)
