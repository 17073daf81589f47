"""Dead-lettering: messages a server cannot process, kept for the operator.

A cast that is malformed, too large, names an unknown method, has bad
arguments, is refused by its endpoint or makes it fail is republished,
unchanged, to the fanout exchange ``<control_exchange>.dlx``, whose queue
``<control_exchange>.dead-letters`` Berth never consumes, with why in its
headers; then the original is acked. The same names work on rabbit://,
filesystem:// and memory://. On RabbitMQ with ``rabbit_quorum_queue`` the
exchange is also the shared queues' ``x-dead-letter-exchange``.

Headers: ``x-berth-reason`` (class: message), ``x-berth-method`` (when the
message could be read that far), ``x-berth-exchange`` and
``x-berth-routing-key`` (where it was published), ``x-berth-queue`` (the
server that refused it), ``x-berth-request-id`` (the request it came with, as
the log line about it says) and, for a body larger than ``max_message_bytes``,
``x-berth-truncated`` (its full length: only the first ``KEEP_BYTES`` are kept).

Each refusal is logged as one warning line, no traceback; identical reasons
are logged once a minute with how many were suppressed (:class:`LogOnce`).
"""

import json
import logging
import re
import threading

from amqp import exceptions as amqp_exceptions

from berth_contract import amqp_names as names
from scheduler.rpc import topology
from scheduler.rpc.context import current_request_id
from scheduler.status_page.recent import Recent
from scheduler.telemetry import rpc_metrics
from scheduler.utils.log_once import LogOnce

LOG = logging.getLogger(__name__)

REASON = "x-berth-reason"
METHOD = "x-berth-method"
EXCHANGE = "x-berth-exchange"
ROUTING_KEY = "x-berth-routing-key"
QUEUE = "x-berth-queue"
REQUEST_ID = "x-berth-request-id"
TRUNCATED = "x-berth-truncated"

#: What is kept of a body too large to accept.
KEEP_BYTES = 64 * 1024
MAX_REASON = 1000


def reason_of(exc):
    """``Class: message`` of ``exc``, on one line, bounded, valid text whatever it quotes."""
    text = " ".join(names.printable(exc).split())
    reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


_VARIABLE = re.compile(r"'[^']*'|\"[^\"]*\"|\b[0-9a-f]{8}-[0-9a-f-]{27}\b|0x[0-9a-f]+|\d+")


def log_key(method, exc):
    """What makes two refusals 'the same': method, class and message without its values."""
    explicit = getattr(exc, "log_key", None)
    if explicit is not None:
        return explicit
    return (method, type(exc).__name__, _VARIABLE.sub("_", str(exc))[:200])


_said_unbounded = set()
_said_lock = threading.Lock()


def _said_once(vhost, name):
    """Whether the dead-letter queue's declaration was already spoken of by this process."""
    with _said_lock:
        if (vhost, name) in _said_unbounded:
            return True
        _said_unbounded.add((vhost, name))
        return False


def _say_classic(vhost, name):
    """Once per process and queue: the dead-letter queue is classic where quorum was asked."""
    if _said_once(vhost, name):
        return
    LOG.warning(
        "The dead-letter queue %s was declared as a classic queue (by an earlier Berth), not as "
        "the quorum queue [oslo_messaging_rabbit] rabbit_quorum_queue asks for; it is used as it "
        "is, but on a cluster no server can declare it, and so none consumes, while its node is "
        "down. Delete it, with its dead letters, and Berth declares it a quorum queue again: "
        "rabbitmqadmin -V %s delete queue name=%s",
        name, vhost, name,
    )


