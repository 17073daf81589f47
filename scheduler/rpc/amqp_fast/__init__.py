"""Berth's fast paths through py-amqp and kombu: the only code that uses their private names.

Each module says what it makes faster; the names it needs, which neither
library promises to keep, are listed in its ``PRIVATE_NAMES``:

``buffered_reads``
    reads frames from a buffer filled 64 KiB at a time. Swaps the
    ``__class__`` of a connected ``amqp.transport.TCPTransport``, uses its
    ``_read_buffer`` slot and ``amqp.transport._UNAVAIL``, and hooks
    ``kombu.Connection._establish_connection``.
``publish_frames``
    frames a basic.publish as py-amqp does, the properties serialized once per
    distinct set: ``amqp.basic_message.Message._serialize_properties``.
``deliveries``
    hands a delivery to its consumer without py-amqp's generic method
    dispatch: replaces ``Connection.on_inbound_frame`` with a py-amqp frame
    handler of its own callback, and reads ``amqp.Channel._callbacks`` and
    ``_pending``.
``batch_confirms``
    sends a batch of publishes in one write and waits once for their
    confirms: overrides ``amqp.Channel._basic_publish``, ``_on_basic_ack`` and
    ``_on_basic_nack``, and sets ``_confirm_selected``.

They were read against, and their unit tests pass on, amqp 5.2.0, 5.3.1,
5.4.0 and 5.4.2; the RabbitMQ messaging tests pass with 5.2.0 and 5.4.2.
They are taken only with an amqp of TESTED_AMQP (setup.cfg requires its lower
bound only). With ``[oslo_messaging_rabbit]
amqp_fast_paths = false``, or an amqp outside that range, or a name missing,
Berth does the same work through the libraries' public API (``usable``).
"""

import logging

import amqp
from oslo_config import cfg

from scheduler.utils import pins

LOG = logging.getLogger(__name__)

TESTED_AMQP = ">=5.2,<5.5"  # checked against; setup.cfg requires the lower bound only

_verdict = None  # why the fast paths cannot be used ("" if they can), once checked


def usable(conf: cfg.ConfigOpts) -> bool:
    """Whether Berth takes the fast paths: the option is on and the installed amqp
    has what they need. Says once per process, as a warning, why not if it has not."""
    global _verdict
    if not conf.oslo_messaging_rabbit.amqp_fast_paths:
        return False
    if _verdict is None:
        _verdict = problem()
        if _verdict:
            LOG.warning("Not using the amqp fast paths ([oslo_messaging_rabbit] amqp_fast_paths): %s; "
                        "using py-amqp's and kombu's public API instead, which is slower. Set "
                        "amqp_fast_paths = false to say so, or install amqp%s.", _verdict, TESTED_AMQP)
    return not _verdict


def problem(version: str = amqp.__version__) -> str:
    """Why the fast paths cannot be used with amqp ``version`` as installed ("" if they can)."""
    if not pins.admits(TESTED_AMQP, version):
        return f"they were written for amqp{TESTED_AMQP}, and amqp {version} is installed"
    from scheduler.rpc.amqp_fast import batch_confirms, buffered_reads, deliveries, publish_frames

    missing = [f"{_name(owner)}.{name}"
               for module in (buffered_reads, publish_frames, batch_confirms, deliveries)
               for owner, name in module.PRIVATE_NAMES if not _has(owner, name)]
    if missing:
        return f"amqp {version} has no {', '.join(missing)}"
    return ""


def _name(owner) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}"
    return owner.__name__


def _has(owner, name) -> bool:
    """Whether ``owner`` (a module or class) has ``name``, or the class's ``__init__`` sets it."""
    if hasattr(owner, name):
        return True
    if not isinstance(owner, type):
        return False
    return any(name in getattr(getattr(vars(cls).get("__init__"), "__code__", None), "co_names", ())
               for cls in owner.__mro__)
