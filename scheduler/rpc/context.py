"""The request context an endpoint method receives as its first argument, and the
request id that ties together the log lines of one request in every process.

Every message a server takes carries a ``request_id`` in its context (one in
the form oslo.context makes, ``req-<uuid4>``; a message without one, or with
anything else, gets a new one at receipt). While a request is handled, it is
the thread's current oslo.context RequestContext, which oslo.log prints on
every line; whoever passes the context on (``Context.to_dict()``) passes the
id on with it.
"""

import contextlib
import logging
import os
import re

from oslo_context import context as oslo_context

from berth_contract import amqp_names as names
from berth_contract import versions

LOG = logging.getLogger(__name__)

REQUEST_ID = "request_id"
_REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_MAX_PROJECT = 255


def new_request_id():
    """A request id in the form oslo.context makes: ``req-<uuid4>``.

    uuid.uuid4()'s bits and text, without building a UUID object (a third of the time, once
    per message that comes without a request id)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    hexa = raw.hex()
    return f"req-{hexa[:8]}-{hexa[8:12]}-{hexa[12:16]}-{hexa[16:20]}-{hexa[20:]}"


def is_request_id(value):
    return isinstance(value, str) and _REQUEST_ID.match(value) is not None


def ensure_request_id(values):
    """Give the context dict ``values`` a request id of its own unless it carries one; returns it."""
    given = values.get(REQUEST_ID)
    if not is_request_id(given):
        values[REQUEST_ID] = new_request_id()
        if given is not None:
            LOG.debug("Request id %s is not of the form req-<uuid>: %s instead",
                      names.bounded(repr(given), 80), values[REQUEST_ID])
    return values[REQUEST_ID]


class Context:
    """The caller's ``ctxt`` dict (``values``) plus what the broker says about the message.

    ``user_id`` is the AMQP ``user_id`` property: RabbitMQ checks it against the
    publishing connection's user, so it can be trusted on rabbit:// (it is None on
    the other transports and when the publisher did not set it). ``redelivered``
    tells that the broker delivered the message before without an ack. A call
    also carries ``msg_id`` and ``reply_q``; both are None for a cast, and for a
    call whose reply cannot be sent, which says why in ``unanswerable``. ``version``
    is the version of its API the message asks for (berth_contract.versions); ``exchange`` the
    exchange it was published to, as the broker says (None: not said).
    """

    def __init__(self, values=None, user_id=None, redelivered=False, msg_id=None, reply_q=None,
                 unanswerable=None, version=versions.DEFAULT, exchange=None):
        self.values = dict(values or {})
        self.user_id = user_id
        self.redelivered = bool(redelivered)
        self.msg_id = msg_id
        self.reply_q = reply_q
        self.unanswerable = unanswerable
        self.version = version
        self.exchange = exchange
        self._request = None  # its oslo.context RequestContext, once made current

    @property
    def request_id(self):
        return self.values.get(REQUEST_ID)

    def to_dict(self):
        """The caller's context values, as a ``ctxt`` to pass on to another call."""
        return dict(self.values)

    def __getitem__(self, key):
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    def __repr__(self):
        return (
            f"Context(values={self.values!r}, user_id={self.user_id!r}, "
            f"redelivered={self.redelivered!r}, msg_id={self.msg_id!r})"
        )


class _NoRequest(oslo_context.RequestContext):
    """What a thread holds between requests: oslo.log, finding it false, prints no request."""

    def __bool__(self):
        return False


_NO_REQUEST = _NoRequest(request_id="-", overwrite=False)


def _values(context):
    if isinstance(context, Context):
        return context.values
    return context if isinstance(context, dict) else {}


def _make_current(context):
    if isinstance(context, Context) and context._request is not None:
        context._request.update_store()
        return
    values = _values(context)
    project = values.get("project_id")
    if not (isinstance(project, str) and len(project) <= _MAX_PROJECT and not names.CONTROL.search(project)):
        project = None
    request_id = values.get(REQUEST_ID)
    if not is_request_id(request_id):
        request_id = values[REQUEST_ID] = new_request_id()  # passed on with the context from now
    request = oslo_context.RequestContext(request_id=request_id, project_id=project, overwrite=True)
    if isinstance(context, Context):
        context._request = request


def _restore(previous):
    (previous or _NO_REQUEST).update_store()


@contextlib.contextmanager
def handling(context):
    """Make the request of ``context`` (a Context or a ctxt dict) this thread's current one
    while the block runs, and the one before it again after. A context without a request
    id is given a new one (e.g. work a periodic task starts)."""
    previous = oslo_context.get_current()
    _make_current(context)
    try:
        yield
    finally:
        _restore(previous)


def each_request(items, context_of=lambda item: item[0]):
    """Yield ``items``, each with its request (``context_of(item)``) the thread's current one
    while the loop's body handles it; the one before the loop again once the loop ends."""
    previous = oslo_context.get_current()
    try:
        for item in items:
            _make_current(context_of(item))
            yield item
    finally:
        _restore(previous)


def request_id_of(context):
    """The request id ``context`` (a Context or a ctxt dict) carries, or None."""
    request_id = _values(context).get(REQUEST_ID)
    return request_id if is_request_id(request_id) else None


def current_request_id():
    """The request id of this thread's current request, or None."""
    current = oslo_context.get_current()
    return current.request_id if current else None
