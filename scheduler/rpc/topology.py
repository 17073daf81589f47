"""The exchanges and queues of the wire protocol, declared exactly as oslo.messaging does.

RabbitMQ refuses to re-declare an entity with other properties, so anything a
real oslo.messaging peer also declares (the control exchange, the shared topic
queues, the fanout exchange) must match its declaration argument for argument.
"""

from kombu import Exchange, Queue, binding

DEFAULT_EXCHANGE = Exchange("", type="direct", durable=False, auto_delete=False)


def topic_exchange(transport):
    rabbit = transport.conf.oslo_messaging_rabbit
    return Exchange(
        transport.conf.control_exchange,
        type="topic",
        durable=transport.durable,
        auto_delete=rabbit.amqp_auto_delete,
    )


def fanout_exchange(topic):
    # oslo.messaging: durable only with rabbit_transient_quorum_queue (off), auto-delete.
    return Exchange(f"{topic}_fanout", type="fanout", durable=False, auto_delete=True)


def routing_key(target):
    return f"{target.topic}.{target.server}" if target.server else target.topic


def shared_queue(transport, key, exclusive=False):
    """The queue ``<topic>`` or ``<topic>.<server>``, bound with its own name as key;
    with ``exclusive``, consumed by one process only (ExclusivelyConsumed)."""
    rabbit = transport.conf.oslo_messaging_rabbit
    arguments = {}
    if transport.is_rabbit and rabbit.rabbit_quorum_queue:
        arguments["x-queue-type"] = "quorum"
        arguments["x-dead-letter-exchange"] = dead_letter_exchange(transport).name
        if rabbit.delivery_limit:
            # A backstop: RabbitMQ counts every message in flight when a worker stops, not
            # only the one it was handling, which the workers' own count ends first.
            arguments["x-delivery-limit"] = 2 * rabbit.delivery_limit + 1
    return (ExclusivelyConsumed if exclusive else Queue)(
        key,
        exchange=topic_exchange(transport),
        routing_key=key,
        durable=transport.durable,
        auto_delete=rabbit.amqp_auto_delete,
        queue_arguments=arguments or None,
    )


class ExclusivelyConsumed(Queue):
    """A queue whose consumer asks the broker to be its only one (basic.consume with
    exclusive): while it consumes, RabbitMQ refuses any other with ACCESS_REFUSED.
    The queue itself is declared as usual. Virtual transports ignore the flag."""

    def consume(self, consumer_tag="", callback=None, no_ack=None, nowait=False, on_cancel=None):
        # Waits for the broker's answer (nowait=False): a refusal is raised here, not later.
        return self.channel.basic_consume(
            queue=self.name,
            no_ack=self.no_ack if no_ack is None else no_ack,
            consumer_tag=consumer_tag or "",
            callback=callback,
            nowait=False,
            arguments=self.consumer_arguments,
            on_cancel=on_cancel,
            exclusive=True,
        )


def _transient_arguments(transport):
    ttl = transport.conf.oslo_messaging_rabbit.rabbit_transient_queues_ttl
    if transport.is_rabbit and ttl:
        return {"x-expires": ttl * 1000}
    return None


def fanout_queue(transport, topic, name, also=()):
    """A process's own queue on ``<topic>_fanout`` (and on the fanout exchanges of the topics
    ``also``): auto-delete, expiring on rabbit."""
    if also:
        return Queue(
            name,
            bindings=[binding(fanout_exchange(t), routing_key=t) for t in (topic, *also)],
            durable=False,
            auto_delete=True,
            queue_arguments=_transient_arguments(transport),
        )
    return Queue(
        name,
        exchange=fanout_exchange(topic),
        routing_key=topic,
        durable=False,
        auto_delete=True,
        queue_arguments=_transient_arguments(transport),
    )


def shared_fanout_queue(transport, topic, message_ttl):
    """The queue ``<topic>`` on ``<topic>_fanout`` that the servers consuming it share (each
    message taken by one): transient, its messages dropped after ``message_ttl`` seconds, and
    the queue itself once unused for rabbit_transient_queues_ttl (on rabbit)."""
    arguments = None
    if transport.is_rabbit:
        arguments = dict(_transient_arguments(transport) or {}, **{"x-message-ttl": int(message_ttl * 1000)})
    return Queue(
        topic,
        exchange=fanout_exchange(topic),
        routing_key=topic,
        durable=False,
        auto_delete=False,
        queue_arguments=arguments,
    )


def reply_queue(transport, name):
    """A client's reply queue, on the default exchange. Not auto-delete (it must
    survive the listener reconnecting, as oslo's), but it expires when unused."""
    return Queue(
        name,
        exchange=DEFAULT_EXCHANGE,
        routing_key=name,
        durable=False,
        auto_delete=False,
        queue_arguments=_transient_arguments(transport),
    )


def dead_letter_exchange(transport):
    """``<control_exchange>.dlx``: where messages that cannot be processed go (fanout,
    so that whatever routing key they had, they reach the dead-letter queue)."""
    return Exchange(
        f"{transport.conf.control_exchange}.dlx",
        type="fanout",
        durable=transport.durable,
        auto_delete=False,
    )


def dead_letter_queue(transport):
    """``<control_exchange>.dead-letters``: kept for the operator, never consumed by Berth.

    A quorum queue with rabbit_quorum_queue, as the shared queues: every server declares
    it on each (re)connection, and on a cluster a classic durable queue cannot be declared
    while its one node is down, which would keep every server from consuming until that
    node is back. Bounded (:func:`dead_letter_bounds`): whoever can publish can fill it.
    """
    arguments = None
    if transport.is_rabbit:
        arguments = dead_letter_bounds(transport.conf)
        if transport.conf.oslo_messaging_rabbit.rabbit_quorum_queue:
            arguments["x-queue-type"] = "quorum"
    return Queue(
        dead_letter_queue_name(transport.conf),
        exchange=dead_letter_exchange(transport),
        routing_key="#",
        durable=transport.durable,
        auto_delete=False,
        queue_arguments=arguments,
    )


def dead_letter_queue_name(conf):
    return f"{conf.control_exchange}.dead-letters"


def dead_letter_bounds(conf):
    """The dead-letter queue's arguments on RabbitMQ: at most dead_letter_max_length messages
    and dead_letter_max_bytes of bodies, the oldest dropped first (the newest say what is
    going wrong now)."""
    rabbit = conf.oslo_messaging_rabbit
    return {"x-max-length": rabbit.dead_letter_max_length,
            "x-max-length-bytes": rabbit.dead_letter_max_bytes,
            "x-overflow": "drop-head"}
