"""The consume loop shared by RPC servers and the reply listener.

It connects, declares its queues, consumes with manual acks and the configured
prefetch, and on any connection error closes everything, waits the reconnect
backoff and starts over (re-declaring the queues) -- for ever, until stopped.
"""

import logging
import threading
import time

import kombu

from scheduler.rpc import transport as transport_mod
from scheduler.telemetry import connection_metrics

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
    server handles messages in batches. ``on_lost()`` runs when the connection
    is lost: what was received on it will come again, on the next one.
    """

    def __init__(self, transport, name, queues, on_message, prefetch=None, on_stop=None, on_connect=None,
                 on_drained=None, want_more=None, on_lost=None):
        self.transport = transport
        self.name = name
        self._queues = queues
        self._on_message = on_message
        self._on_drained = on_drained
        self._want_more = want_more
        self._on_lost = on_lost
        self._on_stop = on_stop
        self._on_connect = on_connect
        self._prefetch = prefetch
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.first_attempt = threading.Event()
        self.first_error = None  # what made the first attempt fail, if it did
        #: When the broker was last heard from (monotonic): what the connection last received.
        self.heard_at = None
        self._link = None  # the connection being consumed, while it is
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
        lost_at = None
        while not self.stopping.is_set():
            conn = self.transport.connection(self.name)
            try:
                self._consume(conn, lost_at)
                waits = None
            except Exception as exc:
                if not self.first_attempt.is_set():
                    self.first_error = exc
                if self.stopping.is_set():
                    break
                if waits is None or self.ready.is_set():  # back off afresh after a good run
                    waits = transport_mod.delays(self.transport.conf)
                if self.ready.is_set() or lost_at is None:
                    lost_at = time.monotonic()
                self.ready.clear()
                if self._on_lost is not None:
                    self._on_lost()
                delay = next(waits)
                LOG.log(
                    logging.ERROR if _declared_otherwise(exc) else logging.WARNING,
                    "%s: lost %s (%s: %s)%s; reconnecting in %.1f s",
                    self.name,
                    self.transport.safe_url,
                    type(exc).__name__,
                    exc,
                    _hint(exc, self.transport.durable),
                    delay,
                )
                LOG.debug("%s: consumer error", self.name, exc_info=True)
            finally:
                self._link = None
                self.first_attempt.set()
                try:
                    conn.release()
                except Exception:
                    LOG.debug("%s: error closing the connection", self.name, exc_info=True)
            if waits is not None:
                self.stopping.wait(delay)

    def listen(self):
        """Check the heartbeats of the connection being consumed, as the loop does between
        drains: called by this loop's own handlers during a long wait (the broker's confirms
        of what they sent), so that a broker gone silent is noticed then, and said, and the
        broker still hears this side. Raises ConnectionLost when the check fails."""
        link = self._link
        if link is None:
            return
        try:
            link.heartbeat()
        except Exception as exc:
            raise ConnectionLost(f"{type(exc).__name__}: {exc}") from exc

    def _consume(self, conn, lost_at):
        conn.connect()
        # The transport's own connection, held from here on: kombu's
        # ``Connection.connection`` would open a bare new one, without our
        # queues and consumers, once this one is dead.
        link = self._link = Link(conn, self)
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
        link.check(channel)
        self.ready.set()
        self.first_attempt.set()
        names = ", ".join(q.name for q in queues)
        if lost_at is not None:
            connection_metrics.BROKER_RECONNECTS.inc()
            LOG.warning("%s: reconnected to %s after %.1f s; consuming %s again",
                        self.name, self.transport.safe_url, time.monotonic() - lost_at, names)
        else:
            LOG.debug("%s: consuming %s", self.name, names)
        while not self.stopping.is_set():
            try:
                link.drain(TICK)
                # On a stop, what arrives is handed back at once (and a virtual transport may
                # hand it to us again at once): no more draining then.
                while self._on_drained is not None and self._want_more() and not self.stopping.is_set():
                    link.drain(0)
            except TimeoutError:
                pass
            link.check(channel)
            if self._on_drained is not None:
                self._on_drained()
                link.check(channel)
            link.heartbeat()
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


class ConnectionLost(ConnectionError):
    """The connection or the consuming channel died, whatever first noticed it."""


class Link:
    """The broker connection a consume loop was established on, and nothing else.

    Every read and heartbeat goes to that connection through kombu's transport;
    ``check`` raises ConnectionLost once it or the consuming channel is closed
    (an ack or a requeue may be the first to meet a dead socket, and swallow it).
    """

    def __init__(self, conn, loop):
        self._transport = conn.transport
        self._raw = conn.connection
        self._rabbit = hasattr(self._raw, "heartbeat_tick")
        self._loop = loop
        self._received = None
        loop.heard_at = time.monotonic()

    def drain(self, timeout):
        self._transport.drain_events(self._raw, timeout=timeout)
        self._loop.heard_at = time.monotonic()

    def heartbeat(self):
        if self._rabbit:
            received = getattr(self._raw, "bytes_recv", None)  # heartbeats are frames too
            if received != self._received:
                self._received = received
                self._loop.heard_at = time.monotonic()
            self._transport.heartbeat_check(self._raw, rate=2)

    def check(self, channel):
        if not self._transport.verify_connection(self._raw):
            raise ConnectionLost("the connection to the broker is closed")
        if self._rabbit and not getattr(channel, "is_open", True):
            raise ConnectionLost("the broker closed the consuming channel")


def _declared_otherwise(exc):
    return "inequivalent arg" in str(exc)


def _hint(exc, durable):
    """What to do when the broker holds an exchange or queue declared with other arguments."""
    if not _declared_otherwise(exc):
        return ""
    return (f": it was declared otherwise before, e.g. by an oslo.messaging client whose "
            f"[oslo_messaging_rabbit] amqp_durable_queues is not {str(durable).lower()} like this "
            f"service's; make the settings agree, then delete it (rabbitmqadmin delete exchange "
            f"name=... or delete queue name=...) so that it is declared again")
