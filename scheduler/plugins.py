"""Finding filter and weigher classes by name.

A plugin is a class in a module of its package (``scheduler.filters`` or
``scheduler.weighers``), or one installed by another distribution under the
entry point group ``berth.scheduler.filters`` / ``berth.scheduler.weighers``.
Adding one is a matter of one small module.
"""

import importlib
import pkgutil
from importlib.metadata import entry_points

from scheduler import nova_names


def discover(package, base, group):
    """{class name: class} for every concrete subclass of ``base`` in ``package`` and ``group``."""
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    found = {}
    stack = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if not cls.__name__.startswith("_") and not cls.__dict__.get("abstract", False):
            found[cls.__name__] = cls
    for ep in entry_points(group=group):
        found[ep.name] = ep.load()
    return found


def modules(package):
    """The plugin modules of ``package`` (for collecting their options)."""
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]


def load(names, available, kind, option):
    """Instantiate nothing; return the classes for ``names`` (Berth's class names, or Nova's
    names and paths: scheduler.nova_names) or raise ValueError naming the option."""
    try:
        names = nova_names.translate(names, available, kind)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(
            f"{option}: unknown {kind} {', '.join(repr(n) for n in unknown)}; "
            f"installed: {', '.join(sorted(available))}"
        )
    return [available[n] for n in names]
