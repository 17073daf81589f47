"""Publisher.batch(): a thread's publishes held until the batch ends, confirmed together."""

import threading

import pytest
from amqp.exceptions import MessageNacked

from scheduler import rpc
from scheduler.rpc import envelope, topology
from scheduler.rpc.amqp_fast import batch_confirms as confirms
from scheduler.rpc.consumer import ConnectionLost
from tests.unit.rpc.conftest import WAIT


@pytest.fixture
def inbox(transport, topic):
    """take() -> the ``n`` of every cast waiting on the topic's queue, in order (consumed)."""
    conn = transport.connection("test-inbox")
    queue = topology.shared_queue(transport, topic)(conn.default_channel)
    queue.declare()

    def take():
        found = []
        while (message := queue.get(no_ack=True)) is not None:
            found.append(envelope.unwrap(message.decode())["args"]["n"])
        return found

    yield take
    conn.release()


@pytest.fixture
def client(transport, topic):
    return rpc.RPCClient(transport, rpc.Target(topic=topic))


@pytest.fixture
def sends(transport, monkeypatch):
    """The lists of messages the publisher sent, one list per send."""
    sent = []
    real = transport.publisher._send

    def spy(messages):
        sent.append([m[0] for m in messages])
        real(messages)

    monkeypatch.setattr(transport.publisher, "_send", spy)
    return sent


def test_batch_sends_its_messages_in_order_when_it_ends(transport, client, inbox, sends):
    with transport.publisher.batch():
        for n in range(5):
            client.cast({}, "record", n=n)
        assert inbox() == []
        assert sends == []
    assert inbox() == [0, 1, 2, 3, 4]
    assert len(sends) == 1


def test_a_batch_confirmed_later_is_sent_again_when_its_confirms_do_not_come(transport, client, inbox):
    with transport.publisher.batch(confirm=False) as sent:
        client.cast({}, "record", n=1)
        client.cast({}, "record", n=2)
    assert inbox() == [1, 2]  # sent at the end of the block

    class Late:  # memory:// has no confirms: stands for those of the batch
        def wait(self, within=None):
            raise TimeoutError("2 of 2 messages not confirmed within 20 s")

    sent.ticket = (transport.publisher._conn, [Late()])
    sent.confirm()
    assert inbox() == [1, 2]
    sent.confirm()  # once confirmed, there is nothing left to do
    assert inbox() == []


class Unconfirmed:
    """The confirms of a batch, not come yet (memory:// has none): each wait is a slice."""

    def __init__(self):
        self.confirmed = threading.Event()

    def wait(self, within=None):
        return self.confirmed.wait(within)


def test_a_wait_for_confirms_with_idle_calls_it_every_slice_and_ends_when_it_raises(
        transport, client, inbox):
    """How a consume loop waiting for what its batch sent keeps checking its own connection:
    once that is lost, the wait ends at once, and the messages are not sent again from here."""
    with transport.publisher.batch(confirm=False) as sent:
        client.cast({}, "record", n=1)
    assert inbox() == [1]
    sent.ticket = (transport.publisher._conn, [Unconfirmed()])
    calls = []

    def idle():
        calls.append(1)
        if len(calls) == 3:
            raise ConnectionLost("ConnectionForced: Too many heartbeats missed")

    with pytest.raises(ConnectionLost):
        sent.confirm(idle=idle)
    assert len(calls) == 3
    assert inbox() == []


def test_a_wait_for_confirms_with_idle_calls_it_while_another_sender_holds_the_publisher(
        transport, client, inbox):
    with transport.publisher.batch(confirm=False) as sent:
        client.cast({}, "record", n=1)
    assert inbox() == [1]
    confirms = Unconfirmed()
    sent.ticket = (transport.publisher._conn, [confirms])
    calls = []

    def idle():
        calls.append(1)
        if len(calls) == 2:  # the other sender is done, and the broker confirms
            transport.publisher._lock.release()
            confirms.confirmed.set()

    transport.publisher._lock.acquire()  # another thread's send, waiting for its own confirms
    sent.confirm(idle=idle)
    assert len(calls) == 2
    assert inbox() == []  # confirmed: not sent again
    sent.confirm()
    assert len(calls) == 2


