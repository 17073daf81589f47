"""A RabbitMQ channel that can publish a batch and then wait once for all its confirms.

kombu's ``Producer.batch()`` hands its messages, serialized as ``publish()``
would, to ``channel.create_publish_batch()``; this channel sends them without
waiting, in one write, and makes the batch's ``flush()`` wait until the broker
confirmed them. py-amqp's own ``basic_publish`` looks at the socket before
every message and, in confirm mode, waits for each one's confirm.
The channel is opened on the connection kombu made (not through a kombu
transport class, which a failover to the next host would replace).
"""

import time

from amqp import Channel as AmqpChannel
from amqp import spec
from amqp.exceptions import MessageNacked, RecoverableConnectionError
from kombu.transport import pyamqp

from scheduler.rpc.amqp_fast import publish_frames
from scheduler.rpc.exceptions import InvalidName

# Not public in py-amqp; checked at start-up (scheduler.rpc.amqp_fast.usable).
PRIVATE_NAMES = (
    (AmqpChannel, "_basic_publish"),  # every publish, basic_publish_confirm's too: counted
    (AmqpChannel, "_on_basic_ack"),  # the broker's confirms: counted
    (AmqpChannel, "_on_basic_nack"),
    (AmqpChannel, "_confirm_selected"),  # set once confirm.select was sent
)


class DeliveryTags:
    """The delivery tags of a channel in confirm mode: sent, settled and nacked.

    After ``confirm.select`` the broker numbers the channel's messages 1, 2, ...
    and acks (or nacks) each number, or every number up to one (``multiple``).
    """

    def __init__(self):
        self.sent = 0  # the tag of the last message sent
        self.settled = 0  # every tag up to this one is acked or nacked
        self.nacked = 0  # the highest tag nacked
        self._singles = set()  # tags settled one by one above ``settled``

    def settle(self, tag, multiple, nack=False):
        if nack:
            self.nacked = max(self.nacked, tag)
        if multiple:
            self.settled = max(self.settled, tag)
            if self._singles:
                self._singles = {t for t in self._singles if t > self.settled}
        elif tag > self.settled:
            self._singles.add(tag)
        while self.settled + 1 in self._singles:
            self.settled += 1
            self._singles.remove(self.settled)


class Channel(pyamqp.Channel):
    """A py-amqp channel that counts its publishes (single ones with
    ``basic_publish_confirm`` too) and the broker's confirms."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tags = DeliveryTags()
        self.deferred = None  # a list: batches flushed append their Pending here instead of waiting

    def confirm_select(self, nowait=False):
        self.tags = DeliveryTags()
        return super().confirm_select(nowait)

    def _basic_publish(self, *args, **kwargs):
        result = super()._basic_publish(*args, **kwargs)
        if self._confirm_selected:
            self.tags.sent += 1
        return result

    def basic_publish_confirm(self, *args, **kwargs):
        """Publish one message and wait for its own confirm.

        py-amqp's returns after the first ack or nack to come, which may be one
        of an earlier batch's deferred confirms: the message would count as
        confirmed while the broker may not have it yet.
        """
        confirm_timeout = kwargs.pop("confirm_timeout", None)
        if not self._confirm_selected:
            self._confirm_selected = True
            self.confirm_select()
        result = self._basic_publish(*args, **kwargs)
        tag = self.tags.sent
        Pending(self, tag, tag, confirm_timeout or kwargs.get("timeout")).wait()
        return result

    def _on_basic_ack(self, delivery_tag, multiple):
        self.tags.settle(delivery_tag, multiple)
        super()._on_basic_ack(delivery_tag, multiple)

    def _on_basic_nack(self, delivery_tag, multiple):
        self.tags.settle(delivery_tag, multiple, nack=True)
        super()._on_basic_nack(delivery_tag, multiple)

    def publish_all(self, messages):
        """Send ``messages`` ([(message, publish kwargs)]) in one write.

        py-amqp's ``basic_publish`` looks at the socket before every message,
        for a ``connection.blocked`` the broker may have sent; here it looks once.
        """
        if not self.connection:
            raise RecoverableConnectionError("basic_publish: connection closed")
        try:
            self.connection.drain_events(timeout=0)
        except TimeoutError:
            pass
        connection = self.connection
        chunks = []
        for message, kwargs in messages:
            body = message.body
            if isinstance(body, str):
                body = body.encode(message.properties.setdefault("content_encoding", "utf-8"))
            frames = publish_frames.publish_frames(
                self.channel_id, connection.frame_max, kwargs.get("exchange", ""),
                kwargs.get("routing_key", ""), body, publish_frames.serialized_properties(message.properties),
                kwargs.get("mandatory", False), kwargs.get("immediate", False))
            if frames is None:
                raise InvalidName("an exchange or routing key over 255 bytes")
            chunks += frames
        connection.transport.write(b"".join(chunks))
        connection.bytes_sent += len(messages)
        if self._confirm_selected:
            self.tags.sent += len(messages)

    def create_publish_batch(self, max_size):
        return Batch(self)


class Batch:
    """Messages held until ``flush()``, which sends them on ``channel`` in one
    write and waits for all their confirms; or, when the channel defers its
    confirms, appends their Pending to ``channel.deferred``.

    Raises MessageNacked when the broker refused any of them, TimeoutError
    when they are not all confirmed within the ``confirm_timeout`` of the
    publishes. ``discard()`` drops what was not flushed.
    """

    def __init__(self, channel):
        self.channel = channel
        self.messages = []
        self.timeout = None

    def publish(self, message, confirm_timeout=None, **kwargs):
        self.messages.append((message, kwargs))
        self.timeout = confirm_timeout

    def flush(self):
        if not self.messages:
            return
        channel = self.channel
        if not channel._confirm_selected:
            channel._confirm_selected = True
            channel.confirm_select()
        messages, self.messages = self.messages, []
        channel.publish_all(messages)
        pending = Pending(channel, channel.tags.sent - len(messages) + 1, channel.tags.sent, self.timeout)
        if channel.deferred is not None:
            channel.deferred.append(pending)
        else:
            pending.wait()

    def discard(self):
        self.messages = []

    def close(self):
        pass


class Pending:
    """The confirms of messages ``first`` to ``last`` sent on ``channel``, to wait for:
    ``timeout`` seconds at most from now (None: for ever)."""

    def __init__(self, channel, first, last, timeout):
        self.channel, self.first, self.last, self.timeout = channel, first, last, timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def wait(self, within=None):
        """Return True once all are confirmed, False when ``within`` seconds passed first
        (wait again later); raise MessageNacked, or TimeoutError once ``timeout`` is over."""
        tags, first, last = self.channel.tags, self.first, self.last
        until = None if within is None else time.monotonic() + within
        while tags.settled < last:
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                raise TimeoutError(f"{last - tags.settled} of {last - first + 1} messages "
                                   f"not confirmed within {self.timeout} s")
            if until is not None and now >= until:
                return False
            ends = [end for end in (self.deadline, until) if end is not None]
            try:
                # Returns after one ack or nack, which the channel has counted.
                self.channel.wait([spec.Basic.Ack, spec.Basic.Nack],
                                  timeout=min(ends) - now if ends else None)
            except TimeoutError:
                continue  # the loop says which end it was
        if tags.nacked >= first:
            raise MessageNacked(f"the broker refused messages of a batch of {last - first + 1}")
        return True
