"""The reply side of calls: one reply queue per client process, one listener thread.

Waiters are keyed by ``_msg_id``; a reply nobody waits for any more (its call
timed out) is dropped.
"""

import logging
import queue
import threading

from scheduler.rpc import envelope, topology
from scheduler.rpc.consumer import ConsumeLoop

LOG = logging.getLogger(__name__)


class ReplyListener:
    def __init__(self, transport):
        self.transport = transport
        self.queue_name = f"reply_{envelope.new_id()}"
        self._waiters = {}
        self._lock = threading.Lock()
        self._loop = ConsumeLoop(
            transport,
            f"rpc-reply-{self.queue_name}",
            queues=lambda: [topology.reply_queue(transport, self.queue_name)],
            on_message=self._on_message,
            prefetch=transport.conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count,
            on_stop=self._delete_queue,
        )
        self._loop.start()

    def wait_ready(self, timeout):
        """True once the reply queue is declared and consumed."""
        return self._loop.ready.wait(timeout)

    def register(self, msg_id):
        replies = queue.Queue()
        with self._lock:
            self._waiters[msg_id] = replies
        return replies

    def unregister(self, msg_id):
        with self._lock:
            self._waiters.pop(msg_id, None)

    def _on_message(self, message):
        try:
            data = envelope.unwrap(envelope.decode(message))
        except Exception as exc:
            LOG.warning("Dropping a malformed reply on %s: %s", self.queue_name, exc)
            message.ack()
            return
        message.ack()
        msg_id = data.get("_msg_id")
        with self._lock:
            replies = self._waiters.get(msg_id)
        if replies is None:
            LOG.info("Dropping a reply to %s: no call waits for it (timed out?)", msg_id)
            return
        replies.put(data)

    def _delete_queue(self, channel):
        reply_queue = topology.reply_queue(self.transport, self.queue_name)(channel)
        if not self.transport.is_rabbit:
            reply_queue.purge()
        reply_queue.delete()

    def stop(self, wait=True):
        self._loop.stop()
        if wait:
            self._loop.join()
