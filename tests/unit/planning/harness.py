"""The decision core run in memory, as Nomad's scheduler tests run theirs (scheduler/tests/
testing.go: a state store of their own and a planner that records the plans submitted).

A Harness holds what the decision core reads (a Store: the lookups of scheduler.planning.lookups,
held in dicts), a HostManager fed with hosts' reports, and the filters and weighers its conf
enables. It runs whole placements through the service's own Scheduling (segments, admission,
checks, selection, the Plan) and moves through the MovePlanner, with itself in the applier's
place: it records each Plan (and each MoveStart) and writes it into the Store, as the Applier
writes the database, so that the next request reads what the ones before it decided. No broker,
no database, no claim: what a test asserts on is what the planner decided.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid as uuidlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from scheduler import rpc, states
from scheduler.db.api import NotFound
from scheduler.exception import NoValidHost
from scheduler.fleet.host_manager import HostManager
from scheduler.moves.planner import Move, MovePlanner, MoveStart, check_movable, flavor_of
from scheduler.planning.fragmentation import FragmentationHints
from scheduler.planning.plan import Build, Job, Placement, Plan
from scheduler.planning.planner import Planner
from scheduler.planning.scheduling import Scheduling
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Decision, Selector
from scheduler.transaction.undo import UndoLog

#: The columns an instance's row has before anything writes them (scheduler.db.models).
ROW_DEFAULTS = {"host": None, "node": None, "move_host": None, "attempts": 0, "fault_reason": None,
                "request_spec": None, "filter_properties": None}


class Store:
    """What the decision core reads (lookups.Lookups, lookups.SettledInstances) and what
    Scheduling reads (the admitted instances' rows, the time), in memory."""

    def __init__(self) -> None:
        self.instances: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.time = datetime.datetime(2025, 1, 1)

    # -- what the decision core reads ---------------------------------------------

    def get_instances(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        return {u: dict(self.instances[u]) for u in uuids if u in self.instances}

    def hosts_of_instances(self, uuids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        found = {}
        for uuid in uuids:
            row = self.instances.get(uuid)
            if row is None or row["host"] is None or row["state"] in (states.DELETED, states.ERROR):
                continue
            other = row["move_host"]
            found[uuid] = (row["host"],) if other in (None, row["host"]) else (row["host"], other)
        return found

    def get_server_group(self, uuid: str) -> dict[str, Any]:
        if uuid not in self.groups:
            raise NotFound(f"no server group {uuid}")
        group = self.groups[uuid]
        return dict(group, members=list(group["members"]))

    def settled_instances_on_hosts(self, hosts: Iterable[str]) -> list[dict[str, Any]]:
        hosts = set(hosts)
        return [dict(row) for row in self.instances.values()
                if row["host"] in hosts and row["state"] == states.ACTIVE and row["move_host"] is None]

    def now(self) -> datetime.datetime:
        return self.time

    # -- what the tests set up, and the plans write -----------------------------------

    def add_group(self, policy: str, rules: dict[str, Any] | None = None, name: str = "group") -> str:
        uuid = str(uuidlib.uuid4())
        self.groups[uuid] = {"uuid": uuid, "name": name, "policy": policy, "rules": rules or {},
                             "members": []}
        return uuid

    def write(self, plan: Plan) -> None:
        """Write ``plan`` as Applier.commit writes the database (the casts left out): each update
        only if its row still holds what was expected."""
        for uuid in plan.deleted:
            self.instances[uuid].update(state=states.DELETED, deleted_at=self.time)
        for spec in plan.group_members:
            if spec.group is not None:
                members = self.groups[spec.group["uuid"]]["members"]
                members.extend(u for u in spec.instance_uuids if u not in members)
        for row in plan.creates:
            self.instances.setdefault(row["uuid"], dict(ROW_DEFAULTS, **row))
        for update in plan.updates:
            row = self.instances[update.instance_uuid]
            if all(row[k] in v if isinstance(v, tuple) else row[k] == v for k, v in update.expected.items()):
                row.update(update.values)


class Harness:
    """The planner and the move planner of a conf, on reported hosts and a Store: each run
    returns the Plans they made, each move its MoveStart."""

    def __init__(self, conf: Any, seed: int = 0) -> None:
        self.conf = conf
        self.store = Store()
        self.hosts = HostManager(conf)
        scheduler = conf.filter_scheduler
        self.selector = Selector(filters.enabled_filters(conf), weighers.enabled_weighers(conf),
                                 scheduler.host_subset_size, random.Random(seed),
                                 shuffle_best_same_weighed_hosts=scheduler.shuffle_best_same_weighed_hosts)
        # Outside a unit of work an UndoLog keeps nothing: no transaction here rolls back.
        self.planner = Planner(conf, self.store, self.hosts, self.selector, UndoLog().add,
                               filters.all_filters(), weighers.all_weighers())
        self.move_planner = MovePlanner(conf, self.store, self.planner)
        self.planner.fragmentation = FragmentationHints(conf, self.store, self.hosts, self.selector.filters,
                                                        self.move_planner.spec)
        self.scheduling = Scheduling(self.store, self.planner, self)  # self: the applier
        #: Every Plan committed, and every move started, in order.
        self.plans: list[Plan] = []
        self.moves: list[MoveStart] = []
        self._reports: dict[str, dict[str, Any]] = {}  # the last report of each host

    # -- the fleet -----------------------------------------------------------------

    def report(self, host: str, ram: int = 8192, disk: int = 100, vcpus: int = 8, used_ram: int = 0,
               instances: Sequence[str] = (), **fields: Any) -> None:
        """Take a report from ``host``'s agent, checked as the scheduler checks one."""
        wire = {"host": host, "memory_mb": ram, "free_ram_mb": ram - used_ram, "local_gb": disk,
                "free_disk_gb": disk, "vcpus": vcpus, "vcpus_used": 0, "instance_uuids": list(instances),
                "running_vms": len(instances), **fields}
        self._reports[host] = wire
        assert self.hosts.update_from_report(HostReport.from_wire(wire, host))

    def free_ram(self, host: str) -> int:
        return int(self.hosts.get(host).free_ram_mb)

    # -- the applier's place: claims that never conflict, plans recorded -------------

    def place(self, specs: Sequence[RequestSpec], select: Callable[[RequestSpec], list[Placement]]
              ) -> list[list[Placement] | NoValidHost]:
        outcomes: list[list[Placement] | NoValidHost] = []
        with self.hosts.lock:
            for spec in specs:
                try:
                    outcomes.append(select(spec))
                except NoValidHost as exc:
                    outcomes.append(exc)
        return outcomes

    def commit(self, plan: Plan) -> None:
        self.plans.append(plan)
        self.store.write(plan)

    # -- what is decided -----------------------------------------------------------------

    def run(self, *requests: tuple[dict[str, Any], dict[str, Any]]) -> list[Plan]:
        """Schedule ``requests`` ((request_spec, filter_properties) as run_instance gets them) as
        one batch; the Plans of its segments."""
        before = len(self.plans)
        jobs = [Job(rpc.Context({}), RequestSpec.from_wire(spec, props)) for spec, props in requests]
        self.scheduling.schedule(jobs)
        return self.plans[before:]

    def activate(self, *uuids: str) -> None:
        """Instances built: ACTIVE on their hosts, as their agents say, and listed (and counted) by
        their hosts' next reports: the table no longer holds them as placements of its own, and
        the planner learns where they are from the Store."""
        for uuid in uuids:
            row = self.store.instances[uuid]
            row["state"] = states.ACTIVE
            wire = self._reports[row["host"]]
            wire.update(free_ram_mb=wire["free_ram_mb"] - row["memory_mb"],
                        free_disk_gb=wire["free_disk_gb"] - row["root_gb"] - row["ephemeral_gb"],
                        vcpus_used=wire["vcpus_used"] + row["vcpus"],
                        instance_uuids=[*wire["instance_uuids"], uuid], running_vms=wire["running_vms"] + 1)
            assert self.hosts.update_from_report(HostReport.from_wire(wire, row["host"]))

    def move(self, uuid: str, kind: str, flavor: Flavor | None = None, host: str | None = None,
             force: bool = False) -> MoveStart:
        """Decide the move of instance ``uuid`` as the move endpoint does (scheduler.moves.api); its
        MoveStart, recorded and written (the instance MIGRATING, held by both hosts). Raises
        MoveRefused, or the NoValidHost whose reasons the endpoint refuses it with."""
        instance = check_movable(self.store.get_instances([uuid]).get(uuid), uuid, "moved")
        move = Move(rpc.Context({}), instance, kind, flavor or flavor_of(instance), host, force)
        spec = self.move_planner.spec(move)
        decided: dict[str, Decision] = {}
        [outcome] = self.place([spec], lambda s: self.move_planner.choose(move, s, decided))
        if isinstance(outcome, NoValidHost):
            raise outcome
        [placement] = outcome
        start = MoveStart(move, spec, placement, decided.get(uuid))
        self.moves.append(start)
        self.store.instances[uuid].update(state=states.MIGRATING, move_host=placement.host,
                                          memory_mb=move.flavor.memory_mb, root_gb=move.flavor.root_gb,
                                          ephemeral_gb=move.flavor.ephemeral_gb, vcpus=move.flavor.vcpus)
        return start


# -- requests and what their plans say ---------------------------------------------------------


def request(memory_mb: int = 1024, count: int = 1, hints: dict[str, Any] | None = None, root_gb: int = 10,
            **properties: Any) -> tuple[list[str], tuple[dict, dict]]:
    """(its instances' uuids, (request_spec, filter_properties)) of a request for ``count``
    instances of ``memory_mb``, ``root_gb`` of disk and 2 vCPUs; ``properties``: more filter
    properties (force_hosts, ...)."""
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    spec = {"instance_uuids": uuids, "num_instances": count,
            "instance_type": {"memory_mb": memory_mb, "root_gb": root_gb, "vcpus": 2}}
    return uuids, (spec, dict(properties, scheduler_hints=hints or {}))


def sent_back(build: Build, node: str, why: str) -> tuple[dict, dict]:
    """The request of ``build`` as its agent (on ``node``) sends it back when the build fails
    (compute_agent.manager: _reschedule): its host last in the retry record, its limits dropped."""
    spec = dict(build.request_spec, instance_uuids=[build.instance_uuid], num_instances=1)
    props = {k: v for k, v in build.filter_properties.items() if k != "limits"}
    retry = props.get("retry") or {"num_attempts": 1, "hosts": []}
    props["retry"] = dict(retry, hosts=[*retry["hosts"], [build.host, node]],
                          exc_reason=f"{build.host}: {why}")
    return spec, props


@dataclasses.dataclass(frozen=True)
class Placed:
    """One instance a Plan places: its row's host and node, and the limits its build carries."""

    host: str
    node: str
    limits: dict[str, Any]
    attempt: int


def placed(plan: Plan) -> dict[str, Placed]:
    """{uuid: Placed} of the instances ``plan`` places, from the rows it writes and the builds it casts."""
    rows = {row["uuid"]: row for row in plan.creates}
    rows.update({u.instance_uuid: u.values for u in plan.updates})
    found = {}
    for build in plan.builds:
        row = rows[build.instance_uuid]
        assert (row["state"], row["host"]) == (states.SCHEDULED, build.host), (row, build)
        found[build.instance_uuid] = Placed(build.host, row["node"], build.filter_properties["limits"],
                                            row["attempts"])
    return found


def refused(plan: Plan) -> dict[str, str]:
    """{uuid: the reason its row records} of the instances ``plan`` refuses."""
    reasons = {}
    for refusal in plan.refusals:
        for uuid in refusal.spec.instance_uuids:
            reasons[uuid] = refusal.reason
    return reasons
