"""The installed compute drivers, by the name ``[compute_agent] driver`` gives.

A driver is a subclass of ``compute_agent.driver.base.ComputeDriver`` that a
distribution installs under the entry point group ``berth.compute.drivers``
(``libvirt = my_package.driver:LibvirtDriver``): its name is the entry point's.
Berth's own (fake, host, qemu) are there too, and known from a source tree that was
never installed. A driver's options live in the module that defines its class
(``list_opts()``, and ``register_opts(conf)`` when it needs more), in a group of
its own. A driver is imported only when it is chosen or its options listed; one
that cannot be used (it fails to import, or is no ComputeDriver) is an error
when it is chosen, and left out with a warning when the options are listed.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

from compute_agent.driver.base import ComputeDriver
from scheduler.utils.entry_points import describe, load_class

LOG = logging.getLogger(__name__)

GROUP = "berth.compute.drivers"
#: Berth's own drivers, as setup.cfg declares them.
BUILTIN = {
    "fake": "compute_agent.driver.fake:FakeDriver",
    "host": "compute_agent.driver.host:HostDriver",
    "qemu": "compute_agent.driver.qemu.driver:QemuDriver",
}
OPTION = "[compute_agent] driver"


class DriverError(ValueError):
    """A driver that is not installed, or cannot be used."""


def available() -> dict[str, EntryPoint]:
    """{name: entry point} of every installed driver. Raises DriverError when two distributions
    give one name to different classes: the name would not say which one runs."""
    found = {name: EntryPoint(name, value, GROUP) for name, value in BUILTIN.items()}
    for ep in entry_points(group=GROUP):
        other = found.setdefault(ep.name, ep)
        if other.value != ep.value:
            raise DriverError(f"two drivers are named {ep.name}: {describe(other)} and {describe(ep)}; "
                              "uninstall one of them")
    return found


def _load(ep: EntryPoint) -> type[ComputeDriver]:
    loaded = load_class(ep, ComputeDriver)
    if isinstance(loaded, str):
        raise DriverError(f"{describe(ep)} cannot be used: {loaded}")
    return loaded


def driver_class(name: str) -> type[ComputeDriver]:
    """The class of the driver ``name``; DriverError naming the installed ones when there is none."""
    drivers = available()
    if name not in drivers:
        raise DriverError(f"{OPTION}: unknown driver {name!r}; use one of {', '.join(sorted(drivers))}")
    try:
        return _load(drivers[name])
    except DriverError as exc:
        raise DriverError(f"{OPTION}: driver {name}: {exc}") from None


_warned: set[str] = set()


def option_modules() -> list[ModuleType]:
    """The modules of the installed drivers that declare options, each once, Berth's first."""
    modules: dict[str, ModuleType] = {}
    for ep in available().values():
        try:
            module = importlib.import_module(_load(ep).__module__)
        except DriverError as exc:
            if str(exc) not in _warned:
                _warned.add(str(exc))
                LOG.warning("Leaving out the options of driver %s: %s", ep.name, exc)
            continue
        if hasattr(module, "list_opts"):
            modules.setdefault(module.__name__, module)
    return list(modules.values())