def test_the_end_of_a_batch_with_idle_calls_it_while_another_sender_holds_the_publisher(
        transport, client, inbox):
    calls = []

    def idle():
        calls.append(1)
        if len(calls) == 2:
            transport.publisher._lock.release()

    transport.publisher._lock.acquire()
    with transport.publisher.batch(confirm=False, idle=idle):
        client.cast({}, "record", n=1)
    assert len(calls) == 2
    assert inbox() == [1]


def test_a_batch_with_idle_calls_it_while_it_waits_out_the_reconnect_backoff(conf):
    """A consume loop's send that cannot reach the broker keeps checking its own connection
    between the attempts: once that is lost, the send ends at once, without using up its
    retries (its messages come again with the consume loop's next connection)."""
    conf.set_override("publish_retries", 5, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_interval", 1, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@127.0.0.1:1/")  # nothing listens there
    client = rpc.RPCClient(transport, rpc.Target(topic="t"))
    calls = []

    def idle():
        calls.append(1)
        if len(calls) == 3:
            raise ConnectionLost("ConnectionForced: Too many heartbeats missed")

    try:
        with pytest.raises(ConnectionLost), transport.publisher.batch(confirm=False, idle=idle):
            client.cast({}, "m", n=1)
    finally:
        transport.cleanup()
    assert len(calls) == 3  # every IDLE_EVERY of the first 1 s backoff, until it raised


def test_block_that_raises_sends_nothing(transport, client, inbox, sends):
    with pytest.raises(ValueError), transport.publisher.batch():
        client.cast({}, "record", n=1)
        raise ValueError("changed my mind")
    assert inbox() == []
    assert sends == []
    client.cast({}, "record", n=2)  # the thread publishes at once again
    assert inbox() == [2]


def test_nested_batch_joins_the_outer_one(transport, client, inbox, sends):
    with transport.publisher.batch():
        client.cast({}, "record", n=1)
        with transport.publisher.batch():
            client.cast({}, "record", n=2)
        assert inbox() == []
        client.cast({}, "record", n=3)
    assert inbox() == [1, 2, 3]
    assert len(sends) == 1


def test_nested_block_that_raises_drops_only_its_own_messages(transport, client, inbox):
    with transport.publisher.batch():
        client.cast({}, "record", n=1)
        with pytest.raises(ValueError), transport.publisher.batch():
            client.cast({}, "record", n=2)
            raise ValueError("not this one")
        client.cast({}, "record", n=3)
    assert inbox() == [1, 3]


def test_other_threads_publish_at_once_during_a_batch(transport, client, inbox):
    with transport.publisher.batch():
        client.cast({}, "record", n=1)
        other = threading.Thread(target=client.cast, args=({}, "record"), kwargs={"n": 2})
        other.start()
        other.join(WAIT)
        assert inbox() == [2]
    assert inbox() == [1]


