"""oslo.messaging's message envelope, version 2.0, and the messages inside it.

On the wire a body is ``{"oslo.version": "2.0", "oslo.message": "<json>"}``;
the inner JSON object is a request (``method``, ``args``, ``_context_*``, ...)
or a reply (``result``, ``failure``, ``ending``, ``_msg_id``). A failure is
itself a JSON string of ``{class, module, message, tb, args, kwargs}``.
"""

import itertools
import json
import os
import traceback as tb_module

from berth_contract import amqp_names as names
from berth_contract import versions
from scheduler.rpc.exceptions import InvalidEnvelope, RemoteError
from scheduler.utils.jsonutils import dumps, loads  # noqa: F401 (this module's too)

VERSION_KEY = "oslo.version"
MESSAGE_KEY = "oslo.message"
VERSION = "2.0"
CONTEXT_PREFIX = "_context_"
_REMOTE_POSTFIX = "_Remote"


def _new_id_source():
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = os.urandom(8).hex(), itertools.count(1)


_new_id_source()
os.register_at_fork(after_in_child=_new_id_source)


def new_id():
    """32 hex digits, as ``uuid4().hex``, unique without a system call each:
    a random prefix per process, then a counter."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


def wrap(msg):
    """The envelope around ``msg`` (a dict), as oslo's ``serialize_msg`` builds it."""
    return {VERSION_KEY: VERSION, MESSAGE_KEY: dumps(msg)}


def decode(message):
    """The JSON body of a kombu ``message``, decoded as oslo.messaging sent it.

    kombu's own decoder builds a JSON decoder for every message (for its
    ``__type__`` objects, no part of this protocol).
    """
    if message.content_type != "application/json":
        raise ValueError(f"content type {message.content_type!r} is not application/json")
    body = message.body
    if not isinstance(body, str):
        body = bytes(body)
        if message.content_encoding not in _RAW_ENCODINGS:
            body = body.decode(message.content_encoding)
    return loads(body)  # bytes: UTF-8, -16 or -32, as JSON allows


_RAW_ENCODINGS = (None, "", "binary", "ascii-8bit")  # kombu leaves these bytes as they are


def unwrap(body):
    """The inner message of an envelope; raises InvalidEnvelope for anything else."""
    if not isinstance(body, dict) or VERSION_KEY not in body or MESSAGE_KEY not in body:
        raise InvalidEnvelope(f"not an oslo.messaging envelope: {_preview(body)}")
    version = body[VERSION_KEY]
    if not _compatible(version):
        raise InvalidEnvelope(
            f"unsupported envelope version {_preview(version, 40)}; this server speaks {VERSION}"
        )
    if not isinstance(body[MESSAGE_KEY], str):
        raise InvalidEnvelope(f"envelope message is not a JSON string: {_preview(body[MESSAGE_KEY], 60)}")
    try:
        msg = loads(body[MESSAGE_KEY])
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidEnvelope(f"envelope message is not JSON: {_preview(str(exc), 120)}") from None
    if not isinstance(msg, dict):
        raise InvalidEnvelope(f"envelope message is not an object: {_preview(msg)}")
    return msg


def _compatible(version):
    """oslo's version_is_compatible: same major version, minor not newer than ours."""
    if not isinstance(version, str):
        return False
    major, _, minor = version.partition(".")
    mine_major, _, mine_minor = VERSION.partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        return False
    return int(major) == int(mine_major) and int(minor or 0) <= int(mine_minor)


def _preview(value, limit=200):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def request(method, args, ctxt=None, msg_id=None, reply_q=None, timeout=None, version=None):
    """The inner message of a cast (no ``msg_id``) or of a call; ``version``: of its API
    (None: 1.0)."""
    if isinstance(ctxt, dict) or ctxt is None:
        values = ctxt or {}
    else:  # a Context received by an endpoint, passed on
        values = ctxt.to_dict()
    msg = {
        "method": method,
        "args": args,
        "version": version or versions.DEFAULT,
        "namespace": None,
    }
    if msg_id is not None:
        msg.update({"_msg_id": msg_id, "_reply_q": reply_q, "_timeout": timeout})
    msg["_unique_id"] = new_id()
    for key, value in values.items():
        msg[CONTEXT_PREFIX + key] = value
    return msg


#: oslo.messaging names its reply queues reply_<hex>; anything else could make a
#: server publish its reply into another queue of the default exchange.
REPLY_QUEUE_PREFIX = "reply_"
MAX_NAME = 255


def reply_address(msg):
    """(msg_id, reply_q) of a call whose reply can be sent, else (None, None)."""
    msg_id, reply_q = msg.get("_msg_id"), msg.get("_reply_q")
    if unanswerable(msg) is None and reply_q is not None:
        return msg_id, reply_q
    return None, None


