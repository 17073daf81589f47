"""Finding filter and weigher classes by name.

A plugin is a subclass of ``scheduler.policy.filters.BaseHostFilter`` or
``scheduler.policy.weighers.BaseHostWeigher``: one of Berth's, defined in a module of
its package (``scheduler.policy.filters`` / ``scheduler.policy.weighers``), or one another
distribution installs under the entry point group ``berth.scheduler.filters``
/ ``berth.scheduler.weighers`` (``MyFilter = my_package.my_module:MyFilter``).
Either way a plugin is known by its class name, the name the options
``enabled_filters`` and ``weighers`` give.

Two plugins of one class name are an error wherever plugins are listed: the
name would not say which one runs. An entry point that cannot be used (it
fails to import, or is not a subclass of the base class) is left out with a
warning, and is an error only when the configuration names it: a broken
plugin nobody enabled does not stop a scheduler.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Generic, TypeVar

from scheduler.policy import nova_names
from scheduler.utils.entry_points import describe, load_class

LOG = logging.getLogger(__name__)

P = TypeVar("P")


class PluginError(ValueError):
    """A plugin that cannot be used, or a class name two plugins share."""


@dataclass(frozen=True)
class Unusable:
    """An entry point that does not give a usable plugin, and why."""

    name: str  # the class name the entry point would give (its attribute), else its name
    where: str
    reason: str


@dataclass
class Catalog(Generic[P]):
    """The plugins of one kind: {class name: class}, and the entry points left out."""

    classes: dict[str, type[P]]
    unusable: dict[str, Unusable]


def _origin(cls: type, eps: dict[type, EntryPoint]) -> str:
    ep = eps.get(cls)
    return describe(ep) if ep is not None else f"{cls.__module__}.{cls.__qualname__} (built in)"


def builtin(package: ModuleType, base: type[P]) -> list[type[P]]:
    """The concrete subclasses of ``base`` defined in the modules of ``package``, in module order.

    A class whose name starts with ``_`` or that sets ``abstract = True`` in
    its own body is a shared base, not a plugin."""
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ == module.__name__ and issubclass(cls, base) and cls is not base
                    and not cls.__name__.startswith("_") and not cls.__dict__.get("abstract", False)):
                found.append(cls)
    return found


_warned: set[str] = set()

def discover(package: ModuleType, base: type[P], group: str) -> Catalog[P]:
    """Every plugin of ``package`` and of entry point ``group``, by class name.

    Raises PluginError naming both when two of them share a class name."""
    classes: dict[str, type[P]] = {}
    eps: dict[type, EntryPoint] = {}
    unusable: dict[str, Unusable] = {}

    def add(cls: type[P]) -> None:
        other = classes.setdefault(cls.__name__, cls)
        if other is not cls:
            raise PluginError(
                f"two {group.rsplit('.', 1)[-1]} are named {cls.__name__}: {_origin(other, eps)} "
                f"and {_origin(cls, eps)}; uninstall one of them"
            )

    for cls in builtin(package, base):
        add(cls)
    for ep in entry_points(group=group):
        loaded = load_class(ep, base)
        if not isinstance(loaded, str):
            eps.setdefault(loaded, ep)
            add(loaded)
            continue
        reason = loaded
        name = ep.attr or ep.name
        unusable[name] = Unusable(name, describe(ep), reason)
        if describe(ep) not in _warned:
            _warned.add(describe(ep))
            LOG.warning("Leaving out %s: %s", describe(ep), reason)
    return Catalog(classes, unusable)


def load(names: Sequence[str], catalog: Catalog[P], kind: str, option: str) -> list[type[P]]:
    """The classes for ``names`` (class names, or Nova's names and paths: scheduler.policy.nova_names),
    or raise ValueError naming the option and, for an unusable entry point, why."""
    available = catalog.classes
    try:
        names = nova_names.translate(names, available, kind)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
    for name in names:
        if name not in available and name in catalog.unusable:
            bad = catalog.unusable[name]
            raise PluginError(f"{option}: {kind} {name}: {bad.where} cannot be used: {bad.reason}")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(
            f"{option}: unknown {kind} {', '.join(repr(n) for n in unknown)}; "
            f"installed: {', '.join(sorted(available))}"
        )
    return [available[n] for n in names]


def option_modules(classes: Iterable[type]) -> list[ModuleType]:
    """The modules defining ``classes`` that declare options (``list_opts``), each once, in order."""
    modules: dict[str, ModuleType] = {}
    for cls in classes:
        module = importlib.import_module(cls.__module__)
        if hasattr(module, "list_opts"):
            modules.setdefault(module.__name__, module)
    return list(modules.values())
