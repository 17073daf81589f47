"""Raw access to a fleet's broker for functional tests: publish anything, count queues."""

import json
import os
import subprocess

import kombu

from scheduler.rpc import envelope, topology


def rss_kib(pid):
    """The resident set size of a process, from /proc/<pid>/status (KiB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def raw_connection(fleet, url=None):
    """A plain kombu connection (no publisher confirms) to the fleet's vhost."""
    url = url or fleet.conf.transport_url
    return kombu.Connection(url.replace("rabbit://", "amqp://", 1))


def queue_depth(fleet, name):
    with raw_connection(fleet) as conn:
        return conn.default_channel.queue_declare(name, passive=True).message_count


def dead_letter_count(fleet):
    return queue_depth(fleet, f"{fleet.exchange}.dead-letters")


def dead_letters(fleet, limit):
    """Up to ``limit`` messages of the dead-letter queue, consumed."""
    found = []
    with raw_connection(fleet) as conn:
        queue = topology.dead_letter_queue(fleet.transport)(conn.default_channel)
        while len(found) < limit:
            message = queue.get(no_ack=True)
            if message is None:
                break
            found.append(message)
    return found


def cast_body(method, version=None, **args):
    """The wire body of a cast (of its API's ``version``, 1.0 if None), as JSON bytes."""
    return json.dumps(envelope.wrap(envelope.request(method, args, {}, version=version))).encode()


class RawPublisher:
    """Publishes bytes to the fleet's topic or fanout exchanges, as any client could."""

    def __init__(self, fleet):
        self.fleet = fleet
        # With publisher confirms: a publish returns once the broker has the message queued,
        # so that closing the connection right after the last one loses none.
        self.conn = kombu.Connection(fleet.conf.transport_url.replace("rabbit://", "amqp://", 1),
                                     transport_options={"confirm_publish": True})
        self.producer = kombu.Producer(self.conn.channel(), auto_declare=False)
        self.topic = topology.topic_exchange(fleet.transport)
        self.topic(self.producer.channel).declare()

    def publish(self, body, routing_key, fanout=None, content_type="application/json"):
        exchange = topology.fanout_exchange(fanout) if fanout else self.topic
        self.producer.publish(
            body,
            exchange=exchange,
            routing_key=routing_key,
            content_type=content_type,
            content_encoding="binary",
            delivery_mode=2,
            retry=True,
        )

    def close(self):
        self.conn.release()


def rabbitmqctl(*args, check=True):
    return subprocess.run(["rabbitmqctl", "-q", *args], check=check, capture_output=True, text=True)


def vhost_of(url):
    return url.rsplit("/", 1)[1]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
