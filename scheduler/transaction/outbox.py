"""Casts held back until the database transaction that decided them commits."""

import contextlib
import logging
import threading

from scheduler.rpc.exceptions import InvalidName

LOG = logging.getLogger(__name__)


class Outbox:
    """Send now, or, inside ``collecting()``, once the block ends without error.

    A scheduler must not tell an agent to build an instance whose placement
    is not committed yet: inside a unit of work its casts wait here.
    """

    def __init__(self, batch=contextlib.nullcontext):
        self._local = threading.local()
        self._batch = batch  # e.g. Publisher.batch: what was held goes out, and is confirmed, together

    def send(self, cast, *args, **kwargs):
        held = getattr(self._local, "held", None)
        if held is None:
            cast(*args, **kwargs)
        else:
            held.append((cast, args, kwargs))

    @contextlib.contextmanager
    def collecting(self):
        """Hold every send of this thread; ``release()`` sends them, leaving drops them."""
        self._local.held = []
        try:
            yield self
        finally:
            self._local.held = None

    def release(self):
        """Send what was held. A cast to a name AMQP cannot carry is logged and
        dropped, never retried: what it would have told is committed already."""
        held, self._local.held = self._local.held or [], []
        with self._batch():
            for cast, args, kwargs in held:
                try:
                    cast(*args, **kwargs)
                except InvalidName as exc:
                    LOG.error("Dropped %s: %s", getattr(cast, "__name__", cast), exc)

    @contextlib.contextmanager
    def step(self):
        """Drop the sends of this block if it raises."""
        held = getattr(self._local, "held", None)
        mark = len(held) if held is not None else 0
        try:
            yield
        except BaseException:
            if held is not None:
                del held[mark:]
            raise
