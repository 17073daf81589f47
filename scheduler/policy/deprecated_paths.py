"""The old import paths of modules that moved, for out-of-tree plugins.

A filter or weigher may still import ``scheduler.policy.request_spec`` (``resource_classes``,
``traits``, ``image_meta``), which moved to berth_contract; a rebalance goal
``scheduler.policy.rebalance`` and ``scheduler.policy.rebalance_goals`` (and their modules),
which moved to scheduler.moves. It gets the new module itself, the same classes and functions,
and a DeprecationWarning, also logged, names the importing file and the new path. Berth's own
code imports the new paths (tests/unit/test_architecture.py checks it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import warnings
from types import ModuleType

LOG = logging.getLogger(__name__)

PACKAGE = "scheduler.policy"
#: The modules of scheduler.policy that moved to berth_contract and plugins may import.
MOVED_TO_CONTRACT = ("request_spec", "resource_classes", "traits", "image_meta")
#: Old name -> new name of each module or package that moved (a package's modules move with it).
MOVED = {
    **{f"{PACKAGE}.{name}": f"berth_contract.{name}" for name in MOVED_TO_CONTRACT},
    f"{PACKAGE}.rebalance": "scheduler.moves.rebalance",
    f"{PACKAGE}.rebalance_goals": "scheduler.moves.goals",
}


def new_name(old: str) -> str | None:
    """Where the module ``old`` is now, if it moved."""
    for before, after in MOVED.items():
        if old == before or old.startswith(before + "."):
            return after + old[len(before):]
    return None


def _importer() -> tuple[str, int, str]:
    """File, line and module name of the code whose import statement brought us here."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_globals.get("__name__") in (__name__, "importlib")):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0, "<unknown>"
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__", "<unknown>")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE) or new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = new_name(old)
        assert new is not None
        filename, line, importer = _importer()
        said = f"{old} is deprecated: import {new} (the same module) instead"
        LOG.warning("%s:%s: %s", filename, line, said)
        warnings.warn_explicit(said, DeprecationWarning, filename, line, module=importer)
        # The import system hands out what sys.modules holds once the module is executed.
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    # First: the modules of a moved package are found by the package's new path too, and would
    # otherwise be loaded a second time under their old names.
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