def test_batch_that_cannot_be_sent_is_a_delivery_failure(conf):
    conf.set_override("publish_retries", 1, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@127.0.0.1:1/")  # nothing listens there
    client = rpc.RPCClient(transport, rpc.Target(topic="t"))
    try:
        with pytest.raises(rpc.MessageDeliveryFailure), transport.publisher.batch():
            client.cast({}, "m", n=1)
            client.cast({}, "m", n=2)  # nothing tried yet
    finally:
        transport.cleanup()


# -- confirms: delivery-tag bookkeeping and waiting, on a fake channel ---------------


class FakeConnection:
    """A py-amqp connection's transport; ``writes`` holds each write."""

    frame_max = 131072

    def __init__(self):
        self.writes = []
        self.transport = self
        self.frame_writer = None
        self.bytes_sent = 0

    def write(self, data):
        self.writes.append(bytes(data))


class FakeChannel:
    """Delivers one of ``frames`` ((tag, multiple, nack)) per wait(); None: nothing comes.
    ``acked_while_sending``: a tag acked (multiple) as soon as it is published."""

    def __init__(self, frames, acked_while_sending=None):
        self.tags = confirms.DeliveryTags()
        self._confirm_selected = False
        self.frames = list(frames)
        self.waits = 0
        self.connection = FakeConnection()
        self.acked_while_sending = acked_while_sending
        self.deferred = None

    def confirm_select(self):
        self.tags = confirms.DeliveryTags()

    def publish_all(self, messages):
        for _ in messages:
            self.tags.sent += 1
            if self.tags.sent == self.acked_while_sending:
                self.tags.settle(self.tags.sent, True)
        self.connection.write(b"".join(b"frames" for _ in messages))

    def wait(self, methods, timeout=None):
        self.waits += 1
        frame = self.frames.pop(0) if self.frames else None
        if frame is None:
            raise TimeoutError("timed out")
        self.tags.settle(*frame)


def publish(batch, count, timeout=5):
    for n in range(count):
        batch.publish(f"m{n}", exchange="x", routing_key="k", confirm_timeout=timeout)


def test_delivery_tags_settle_singly_and_up_to_a_tag():
    tags = confirms.DeliveryTags()
    tags.settle(2, False)
    tags.settle(3, False)
    assert tags.settled == 0
    tags.settle(1, False)
    assert tags.settled == 3
    tags.settle(5, False)
    tags.settle(4, True)
    assert tags.settled == 5
    tags.settle(8, True)
    tags.settle(7, False)  # late and covered already
    assert tags.settled == 8 and tags.nacked == 0
    tags.settle(9, False, nack=True)
    assert tags.settled == 9 and tags.nacked == 9


def test_batch_waits_until_every_message_is_confirmed():
    channel = FakeChannel([(2, True, False), (4, False, False), (3, False, False), (5, True, False)])
    batch = confirms.Batch(channel)
    publish(batch, 5)
    assert channel.tags.sent == 0 and not channel.connection.writes
    batch.flush()
    assert channel._confirm_selected
    assert channel.tags.settled == 5
    assert channel.waits == 4
    assert len(channel.connection.writes) == 1  # five publishes in one write


def test_discarded_batch_sends_nothing():
    channel = FakeChannel([])
    batch = confirms.Batch(channel)
    publish(batch, 3)
    batch.discard()
    batch.flush()
    assert channel.tags.sent == 0 and not channel.connection.writes


def test_batch_counts_from_the_single_publishes_before_it():
    # Two single publishes, acked, then a batch of three acked in one frame.
    channel = FakeChannel([(5, True, False)])
    channel._confirm_selected = True
    channel.tags.sent = channel.tags.settled = 2
    batch = confirms.Batch(channel)
    publish(batch, 3)
    batch.flush()
    assert channel.waits == 1 and channel.tags.settled == 5


def test_confirms_that_came_while_publishing_are_not_waited_for():
    channel = FakeChannel([], acked_while_sending=2)  # read by basic_publish's look at the socket
    batch = confirms.Batch(channel)
    publish(batch, 2)
    batch.flush()
    assert channel.waits == 0


def test_a_nack_fails_the_batch():
    channel = FakeChannel([(1, False, False), (2, False, True), (3, False, False)])
    batch = confirms.Batch(channel)
    publish(batch, 3)
    with pytest.raises(MessageNacked):
        batch.flush()


def test_missing_confirms_time_out():
    channel = FakeChannel([(1, True, False)])
    batch = confirms.Batch(channel)
    publish(batch, 3, timeout=0.5)
    with pytest.raises(TimeoutError) as info:
        batch.flush()
    assert "2 of 3 messages not confirmed within 0.5 s" in str(info.value)


def test_a_call_inside_a_batch_sends_its_request_at_once(transport, topic, client, inbox, start_server):
    class Echo:
        def echo(self, context, n):
            return n

    start_server([Echo()], topic_name=f"{topic}-echo")
    caller = rpc.RPCClient(transport, rpc.Target(topic=f"{topic}-echo"), timeout=WAIT)
    with transport.publisher.batch():
        client.cast({}, "record", n=1)
        assert caller.call({}, "echo", n=7) == 7
        assert inbox() == []  # the cast still waits for the end of the batch
    assert inbox() == [1]
