import itertools
import os

import pytest

from compute_agent import conf as agent_conf
from compute_agent.manager import ComputeManager
from scheduler import conf as berth_conf
from tests.unit.compute.stub_scheduler import HOST, StubScheduler, serving

_exchanges = itertools.count()


@pytest.fixture
def conf(tmp_path):
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([])
    conf.set_override("state_path", str(tmp_path / "state"))
    conf.set_override("transport_url", "memory://")
    conf.set_override("control_exchange", f"compute-test-{os.getpid()}-{next(_exchanges)}")
    conf.set_override("host", "agent-1")
    conf.set_override("driver", "fake", "compute_agent")
    yield conf
    conf.reset()
    conf.clear_override("host")


@pytest.fixture
def scheduler(transport):
    """What the agents cast to the scheduler topic (a StubScheduler)."""
    with serving(transport, StubScheduler()) as stub:
        yield stub


@pytest.fixture
def agents(conf, transport):
    """start(host=HOST, driver=None): a started ComputeManager, stopped after the test."""
    started = []

    def start(host=HOST, driver=None):
        manager = ComputeManager(conf, transport, host=host, driver=driver)
        manager.start()
        started.append(manager)
        return manager

    yield start
    for manager in started:
        manager.stop()