def unanswerable(msg):
    """Why the call ``msg`` asks for a reply that cannot be sent; None when it can be
    sent, or no reply is asked for (a cast)."""
    msg_id, reply_q = msg.get("_msg_id"), msg.get("_reply_q")
    if reply_q is None:
        return None  # a cast (an old-style _msg_id alone asks for no reply we can send)
    if not isinstance(msg_id, str) or not 0 < len(msg_id) <= MAX_NAME:
        return f"its _msg_id {_preview(msg_id, 60)} is not a string of 1 to {MAX_NAME} characters"
    if not isinstance(reply_q, str) or not reply_q.startswith(REPLY_QUEUE_PREFIX):
        return f"its _reply_q {_preview(reply_q, 60)} is not a reply queue ({REPLY_QUEUE_PREFIX}...)"
    why = names.problem(reply_q)
    if why is not None:
        return f"its _reply_q {_preview(names.printable(reply_q), 60)} is {why}"
    return None


def parse_request(msg):
    """Split an inner request into (method, args, context values, msg_id, reply_q).

    Raises InvalidEnvelope unless ``method`` is a name (whether a server has
    it is the Dispatcher's to say) and ``args`` an object whose keys are
    argument names. ``msg_id`` and ``reply_q`` are None for a cast, and for a
    call whose reply cannot be sent (see unanswerable).
    """
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidEnvelope(f"message has no method: {_preview(msg)}")
    if len(method) > MAX_NAME:
        raise InvalidEnvelope(f"message method name is too long: {_preview(method, 60)}")
    args = msg.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InvalidEnvelope(f"message args are not an object: {_preview(args)}")
    for key in args:
        if not key.isidentifier():
            raise InvalidEnvelope(f"message args: {_preview(key, 60)} is not an argument name")
    msg_id, reply_q = reply_address(msg)
    if msg.get("_reply_q") is None:
        msg_id = msg.get("_msg_id")
        if msg_id is not None and not isinstance(msg_id, str):
            raise InvalidEnvelope("message _msg_id is not a string")
    values = {
        key[len(CONTEXT_PREFIX) :]: value for key, value in msg.items() if key.startswith(CONTEXT_PREFIX)
    }
    return method, args, values, msg_id, reply_q


def version_of(msg):
    """The version of its API an inner request asks for: 1.0 when it names none, as
    oslo.messaging reads it; raises InvalidEnvelope for one that is not a version."""
    version = msg.get("version")
    if version is None or version == versions.DEFAULT:
        return versions.DEFAULT
    try:
        versions.parse(version)
    except ValueError as exc:
        raise InvalidEnvelope(f"message version: {exc}") from None
    return version


#: The key of a bundle's inner message: the casts it carries (see bundle).
BUNDLE_KEY = "casts"


def bundle(casts, version):
    """The inner message of a bundle: several casts (inner requests, as :func:`request`
    makes them) in one message, each to be handled as if it had come alone; ``version``:
    of the API whose servers take bundles."""
    return {BUNDLE_KEY: list(casts), "version": version, "_unique_id": new_id()}


def bundled_casts(msg):
    """The casts of the bundle ``msg``, or None when it is a message of its own; raises
    InvalidEnvelope for a bundle that carries anything but a list of objects."""
    if BUNDLE_KEY not in msg or "method" in msg:
        return None
    casts = msg[BUNDLE_KEY]
    if not isinstance(casts, list) or not casts:
        raise InvalidEnvelope(f"a bundle's casts are not a non-empty list: {_preview(casts)}")
    for cast in casts:
        if not isinstance(cast, dict):
            raise InvalidEnvelope(f"a bundle's cast is not an object: {_preview(cast)}")
    return casts


def reply(msg_id, result=None, failure=None, ending=True):
    """The inner message of a reply; ``failure`` is a :func:`serialize_failure` string."""
    return {
        "result": result,
        "failure": failure,
        "ending": ending,
        "_msg_id": msg_id,
        "_unique_id": new_id(),
    }


def serialize_failure(exc):
    """oslo's remote exception format: a JSON string of class, module, message, tb, args."""
    cls_name = type(exc).__name__
    mod_name = type(exc).__module__
    if cls_name.endswith(_REMOTE_POSTFIX) and mod_name.endswith(_REMOTE_POSTFIX):
        cls_name = cls_name[: -len(_REMOTE_POSTFIX)]
        mod_name = mod_name[: -len(_REMOTE_POSTFIX)]
    kwargs = getattr(exc, "kwargs", None)
    data = {
        "class": cls_name,
        "module": mod_name,
        "message": str(exc),
        "tb": tb_module.format_exception(type(exc), exc, exc.__traceback__),
        "args": list(exc.args),
        "kwargs": kwargs if isinstance(kwargs, dict) else {},
    }
    try:
        return dumps(data)
    except (TypeError, ValueError):
        data["args"] = [repr(arg) for arg in exc.args]
        data["kwargs"] = {}
        return dumps(data)


def failure_to_error(failure):
    """A RemoteError from the ``failure`` field of a reply (oslo's or ours)."""
    try:
        data = json.loads(str(failure))
    except ValueError:
        return RemoteError("RemoteError", str(failure), "")
    if not isinstance(data, dict):
        return RemoteError("RemoteError", str(data), "")
    trace = data.get("tb") or []
    if isinstance(trace, list):
        trace = "".join(line if line.endswith("\n") else line + "\n" for line in trace)
    return RemoteError(data.get("class") or "Exception", data.get("message", ""), str(trace))
