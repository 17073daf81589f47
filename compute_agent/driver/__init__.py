"""Compute drivers, chosen by name with ``[compute_agent] driver`` among the installed ones
(compute_agent.driver.installed: entry points ``berth.compute.drivers``)."""

from compute_agent import conf as agent_conf
from compute_agent.driver.base import BuildAborted, BuildFailed, CannotStart, ComputeDriver, MoveFailed
from compute_agent.driver.capabilities import Capabilities
from compute_agent.driver.fake import FakeDriver
from compute_agent.driver.host import HostDriver
from compute_agent.driver.installed import DriverError, driver_class

__all__ = ["BuildAborted", "BuildFailed", "CannotStart", "Capabilities", "ComputeDriver", "DriverError",
           "FakeDriver", "HostDriver", "MoveFailed", "load_driver"]


def load_driver(conf, name=None):
    name = name or conf.compute_agent.driver
    if name is None:
        raise ValueError(agent_conf.DRIVER_NOT_SET)
    return driver_class(name)(conf)
