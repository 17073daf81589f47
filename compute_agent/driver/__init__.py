"""Compute drivers, chosen by name with ``[compute_agent] driver``."""

from compute_agent import conf as agent_conf
from compute_agent.driver.base import BuildAborted, ComputeDriver, MoveFailed
from compute_agent.driver.fake import FakeDriver
from compute_agent.driver.host import HostDriver

DRIVERS = {"fake": FakeDriver, "host": HostDriver}

__all__ = ["DRIVERS", "BuildAborted", "ComputeDriver", "FakeDriver", "HostDriver", "MoveFailed",
           "load_driver"]


def load_driver(conf, name=None):
    name = name or conf.compute_agent.driver
    if name is None:
        raise ValueError(agent_conf.DRIVER_NOT_SET)
    try:
        cls = DRIVERS[name]
    except KeyError:
        raise ValueError(
            f"[compute_agent] driver: unknown driver {name!r}; use one of {', '.join(DRIVERS)}"
        ) from None
    return cls(conf)
