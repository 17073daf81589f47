import itertools
import os

import pytest

from compute_agent import conf as agent_conf
from scheduler import conf as berth_conf

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
