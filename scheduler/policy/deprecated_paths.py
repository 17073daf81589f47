"""The old import paths of the wire types that moved to berth_contract, for out-of-tree plugins.

A filter or weigher may still import ``scheduler.policy.request_spec`` (``resource_classes``,
``traits``, ``image_meta``): it gets the contract's module itself, the same classes and
functions, and a DeprecationWarning, also logged, names the importing file and the new path.
Berth's own code imports the contract (tests/unit/test_architecture.py checks it).
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
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MOVED_TO_CONTRACT:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = f"berth_contract.{old.rpartition('.')[2]}"
        filename, line, importer = _importer()
        said = f"{old} is deprecated: import {new} (the same module) instead"
        LOG.warning("%s:%s: %s", filename, line, said)
        warnings.warn_explicit(said, DeprecationWarning, filename, line, module=importer)
        # The import system hands out what sys.modules holds once the module is executed.
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
