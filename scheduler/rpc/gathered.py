"""Casts of one method from many threads, sent together: a group commit.

The first caller publishes its cast at once. While that publish waits for the broker's
confirm, the casts of other callers gather; when it is confirmed, the first of them to
have come publishes what gathered (up to BUNDLE_CASTS) as one bundle, and so on. Each
caller returns once the message that carried its cast is confirmed, and raises what
publishing that message raised: the guarantee of RPCClient.cast, at the broker's cost of
a message per publish in flight rather than per cast.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from scheduler.rpc.client import BUNDLE_CASTS, Context, RPCClient
from scheduler.rpc.exceptions import MessageDeliveryFailure


class _Cast:
    __slots__ = ("ctxt", "kwargs", "turn", "done", "error")

    def __init__(self, ctxt: Context, kwargs: dict[str, Any]):
        self.ctxt = ctxt
        self.kwargs = kwargs
        self.turn = threading.Event()  # set once sent, or once this caller is to send
        self.done = False
        self.error: Exception | None = None


class GatheredCasts:
    """``method`` cast through ``client`` (which must not fan out), from any number of threads
    (green or native): bundles of the API version ``bundled_from``, which the client's cap must
    let it send."""

    def __init__(self, client: RPCClient, method: str, bundled_from: str, limit: int = BUNDLE_CASTS):
        if client.target.fanout:
            raise ValueError("casts to a fanout target are not bundled; use cast")
        if not client.can_send_version(bundled_from):
            raise ValueError(f"the cap {client.version_cap} of {client.api or 'the'} API is below "
                             f"{bundled_from}: its servers may not read bundles")
        if limit < 1:
            raise ValueError(f"a bundle's limit must be 1 or more, not {limit}")
        self.client = client
        self.method = method
        self.bundled_from = bundled_from
        self.limit = limit
        self._lock = threading.Lock()
        self._waiting: list[_Cast] = []  # gathered, in the order they came
        self._sending = False  # a publish is in flight, or the first of _waiting is to send

    def gathered(self) -> int:
        """How many casts wait for a publish in flight to be confirmed."""
        with self._lock:
            return len(self._waiting)

    def cast(self, ctxt: Context, **kwargs: Any) -> None:
        """Send ``method(**kwargs)``: returns once the broker confirmed the message that carries
        it, raises what publishing that message raised. Inside the publisher's ``batch()`` it goes
        with the batch, as RPCClient.cast sends it: another thread's bundle would not wait for the
        batch's end, nor be dropped with it."""
        if self.client.transport.publisher.batching():
            self.client.cast(ctxt, self.method, **kwargs)
            return
        with self._lock:
            alone = not self._sending
            if alone:
                self._sending = True
            else:
                cast = _Cast(ctxt, kwargs)
                self._waiting.append(cast)
        if alone:  # nothing in flight: published at once, as RPCClient.cast publishes it
            try:
                self.client.cast(ctxt, self.method, **kwargs)
            finally:
                self._hand_on()
            return
        try:
            cast.turn.wait()
        except BaseException:
            self._leave(cast)
            raise
        sender = not cast.done
        if sender:
            self._send()
        error = cast.error
        if error is None:
            return
        own = error if sender else _copy(error)
        if own is error:
            raise error
        raise own from error

    def _hand_on(self) -> None:
        """Once a publish is done: the turn to send passes to the first cast gathered meanwhile."""
        with self._lock:  # the turn given under the lock: a caller leaving sees whether it had it
            following = self._waiting[0] if self._waiting else None
            self._sending = following is not None
            if following is not None:
                following.turn.set()

    def _leave(self, cast: _Cast) -> None:
        """A caller interrupted while it waited: its cast is not sent if it was not taken yet,
        and the turn to send passes on if it was its."""
        with self._lock:
            if cast.done or cast not in self._waiting:
                return  # taken: it goes with its bundle
            self._waiting.remove(cast)
            if not cast.turn.is_set():
                return
        self._hand_on()

    def _send(self) -> None:
        with self._lock:
            casts = self._waiting[:self.limit]
            del self._waiting[:self.limit]
        interrupted = None
        try:
            outcomes = self.client.cast_apart(self.method, [(c.ctxt, c.kwargs) for c in casts],
                                              self.bundled_from)
        except Exception as exc:
            outcomes = [exc] * len(casts)
        except BaseException as exc:  # the sending thread is stopped: what it carried may not be sent
            interrupted = exc
            stopped = MessageDeliveryFailure(f"the thread publishing it was stopped ({exc!r})")
            outcomes = [stopped] * len(casts)
        with self._lock:
            for cast, outcome in zip(casts, outcomes, strict=True):
                cast.error = outcome
                cast.done = True
        for cast in casts:
            cast.turn.set()
        self._hand_on()
        if interrupted is not None:
            raise interrupted


def _copy(error: Exception) -> Exception:
    """``error`` for one more caller to raise: a copy, so that each has its own traceback, or
    ``error`` itself when it cannot be copied."""
    try:
        return copy.copy(error)
    except Exception:
        return error
