"""The dead-letter queue's type on RabbitMQ: a quorum queue with rabbit_quorum_queue, so
that on a cluster the servers can declare it, and consume, while one node is down."""

import logging

import pytest
from amqp import exceptions as amqp_exceptions

from scheduler import rpc
from scheduler.rpc import deadletter, topology

URL = "rabbit://u:p@127.0.0.1:5701,u:p@127.0.0.1:5702,u:p@127.0.0.1:5703/vh"  # never reached


@pytest.fixture
def rabbit(conf):
    transport = rpc.get_transport(conf, URL)
    yield transport
    transport.cleanup()


def test_with_quorum_queues_the_dead_letter_queue_is_a_bounded_quorum_queue(conf, rabbit):
    conf.set_override("rabbit_quorum_queue", True, group="oslo_messaging_rabbit")
    queue = topology.dead_letter_queue(rabbit)
    assert queue.durable and not queue.auto_delete
    assert queue.queue_arguments == {"x-queue-type": "quorum", **topology.dead_letter_bounds(conf)}
    # The shared queues dead-letter to its exchange.
    assert topology.shared_queue(rabbit, "scheduler").queue_arguments["x-dead-letter-exchange"] == \
        queue.exchange.name


def test_without_quorum_queues_it_stays_classic(conf, rabbit):
    assert topology.dead_letter_queue(rabbit).queue_arguments == topology.dead_letter_bounds(conf)


class RefusingChannel:
    """A channel on which the dead-letter queue was declared otherwise before."""

    def __init__(self, reply_text):
        self.reply_text = reply_text
        self.is_open = True
        self.connection = self
        self.virtual_host = "vh"

    def channel(self):
        return self

    def exchange_declare(self, *args, **kwargs):
        pass

    def prepare_queue_arguments(self, arguments, **kwargs):
        return arguments

    def queue_declare(self, *args, **kwargs):
        self.is_open = False
        raise amqp_exceptions.PreconditionFailed(self.reply_text, (50, 10), "Queue.declare")

    def close(self):
        self.is_open = False


def test_a_classic_dead_letter_queue_from_before_is_used_and_said_once(conf, rabbit, caplog):
    conf.set_override("rabbit_quorum_queue", True, group="oslo_messaging_rabbit")
    conf.set_override("control_exchange", "classic-before")
    refused = ("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
               "'classic-before.dead-letters' in vhost 'vh': received the value 'quorum' of type "
               "'longstr' but current is none")
    letters = deadletter.DeadLetters(rabbit, "scheduler")
    with caplog.at_level(logging.WARNING, logger="scheduler.rpc.deadletter"):
        letters.declare(RefusingChannel(refused))
        letters.declare(RefusingChannel(refused))  # a reconnection: said once
    [said] = [r.getMessage() for r in caplog.records]
    assert "classic-before.dead-letters was declared as a classic queue" in said
    assert "while its node is down" in said
    assert "rabbitmqadmin -V vh delete queue name=classic-before.dead-letters" in said
    assert "bounds" not in said
