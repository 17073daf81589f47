"""A SchedulerManager on memory:// and SQLite with three hosts, agents replaced by recorders."""

import threading
import time
import uuid as uuidlib

import pytest

from scheduler import api_versions, rpc
from scheduler.service import assemble
from tests.unit.scheduler.service_parts import transport_and_database

HOSTS = {"h1": 8192, "h2": 16384, "h3": 4096}


class Recorder:
    """Stands in for a compute agent of this release: remembers what the scheduler casts to it."""

    RPC_API = api_versions.COMPUTE

    def __init__(self, client):
        self.calls = []
        self.contexts = []  # the context values of each run_instance
        self._client = client  # casts to this agent's own queue, as the scheduler's do
        self._markers = {}  # marker -> threading.Event, set when it arrived

    def run_instance(self, context, instance, request_spec, filter_properties):
        self.contexts.append(dict(context.values))
        self.calls.append(("run_instance", instance, request_spec, filter_properties))

    def terminate_instance(self, context, instance_uuid, reason=None):
        self.calls.append(("terminate_instance", instance_uuid, reason))

    def move_instance(self, context, instance, request_spec, filter_properties, migration):
        self.calls.append(("move_instance", instance, filter_properties, migration))

    def end_resize(self, context, instance_uuid, migration_id, confirmed):
        self.calls.append(("end_resize", instance_uuid, migration_id, confirmed))

    def prepare_move(self, context, instance, request_spec, filter_properties, migration):
        self.calls.append(("prepare_move", instance, filter_properties, migration))

    def migrate_out(self, context, instance_uuid, migration, transfer):
        self.calls.append(("migrate_out", instance_uuid, migration, transfer))

    def finish_move(self, context, instance_uuid, migration_id):
        self.calls.append(("finish_move", instance_uuid, migration_id))

    def abort_move(self, context, instance_uuid, migration_id):
        self.calls.append(("abort_move", instance_uuid, migration_id))

    def power_off_instance(self, context, instance_uuid):
        self.calls.append(("power_off_instance", instance_uuid))

    def power_on_instance(self, context, instance_uuid):
        self.calls.append(("power_on_instance", instance_uuid))

    def reboot_instance(self, context, instance_uuid, hard=False):
        self.calls.append(("reboot_instance", instance_uuid, hard))

    def marker(self, context, marker):
        self._markers[marker].set()

    def handled_all_sent(self, timeout=10):
        """Cast a marker after what was sent to this agent and wait for it: its queue is
        consumed in order, so everything sent before the marker was recorded by then."""
        marker = uuidlib.uuid4().hex
        arrived = self._markers[marker] = threading.Event()
        self._client.prepare(version=self.RPC_API.version).cast({}, "marker", marker=marker)
        assert arrived.wait(timeout), "the marker cast did not arrive"


@pytest.fixture
def world(assembled):
    """(the manager, its database, {host: Recorder}): three hosts reported."""
    parts, database, agents = assembled
    return parts.manager, database, agents


@pytest.fixture
def parts(assembled):
    """The scheduler's parts (scheduler.service.assemble) of the world."""
    return assembled[0]


@pytest.fixture
def assembled(conf):
    transport, database = transport_and_database(conf)
    parts = assemble(conf, transport, database)
    manager = parts.manager
    agents, servers = {}, []
    for host, ram in HOSTS.items():
        agents[host] = Recorder(rpc.RPCClient(transport, rpc.Target("compute", server=host)))
        server = rpc.get_rpc_server(transport, rpc.Target("compute", server=host), [agents[host]])
        server.start()
        servers.append(server)
        manager.report_resources({}, host, report(host, ram))
    yield parts, database, agents
    for server in servers:
        server.stop()
        server.wait()
    transport.cleanup()
    database.dispose()


def report(host, ram, used=0, uuids=(), **more):
    return {"host": host, "memory_mb": ram, "free_ram_mb": ram - used, "local_gb": 100,
            "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": list(uuids),
            "running_vms": len(uuids), **more}


def request(memory_mb=1024, count=1, retry=None):
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    filter_properties = {"retry": retry} if retry else {}
    return uuids, {"instance_uuids": uuids, "num_instances": count,
                   "instance_type": {"memory_mb": memory_mb, "root_gb": 10, "vcpus": 2}}, filter_properties


def casts(agents, expected, timeout=10):
    """{host: calls} once exactly ``expected`` casts came to the agents in all, and
    nothing sent before this call can still come."""
    deadline = time.monotonic() + timeout
    while sum(len(a.calls) for a in agents.values()) < expected:
        assert time.monotonic() < deadline, "the casts did not arrive"
        time.sleep(0.01)
    for agent in agents.values():
        agent.handled_all_sent(timeout)
    received = {h: a.calls for h, a in agents.items() if a.calls}
    assert sum(map(len, received.values())) == expected, (
        f"{expected} casts expected, got {({h: [c[0] for c in calls] for h, calls in received.items()})}")
    return received


def moved(parts, migration, context=None):
    """Its agents' word for each step of ``migration`` (a move between two agents) up to done: the
    destination prepared, the source migrated, the destination done; on one host, only done."""
    ctxt = context if context is not None else rpc.Context({})
    uuid, source, dest = migration["instance_uuid"], migration["source_host"], migration["dest_host"]
    if source != dest:
        parts.moves.move_update(ctxt, uuid, dest, migration["id"], "prepared", transfer={})
        parts.moves.move_update(ctxt, uuid, source, migration["id"], "migrated")
    parts.moves.move_update(ctxt, uuid, dest, migration["id"], "done")
