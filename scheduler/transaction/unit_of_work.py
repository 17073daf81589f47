"""A batch of messages as one database transaction, and the database failures that only
postpone it."""

import contextlib

from sqlalchemy import exc as sa_exc

from scheduler import rpc
from scheduler.db import api as db_api
from scheduler.transaction.undo import UndoLog
from scheduler.utils.masking import mask_url


class UnitOfWork:
    """A batch of messages: one database transaction; the casts it decided go out after it
    commits, and what it changed in memory is undone if it rolls back.

    Nothing of a batch is acknowledged before this exits cleanly (see
    RPCServer), so a worker that dies at any point loses nothing: its
    messages are redelivered, and a redelivered request sends the builds of
    what was committed again instead of placing it twice.
    """

    def __init__(self, database, outbox, undo=None):
        self._database = database
        self._outbox = outbox
        self._undo = undo or UndoLog()

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self._outbox.collecting())
        self._stack.enter_context(self._undo.collecting())
        try:
            with _passing_failures():
                self._transaction = self._database.unit_of_work()
                self._transaction.__enter__()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            try:
                with _passing_failures():
                    self._transaction.__exit__(exc_type, exc, tb)
            except BaseException:
                self._undo.rollback()
                raise
            if exc_type is not None:
                self._undo.rollback()
                return False
            self._undo.commit()
            self._outbox.release()
        finally:
            self._stack.close()
        return False

    @contextlib.contextmanager
    def step(self, method, read_only=False):
        """One message: its writes and casts undone alone if it fails. A method marked
        read-only gets no savepoint; should it meet a database error all the same,
        the transaction can no longer commit and the batch is run again message by
        message (WorkBroken)."""
        with _passing_failures():
            if not read_only:
                with self._database.step(), self._outbox.step(), self._undo.step():
                    yield
                return
            try:
                yield
            except sa_exc.SQLAlchemyError as exc:
                if db_api.is_transient(exc):
                    raise
                raise rpc.WorkBroken(f"{method} met a database error without a savepoint: "
                                     f"{mask_url(str(exc).splitlines()[0])}") from exc


def _retry_later(exc):
    """The RetryLater of a database failure that waiting may cure: the database away, or a lost race."""
    if isinstance(exc, db_api.DatabaseUnavailable):
        return rpc.RetryLater(str(exc))
    reason = mask_url(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0] if str(exc).strip()
                      else type(exc).__name__)
    return rpc.RetryLater(f"the database is unavailable: {reason}", soon=db_api.is_conflict(exc))


@contextlib.contextmanager
def _passing_failures():
    """Raise a database failure that is no message's fault (the database away, a deadlock)
    as RetryLater: connecting, committing or any statement of a batch."""
    try:
        yield
    except db_api.DatabaseUnavailable as exc:
        raise _retry_later(exc) from exc
    except sa_exc.SQLAlchemyError as exc:
        if db_api.is_transient(exc):
            raise _retry_later(exc) from exc
        raise
