"""What the agent tests put on the other end of memory://: a stub scheduler recording what the
agents cast to it, the instances and requests a scheduler sends them, and a bounded wait."""

import contextlib
import threading
import time
import uuid as uuidlib

import pytest

from scheduler import api_versions, rpc
from scheduler.client import REPORTS_TOPIC
from scheduler.service import agents_server

HOST = "agent-1"
TIMEOUT = 30.0  # guards against hangs only


def wait_for(condition, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


class StubScheduler:
    """Records what the agent casts to the scheduler topic."""

    RPC_API = api_versions.SCHEDULER

    def __init__(self):
        self._lock = threading.Lock()
        self.updates = []
        self.reports = []
        self.reschedules = []
        self.moves = []  # (instance_uuid, host, migration_id, outcome, fault)
        self.transfers = {}  # (instance_uuid, migration_id) -> the transfer a destination prepared
        self.figures = []  # (instance_uuid, migration_id, figures) a source said with migrated
        self.asked = []  # start_build's instance uuids
        self.refused = {}  # uuid -> why start_build says not to build it

    def start_build(self, context, instance_uuid, host):
        """Yes, but for the instances of ``refused`` ({uuid: reason})."""
        with self._lock:
            self.asked.append(instance_uuid)
            reason = self.refused.get(instance_uuid)
        return {"build": True} if reason is None else {"build": False, "reason": reason}

    def instance_update(self, context, instance_uuid, host, state, fault=None):
        with self._lock:
            self.updates.append((instance_uuid, host, state, fault))

    def report_resources(self, context, host, resources):
        with self._lock:
            self.reports.append((host, resources))

    def run_instance(self, context, request_spec, filter_properties):
        with self._lock:
            self.reschedules.append((request_spec, filter_properties))

    def move_update(self, context, instance_uuid, host, migration_id, outcome, fault=None, transfer=None,
                    figures=None):
        with self._lock:
            self.moves.append((instance_uuid, host, migration_id, outcome, fault))
            if transfer is not None:
                self.transfers[instance_uuid, migration_id] = transfer
            if figures is not None:
                self.figures.append((instance_uuid, migration_id, figures))

    def steps_said(self, uuid):
        """[(host, outcome)] of what the agents said of ``uuid``'s moves, in order."""
        with self._lock:
            return [(host, outcome) for u, host, _, outcome, _ in self.moves if u == uuid]

    def move_updates(self, uuid):
        with self._lock:
            return [(migration_id, outcome, fault) for u, _, migration_id, outcome, fault in self.moves
                    if u == uuid]

    def states(self, uuid):
        with self._lock:
            return [state for u, _, state, _ in self.updates if u == uuid]

    def last_report(self, host=HOST):
        with self._lock:
            mine = [resources for h, resources in self.reports if h == host]
        return mine[-1] if mine else None

    def report_count(self):
        with self._lock:
            return len(self.reports)


@contextlib.contextmanager
def serving(transport, stub):
    """``stub`` on the scheduler topic of ``transport`` (server sched-1), taking the agents' reports
    and their words on instances and moves (on their own queue) as a scheduler does; yields it."""
    servers = [rpc.get_rpc_server(transport, rpc.Target(topic="scheduler", server="sched-1"), [stub]),
               agents_server(transport, [stub], fanouts=(REPORTS_TOPIC,))]
    for server in servers:
        server.start()
    try:
        yield stub
    finally:
        for server in servers:
            server.stop()
        for server in servers:
            server.wait()


def make_instance(memory_mb=1024, root_gb=10, vcpus=1, uuid=None):
    return {
        "uuid": uuid or str(uuidlib.uuid4()),
        "flavor": {
            "name": "m1.test",
            "memory_mb": memory_mb,
            "root_gb": root_gb,
            "ephemeral_gb": 0,
            "vcpus": vcpus,
            "extra_specs": {},
        },
        "project_id": "p1",
    }


def request_for(*instances, limits=None, retry=None):
    flavor = instances[0]["flavor"]
    request_spec = {
        "instance_uuids": [i["uuid"] for i in instances],
        "num_instances": len(instances),
        "instance_type": flavor,
        "instance_properties": {"project_id": "p1"},
    }
    filter_properties = {"limits": limits or {}, "scheduler_hints": {}}
    if retry is not None:
        filter_properties["retry"] = retry
    return request_spec, filter_properties