def _say_unbounded(conf, vhost, name, exc):
    """Once per process and queue: the dead-letter queue has no bound, and how to give it one."""
    if _said_once(vhost, name):
        return
    # The policy's keys are the arguments' without "x-".
    policy = json.dumps({key[2:]: value for key, value in topology.dead_letter_bounds(conf).items()},
                        separators=(",", ":"))
    LOG.warning(
        "The dead-letter queue %s was declared without the bounds [oslo_messaging_rabbit] "
        "dead_letter_max_length and dead_letter_max_bytes give it (by an earlier Berth, or with "
        "other values: %s); it is used as it was declared, which may keep every dead letter. To "
        "bound it, apply a policy (where a policy and the queue's own arguments both bound it, "
        "the lower bound holds; if a policy bounds it already, nothing more is needed): "
        "rabbitmqctl set_policy -p %s %s '^%s$' '%s' --apply-to queues; or delete it, with its "
        "dead letters, and Berth declares it bounded again: rabbitmqadmin -V %s delete queue name=%s",
        name, reason_of(exc), vhost, name, name.replace(".", r"\."), policy, vhost, name,
    )


class DeadLetters:
    """Republishes refused messages of one server to the dead-letter exchange."""

    def __init__(self, transport, label):
        self.transport = transport
        self.label = label
        self.logs = LogOnce(LOG)
        self.count = 0
        #: The latest letters (time, method, reason), for the status page.
        self.recent = Recent()

    def declare(self, channel):
        """Declare the exchange and its queue (on each (re)connection of a server).

        On RabbitMQ the queue is declared on a channel of its own: a queue an earlier Berth
        declared without the bounds, or classic where it is now quorum, is refused
        (PRECONDITION_FAILED, which closes the channel), and is then used as it is, the
        server consuming on ``channel`` as ever."""
        queue = topology.dead_letter_queue(self.transport)
        if not self.transport.is_rabbit:
            queue(channel).declare()
            return
        own = channel.connection.channel()
        try:
            queue(own).declare()
        except amqp_exceptions.PreconditionFailed as exc:
            if "inequivalent arg" not in str(exc):
                raise
            vhost = getattr(channel.connection, "virtual_host", None) or "/"
            if "'x-queue-type'" in str(exc):
                _say_classic(vhost, queue.name)
            else:
                _say_unbounded(self.transport.conf, vhost, queue.name, exc)
        finally:
            if getattr(own, "is_open", False):
                own.close()

    def send(self, message, exc, method=None):
        """Republish ``message`` with the reason ``exc`` and the current request's id; log it
        once. Raises if the broker cannot take it (the caller must not ack the original then)."""
        reason = reason_of(exc)
        delivery = message.delivery_info or {}
        body = message.body
        headers = {
            REASON: reason,
            METHOD: names.printable(method or ""),
            # As the broker gave them: not necessarily valid names, so escaped.
            EXCHANGE: names.printable(delivery.get("exchange") or ""),
            ROUTING_KEY: names.printable(delivery.get("routing_key") or ""),
            QUEUE: self.label,
        }
        request_id = current_request_id()
        if request_id:
            headers[REQUEST_ID] = request_id
        if body is not None and len(body) > self.transport.conf.oslo_messaging_rabbit.max_message_bytes:
            headers[TRUNCATED] = len(body)
            body = body[:KEEP_BYTES]
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogateescape")
        self.transport.publisher.publish(
            body if body is not None else b"",
            topology.dead_letter_exchange(self.transport),
            self.label,  # a fanout exchange: the key only has to be a valid name
            headers=headers,
            content_type=names.bounded(message.content_type or "application/octet-stream"),
            content_encoding=names.bounded(message.content_encoding or "binary"),
        )
        self.count += 1
        rpc_metrics.DEAD_LETTERS.labels(self.label, type(exc).__name__).inc()
        self.recent.add(queue=self.label, method=headers[METHOD], reason=reason)
        level = logging.WARNING if getattr(exc, "invalid_input", False) else logging.ERROR
        self.logs.log(
            log_key(method, exc),
            level,
            "Dead-lettered a %s on %s (routing key %s): %s",
            f"cast of {method}" if method else "message",
            self.label,
            headers[ROUTING_KEY] or "-",
            reason,
        )
