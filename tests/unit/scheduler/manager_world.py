"""A SchedulerManager on memory:// and SQLite with three hosts, agents replaced by recorders."""

import threading
import time
import uuid as uuidlib

import pytest

from scheduler import rpc
from scheduler.conf import opts
from scheduler.db.api import Database
from scheduler.manager import SchedulerManager

HOSTS = {"h1": 8192, "h2": 16384, "h3": 4096}


class Recorder:
    """Stands in for a compute agent: remembers what the scheduler casts to it."""

    def __init__(self):
        self.calls = []
        self.event = threading.Event()

    def run_instance(self, context, instance, request_spec, filter_properties):
        self.calls.append(("run_instance", instance, request_spec, filter_properties))
        self.event.set()

    def terminate_instance(self, context, instance_uuid):
        self.calls.append(("terminate_instance", instance_uuid))
        self.event.set()


@pytest.fixture
def world(conf):
    opts.register_plugin_opts(conf)
    transport = rpc.get_transport(conf)
    database = Database.from_conf(conf)
    database.sync()
    manager = SchedulerManager(conf, transport, database)
    agents, servers = {}, []
    for host, ram in HOSTS.items():
        agents[host] = Recorder()
        server = rpc.get_rpc_server(transport, rpc.Target("compute", server=host), [agents[host]])
        server.start()
        servers.append(server)
        manager.report_resources({}, host, report(host, ram))
    yield manager, database, agents
    for server in servers:
        server.stop()
        server.wait()
    transport.cleanup()
    database.dispose()


def report(host, ram, used=0, uuids=()):
    return {"host": host, "memory_mb": ram, "free_ram_mb": ram - used, "local_gb": 100,
            "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": list(uuids),
            "running_vms": len(uuids)}


def request(memory_mb=1024, count=1, retry=None):
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    filter_properties = {"retry": retry} if retry else {}
    return uuids, {"instance_uuids": uuids, "num_instances": count,
                   "instance_type": {"memory_mb": memory_mb, "root_gb": 10, "vcpus": 2}}, filter_properties


def casts(agents, expected, timeout=10):
    deadline = time.monotonic() + timeout
    while sum(len(a.calls) for a in agents.values()) < expected:
        assert time.monotonic() < deadline, "the casts did not arrive"
        time.sleep(0.01)
    time.sleep(0.05)  # and nothing more arrives
    return {h: a.calls for h, a in agents.items() if a.calls}
