"""The consume loop shared by RPC servers and the reply listener.

It connects, declares its queues, consumes with manual acks and the configured
prefetch, and on any connection error closes everything, waits the reconnect
backoff and starts over (re-declaring the queues) -- for ever, until stopped.
"""

import logging
import threading

import kombu

from scheduler.rpc import transport as transport_mod

LOG = logging.getLogger(__name__)

# How long one drain waits for a message: bounds how late a stop is noticed
# and how often AMQP heartbeats are checked.
TICK = 0.25


class ConsumeLoop:
    """Run ``on_message(message)`` for each message of ``queues()`` in one thread.

    ``queues`` is called on every (re)connection and returns kombu Queues.
    ``on_stop(channel)`` runs on a clean stop while the connection still works
    (to delete a process's own queues); ``on_connect(channel)`` after the queues
    are declared on each connection (to declare what is not consumed).
    ``ready`` is set once consuming.

    With ``on_drained``, the loop keeps taking the messages already waiting
    (while ``want_more()`` says so) and then calls ``on_drained()``: how a
    server handles messages in batches.
    """

    def __init__(self, transport, name, queues, on_message, prefetch=None, on_stop=None, on_connect=None,
                 on_drained=None, want_more=None):
        self.transport = transport
        self.name = name
        self._queues = queues
        self._on_message = on_message
        self._on_drained = on_drained
        self._want_more = want_more
        self._on_stop = on_stop
        self._on_connect = on_connect
        self._prefetch = prefetch
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.first_attempt = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self):
        self.stopping.set()

    def join(self, timeout=None):
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self):
        return self._thread is not None and self._thread.is_alive()

    def _run(self):
        waits = None
        while not self.stopping.is_set():
            conn = self.transport.connection(self.name)
            try:
                self._consume(conn)
                waits = None
            except Exception as exc:
                if self.stopping.is_set():
                    break
                if waits is None or self.ready.is_set():  # back off afresh after a good run
                    waits = transport_mod.delays(self.transport.conf)
                self.ready.clear()
                delay = next(waits)
                LOG.warning(
                    "%s: lost %s (%s: %s); reconnecting in %.1f s",
                    self.name,
                    self.transport.safe_url,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                LOG.debug("%s: consumer error", self.name, exc_info=True)
            finally:
                self.first_attempt.set()
                try:
                    conn.release()
                except Exception:
                    LOG.debug("%s: error closing the connection", self.name, exc_info=True)
            if waits is not None:
                self.stopping.wait(delay)

    def _consume(self, conn):
        conn.connect()
        channel = conn.channel()
        queues = [queue(channel) for queue in self._queues()]
        for queue in queues:
            queue.declare()
        if self._on_connect is not None:
            self._on_connect(channel)
        consumer = kombu.Consumer(
            channel,
            queues=queues,
            no_ack=False,
            auto_declare=False,
            on_message=self._on_message,
            accept=["json"],
            prefetch_count=self._prefetch,
        )
        consumer.consume()
        self.ready.set()
        self.first_attempt.set()
        LOG.debug("%s: consuming %s", self.name, ", ".join(q.name for q in queues))
        while not self.stopping.is_set():
            try:
                conn.drain_events(timeout=TICK)
                while self._on_drained is not None and self._want_more():
                    conn.drain_events(timeout=0)
            except TimeoutError:
                pass
            if self._on_drained is not None:
                self._on_drained()
            conn.heartbeat_check()
        if self._on_drained is not None:
            self._on_drained()  # with nothing new: settles what is done
        # Clean stop: the in-flight message is done; hand the rest back.
        self.ready.clear()
        try:
            consumer.cancel()
            if self._on_stop is not None:
                self._on_stop(channel)
            if not self.transport.is_rabbit:
                # Virtual transports hand back unacked messages when the channel closes.
                channel.close()
        except Exception:
            LOG.warning("%s: error while cleaning up on stop", self.name, exc_info=True)
