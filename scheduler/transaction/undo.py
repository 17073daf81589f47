"""What to undo in memory should the database transaction that decided it roll back."""

import contextlib
import threading


class UndoLog:
    """Inside ``collecting()``, ``add(func, *args)`` keeps a compensation: run when the
    enclosing ``step()`` or the whole unit of work fails (``rollback()``), dropped
    when it commits (``commit()``). Outside ``collecting()`` nothing is kept: there
    is no transaction to roll back.

    The scheduler consumes a host's resources in memory as it places; should the
    transaction that records the placement roll back, the resources must come
    back at once, not when the host's next reports stop showing them.
    """

    def __init__(self):
        self._local = threading.local()

    def add(self, func, *args):
        kept = getattr(self._local, "kept", None)
        if kept is not None:
            kept.append((func, args))

    @contextlib.contextmanager
    def collecting(self):
        self._local.kept = []
        try:
            yield self
        finally:
            self._local.kept = None

    def commit(self):
        self._local.kept = []

    def rollback(self):
        kept, self._local.kept = getattr(self._local, "kept", None) or [], []
        _run(kept)

    @contextlib.contextmanager
    def step(self):
        """Undo what this block kept if it raises."""
        kept = getattr(self._local, "kept", None)
        mark = len(kept) if kept is not None else 0
        try:
            yield
        except BaseException:
            if kept is not None:
                undone = kept[mark:]
                del kept[mark:]
                _run(undone)
            raise


def _run(compensations):
    for func, args in reversed(compensations):
        func(*args)
