"""The scaling groups' endpoint on SQLite, with a clock the test moves and a controller
that syncs with in-memory metrics: what the API and CLI tests share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler import states
from scheduler.admin.grouping import AdminEndpoint
from scheduler.conf import opts
from scheduler.db import api as db_api
from scheduler.scaling.api import ScalingGroupEndpoint
from scheduler.scaling.controller import ControllerSettings, InMemoryMetrics, ScalingController
from scheduler.utils import jsonutils
from tests.unit.scaling.helpers import Clock

CPU_50 = [{"type": "resource", "name": "cpu", "target_utilization": 50}]
SPEC = {"min": 1, "max": 20, "metrics": CPU_50}
TEMPLATE = {"flavor_name": "m1.small"}



class World:
    def __init__(self, database: db_api.Database, endpoint: ScalingGroupEndpoint, clock: Clock) -> None:
        self.db = database
        self.api = endpoint
        self.clock = clock
        self.metrics = InMemoryMetrics()
        self.builds: list[str] = []
        self.deletes: list[str] = []
        self.controller = ScalingController(ControllerSettings("sched-a"), database, self._build,
                                            self._delete, self.metrics, clock)

    def _build(self, request_spec: dict[str, Any], filter_properties: dict[str, Any]) -> None:
        self.builds.extend(request_spec["instance_uuids"])

    def _delete(self, uuid: str) -> None:
        """As the scheduler and an agent would: at once."""
        self.deletes.append(uuid)
        self.db.update_instance(uuid, {"state": states.DELETED, "deleted_at": self.db.now()})

    def sync_all(self, seconds: float) -> list[Any]:
        return self.controller.sync_once(self.clock.at(seconds))

    def sync(self, seconds: float) -> Any:
        """The sync of the one group there is."""
        [result] = self.sync_all(seconds)
        return result

    def run(self, group: str, cpu: float) -> None:
        """Every member of ``group`` (a uuid) ACTIVE on a host of its own, using ``cpu`` vCPUs."""
        for member in self.db.list_scaling_group_members(group):
            if member["state"] != states.ACTIVE:
                self.db.update_instance(member["uuid"], {"state": states.ACTIVE,
                                                         "host": f"h-{member['display_name']}"})
            self.metrics.set_usage(member["uuid"], cpu=cpu)

    def create(self, name: str = "web", spec: dict[str, Any] | None = None,
               template: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
        return self.api.create_scaling_group({}, name, dict(spec or SPEC), dict(template or TEMPLATE), **more)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every group as stored, and the members: what a refusal must leave alone."""
        groups = self.db.list_scaling_groups()
        return groups + [m for g in groups for m in self.db.list_scaling_group_members(g["uuid"])]


# Imported by the tests under other names: their parameters name the fixtures.
@pytest.fixture(name="clock")
def clock_fixture() -> Clock:
    return Clock()


@pytest.fixture(name="world")
def world_fixture(conf: Any, clock: Clock) -> Iterator[World]:
    opts.register_plugin_opts(conf)
    os.makedirs(conf.state_path, exist_ok=True)
    database = db_api.Database.from_conf(conf)
    database.now = clock  # type: ignore[method-assign]
    database.sync()
    yield World(database, ScalingGroupEndpoint(conf, database), clock)
    database.dispose()


class DirectClient:
    """SchedulerClient.admin_call without a broker: the arguments and the answer go through
    JSON as on the wire, to the scaling endpoint or else the admin endpoint."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.admin = AdminEndpoint(world.api._conf, world.db, None)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def admin_call(self, ctxt: Any, method: str, **kwargs: Any) -> Any:
        sent = jsonutils.loads(jsonutils.dumps(kwargs))
        self.calls.append((method, sent))
        target = self.world.api if hasattr(self.world.api, method) else self.admin
        return jsonutils.loads(jsonutils.dumps(getattr(target, method)(ctxt, **sent)))

    def list_instances(self, ctxt: Any, name: str | None = None, **_: Any) -> list[dict[str, Any]]:
        return self.world.db.list_instances(name=name)
