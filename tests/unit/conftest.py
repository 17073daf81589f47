"""Fixtures shared by the unit tests."""

import itertools
import os

import pytest

import scheduler  # noqa: F401  (applies BERTH_CONCURRENCY before kombu & co. load)
from scheduler import conf as berth_conf
from tests.fixtures import FAST_PATH_OPTIONS, FAST_PATHS
from tests.unit.policy.fakes import policy_conf, rng, table  # noqa: F401 (fixtures for every test)
from tests.unit.scheduler.manager_world import assembled, parts, world  # noqa: F401

_exchanges = itertools.count()


@pytest.fixture
def conf(tmp_path):
    """Berth's options parsed from nothing, with a tmp state_path, memory:// and an
    exchange no other test uses. memory:// keeps its queues by name for the whole process,
    whatever exchange they are bound to: they start empty, so that what an earlier test
    left in 'compute.h1' does not reach this test's agent of that name."""
    from kombu.transport import memory  # here: after scheduler applied BERTH_CONCURRENCY

    memory.Channel.queues.clear()
    conf = berth_conf.new_conf()
    conf([])
    conf.set_override("state_path", str(tmp_path / "state"))
    conf.set_override("transport_url", "memory://")
    conf.set_override("control_exchange", f"test-{os.getpid()}-{next(_exchanges)}")
    for group, name in FAST_PATH_OPTIONS:
        conf.set_default(name, FAST_PATHS, group=group)
    yield conf
    conf.reset()
