"""A transport: how to reach the broker named by a URL, and the shared publisher.

``rabbit://``/``amqp://``/``amqps://`` go to RabbitMQ through py-amqp (with
publisher confirms), ``filesystem://`` to folders under ``state_path`` shared by
the processes of one machine, ``memory://`` to queues inside this process.
RabbitMQ's hot paths go through :mod:`scheduler.rpc.amqp_fast` unless
``[oslo_messaging_rabbit] amqp_fast_paths`` is off.
"""

import contextlib
import errno
import logging
import os
import random
import ssl as ssl_module
import sys
import threading
import time
import urllib.parse

import kombu
from amqp import exceptions as amqp_exceptions
from amqp.exceptions import MessageNacked

from berth_contract import amqp_names as names
from scheduler.rpc import amqp_fast, envelope, filesystem, topology
from scheduler.rpc.amqp_fast import batch_confirms, buffered_reads
from scheduler.rpc.exceptions import (
    BrokerUnreachable,
    InvalidName,
    LoginRefused,
    MessageDeliveryFailure,
    MessageTooLarge,
    NoQueue,
)
from scheduler.utils.masking import mask_url

LOG = logging.getLogger(__name__)

RABBIT_SCHEMES = ("rabbit", "amqp", "amqps")
SCHEMES = RABBIT_SCHEMES + ("filesystem", "memory")

# Seconds one attempt of a daemon waiting for the broker may take: bounds how late a
# SIGTERM is heeded then.
ATTEMPT_TIMEOUT = 5.0
# Seconds between two warnings of a daemon still waiting for the broker for the same reason.
WAITING_REPEAT = 60.0


def check_url(url):
    """Raise ValueError (the URL masked) unless ``url`` names a transport Berth has."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise ValueError(
            f"transport_url {mask_url(url)!r} is not supported; use one of "
            + ", ".join(f"{s}://" for s in SCHEMES)
        )
    if scheme in RABBIT_SCHEMES:
        _rabbit_hosts(url)


def get_transport(conf, url=None):
    """The transport for ``url`` (default ``conf.transport_url``)."""
    return Transport(conf, conf.transport_url if url is None else url)


def delays(conf):
    """Reconnect delays: rabbit_retry_interval, growing by rabbit_retry_backoff, capped."""
    rabbit = conf.oslo_messaging_rabbit
    delay = rabbit.rabbit_retry_interval
    while True:
        yield min(delay, rabbit.rabbit_interval_max)
        delay += rabbit.rabbit_retry_backoff


def _rabbit_hosts(url):
    """kombu URLs, one per host of a (possibly clustered) rabbit URL."""
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    default_port = 5671 if scheme == "amqps" else 5672
    # urlsplit rejects nothing here; split the comma-separated netloc ourselves.
    netloc = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    vhost = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    hosts = []
    last_creds = ""
    for entry in netloc.split(","):
        creds, at, location = entry.rpartition("@")
        if at:
            last_creds = creds + "@"
        if not location:
            raise ValueError(f"transport_url {mask_url(url)!r} has an empty host")
        if location.startswith("["):  # IPv6 literal
            has_port = "]:" in location
        else:
            has_port = ":" in location
        if not has_port:
            location = f"{location}:{default_port}"
        hosts.append(f"amqp://{last_creds}{location}/{vhost}")
    return hosts, scheme == "amqps"


def _refused(exc):
    """Whether ``exc`` is the broker's answer (a login, a vhost refused), not a lost connection."""
    return isinstance(exc, amqp_exceptions.AMQPError) and not isinstance(
        exc, (amqp_exceptions.RecoverableConnectionError, amqp_exceptions.RecoverableChannelError)
    )


def _reason(exc, timeout):
    """What made an attempt to connect within ``timeout`` seconds fail, in one line."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, OSError) and exc.errno and exc.strerror == errno.errorcode.get(exc.errno):
        # eventlet's sockets name the error (ECONNREFUSED) where the system describes it
        return f"[Errno {exc.errno}] {os.strerror(exc.errno)}"
    text = getattr(exc, "reply_text", None) or str(exc) or type(exc).__name__
    return text.splitlines()[0]


def publisher_channel(connection, fast_paths: bool):
    """The publisher's channel on ``connection`` (a connected py-amqp connection with
    confirm_publish): on the fast paths one that sends a batch in one write and
    waits once for its confirms, else py-amqp's own, whose every publish waits for
    its confirm.

    Either way ``channel.returned`` lists (exchange, routing key) of each message sent
    ``mandatory`` that the broker returned, routed to no queue. RabbitMQ sends a message's
    basic.return before its basic.ack, on the same channel: once a publish's confirm has been
    read, so has its return. (Without a listener py-amqp would raise the return out of the
    confirm's wait, and the ack after it would be read as a later message's.)"""
    if fast_paths:
        channel = batch_confirms.Channel(connection)
        channel.open()
    else:
        channel = connection.channel()
    returned = channel.returned = []
    channel.events["basic_return"].add(
        lambda exc, exchange, routing_key, message: returned.append((exchange, routing_key)))
    return channel


class Transport:
    """Connections to one broker, a thread-safe publisher and the reply listener."""

    def __init__(self, conf, url):
        self.conf = conf
        self.url = url
        self.safe_url = mask_url(url)
        check_url(url)
        scheme = url.split("://", 1)[0].lower()
        rabbit = conf.oslo_messaging_rabbit
        self.kind = "rabbit" if scheme in RABBIT_SCHEMES else scheme
        self.is_rabbit = self.kind == "rabbit"
        # py-amqp internals for speed (scheduler.rpc.amqp_fast), or its public API only
        self.fast_paths = self.is_rabbit and amqp_fast.usable(conf)
        self.durable = rabbit.amqp_durable_queues or rabbit.rabbit_quorum_queue
        # Whether a client declares the queue it sends to, as its server would: filesystem:// drops
        # what is published to an exchange no queue is bound to yet (as AMQP does), and there a
        # server that is still starting must find what was sent to it meanwhile.
        self.queues_for_servers = self.kind == "filesystem"
        self._lock = threading.Lock()
        self._reply_listener = None
        self._servers = []
        self._closed = False
        if self.is_rabbit:
            self._hosts, use_ssl = _rabbit_hosts(url)
            self._ssl = self._ssl_options(use_ssl or rabbit.ssl)
        elif self.kind == "filesystem":
            broker = os.path.join(conf.state_path, "broker")
            self._folders = {
                "data_folder_in": os.path.join(broker, "queues"),
                "data_folder_out": os.path.join(broker, "queues"),
                "processing_folder": os.path.join(broker, "processing"),
                "control_folder": os.path.join(broker, "control"),
            }
            for folder in set(self._folders.values()):
                os.makedirs(folder, exist_ok=True)
        self.publisher = Publisher(self)
        LOG.debug("Messaging transport %s", self.safe_url)

    def _ssl_options(self, enabled):
        if not enabled:
            return False
        rabbit = self.conf.oslo_messaging_rabbit
        options = {}
        if rabbit.ssl_ca_file:
            options["ca_certs"] = rabbit.ssl_ca_file
            options["cert_reqs"] = ssl_module.CERT_REQUIRED
        if rabbit.ssl_cert_file:
            options["certfile"] = rabbit.ssl_cert_file
        if rabbit.ssl_key_file:
            options["keyfile"] = rabbit.ssl_key_file
        if rabbit.ssl_ca_file and len(self._hosts) == 1:
            # kombu fills in the URL's host name: the broker's certificate must
            # name it. (With several hosts kombu would keep the first one's name
            # through a failover, so there the CA chain alone is verified.)
            options["server_hostname"] = None
        return options or True

    def connection(self, purpose, heartbeat=True, connect_timeout=None):
        """A new, not yet connected kombu connection. ``purpose`` names it on the broker."""
        rabbit = self.conf.oslo_messaging_rabbit
        if connect_timeout is None:
            connect_timeout = max(rabbit.rabbit_interval_max, 5)
        if self.is_rabbit:
            name = f"{os.path.basename(sys.argv[0]) or 'python'}:{os.getpid()}:{purpose}"
            connection_class = buffered_reads.Connection if self.fast_paths else kombu.Connection
            hosts = self._hosts
            if rabbit.kombu_failover_strategy == "shuffle":  # kombu shuffles the failovers, not the first
                hosts = random.sample(hosts, len(hosts))
            return connection_class(
                hosts,
                # a copy: kombu writes the host name into it
                ssl=dict(self._ssl) if isinstance(self._ssl, dict) else self._ssl,
                heartbeat=rabbit.heartbeat_timeout_threshold if heartbeat else 0,
                failover_strategy=rabbit.kombu_failover_strategy,
                connect_timeout=connect_timeout,
                transport_options={
                    "confirm_publish": True,
                    "client_properties": {"connection_name": name},
                },
            )
        options = {"polling_interval": rabbit.polling_interval}
        if self.kind == "filesystem":
            options.update(self._folders)
            options[filesystem.BOUNDED_QUEUES] = {
                topology.dead_letter_queue_name(self.conf): (rabbit.dead_letter_max_length,
                                                             rabbit.dead_letter_max_bytes)}
            return kombu.Connection(transport=filesystem.Transport, transport_options=options)
        return kombu.Connection("memory://", transport_options=options)

    def reach(self, timeout):
        """Connect within about ``timeout`` seconds, trying again with the reconnect
        backoff while the broker cannot be reached: what a command does before it
        sends anything. Raises BrokerUnreachable, at once if the broker refused."""
        if not self.is_rabbit:
            return
        deadline = time.monotonic() + timeout
        waits = delays(self.conf)
        while True:
            attempt = max(deadline - time.monotonic(), 1.0)
            try:
                self.publisher.connect(attempt)
                return
            except Exception as exc:
                left = deadline - time.monotonic()
                if _refused(exc) or left <= 0:  # said with the time the caller gave, not the attempt's rest
                    raise self._failure(exc, timeout) from None
            time.sleep(min(next(waits), left))

    def wait_for_broker(self, stop):
        """Connect, trying again with the reconnect backoff for as long as it takes:
        what a daemon does before it starts. Says that it waits (again every
        WAITING_REPEAT seconds, or when the reason changes) and when it connected.
        Returns False if ``stop`` was set first; raises LoginRefused."""
        if not self.is_rabbit:
            return True
        waits = delays(self.conf)
        said, said_at = None, 0.0
        while not stop.is_set():
            try:
                self.publisher.connect(ATTEMPT_TIMEOUT)
            except Exception as exc:
                if isinstance(exc, amqp_exceptions.AccessRefused):
                    raise self._failure(exc, ATTEMPT_TIMEOUT) from None
                why = _reason(exc, ATTEMPT_TIMEOUT)
                LOG.debug("Cannot connect to the message broker at %s: %r", self.safe_url, exc)
                if stop.is_set():
                    break
                if why != said or time.monotonic() - said_at >= WAITING_REPEAT:
                    LOG.warning("Waiting for the message broker at %s: %s; retrying", self.safe_url, why)
                    said, said_at = why, time.monotonic()
                stop.wait(next(waits))
                continue
            LOG.info("Connected to the message broker at %s", self.safe_url)
            return True
        LOG.info("Stopped waiting for the message broker at %s", self.safe_url)
        return False

    def consumers(self, queue_name, timeout=5.0):
        """How many consumers the broker counts on ``queue_name`` (0 when it has no such queue),
        or None when this transport cannot tell (not RabbitMQ, or the broker did not answer)."""
        if not self.is_rabbit:
            return None
        try:
            with self.connection("consumers", heartbeat=False, connect_timeout=timeout) as conn:
                channel = conn.channel()
                try:
                    return channel.queue_declare(queue=queue_name, passive=True).consumer_count
                except amqp_exceptions.NotFound:
                    return 0
        except Exception as exc:  # the call goes ahead and says what it meets
            LOG.debug("Could not count the consumers of %s on %s: %r", queue_name, self.safe_url, exc)
            return None

    def _failure(self, exc, timeout):
        """The BrokerUnreachable that says why connecting failed."""
        why = _reason(exc, timeout)
        if isinstance(exc, amqp_exceptions.AccessRefused):
            return LoginRefused(f"the message broker at {self.safe_url} refused the login: {why}")
        if _refused(exc):
            return BrokerUnreachable(f"the message broker at {self.safe_url} refused the connection: {why}")
        return BrokerUnreachable(f"cannot reach the message broker at {self.safe_url}: {why}")

    @staticmethod
    def recoverable_errors(conn):
        """What a lost or refused connection raises on ``conn``."""
        return (
            tuple(conn.connection_errors) + tuple(conn.recoverable_channel_errors) + (OSError, MessageNacked)
        )

    def reply_listener(self):
        """The process's one reply queue and its listener thread, started on first use."""
        from scheduler.rpc.reply import ReplyListener

        with self._lock:
            if self._closed:
                raise MessageDeliveryFailure("the transport was cleaned up")
            if self._reply_listener is None:
                self._reply_listener = ReplyListener(self)
            return self._reply_listener

    def _add_server(self, server):
        with self._lock:
            self._servers.append(server)

    def cleanup(self):
        """Stop the reply listener and the servers still running, close connections."""
        with self._lock:
            self._closed = True
            listener, self._reply_listener = self._reply_listener, None
            servers, self._servers = self._servers, []
        for server in servers:
            server.stop()
        if listener is not None:
            listener.stop(wait=False)
        for server in servers:
            server.wait()
        if listener is not None:
            listener.stop()
        self.publisher.close()


#: Seconds between two calls of a confirm wait's ``idle`` (Sent.confirm).
IDLE_EVERY = 0.25
#: Seconds a send with ``idle`` gives each broker host to connect (``idle`` is not called
#: meanwhile), instead of max(rabbit_interval_max, 5).
IDLE_CONNECT_TIMEOUT = 5.0


def _pause(seconds, idle=None):
    """Sleep ``seconds``; with ``idle``, call it every IDLE_EVERY seconds (what it raises ends
    the pause): a consume loop's send waiting out the reconnect backoff keeps its heartbeats."""
    if idle is None:
        time.sleep(seconds)
        return
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, IDLE_EVERY))
        idle()


def _raise_if_returned(channel, transport):
    """Raise NoQueue for the first message the broker returned on ``channel`` (see
    publisher_channel), and forget them: only messages sent ``mandatory`` are returned, each
    sent alone and its confirm waited for (Publisher.publish), so they are this send's."""
    returned = getattr(channel, "returned", None)
    if returned:
        exchange, routing_key = returned[0]
        del returned[:]
        raise NoQueue(exchange, routing_key, transport.safe_url)


class Sent:
    """What a ``Publisher.batch(confirm=False)`` sent: ``confirm()`` waits for the
    broker's confirms, and sends the messages again if they do not come."""

    def __init__(self, publisher):
        self._publisher = publisher
        self.messages = []
        self.ticket = None

    def confirm(self, idle=None):
        """Raises MessageDeliveryFailure when the messages cannot be sent again.

        ``idle()`` is called every IDLE_EVERY seconds of the wait (see Publisher._confirm)."""
        if self.messages:
            self._publisher._confirm(self.ticket, self.messages, idle)
            self.messages, self.ticket = [], None


class Publisher:
    """One connection shared by every sender of a transport, used under a lock.

    Exchanges are declared once per connection. A connection error makes it
    reconnect and publish again, ``publish_retries`` times with the reconnect
    backoff, then the send fails with MessageDeliveryFailure.
    """

    def __init__(self, transport):
        self.transport = transport
        self._lock = threading.Lock()
        self._conn = None
        self._producer = None
        self._declared = set()
        self._local = threading.local()  # .pending: this thread's batch, if any

    @contextlib.contextmanager
    def batch(self, confirm=True, idle=None):
        """Hold this thread's publishes until the outermost ``batch()`` ends, then
        send them in order, waiting once for the broker to confirm them all.

        A recoverable failure sends the whole batch again (so some messages may
        arrive twice); the end of the batch raises MessageDeliveryFailure where
        publish() would. If a block raises, the messages it published are
        dropped. A call() inside a batch sends its request at once.

        With ``confirm=False`` the outermost batch is sent at its end without
        waiting for the confirms: ``confirm()`` on the Sent it yields waits for
        them later (and sends the batch again if they do not come).

        ``idle()`` is called every IDLE_EVERY seconds while the end of the batch waits for
        another sender to be done with the connection (see _confirm).
        """
        pending = getattr(self._local, "pending", None)
        outermost = pending is None
        if outermost:
            pending = self._local.pending = []
        sent = Sent(self)
        mark = len(pending)
        try:
            yield sent
        except BaseException:
            del pending[mark:]
            raise
        finally:
            if outermost:
                self._local.pending = None
        if outermost and pending:
            if confirm:
                self._send(pending)
            else:
                sent.messages = pending
                sent.ticket = self._send(pending, wait=False, idle=idle)

    def batching(self):
        """Whether this thread's publishes are held in a ``batch()``."""
        return getattr(self._local, "pending", None) is not None

    def publish(self, body, exchange, routing_key, expiration=None, persistent=None,
                headers=None, content_type=None, content_encoding=None, now=False, max_bytes=None,
                queue=None, mandatory=False):
        """Publish the dict ``body`` as JSON to ``exchange`` (a kombu Exchange).

        ``queue`` (a kombu Queue bound to ``exchange``) is declared and bound before the
        first publish to it on a connection: the message waits there for a consumer.

        With ``mandatory``, on RabbitMQ, a message no queue takes is returned by the broker and
        NoQueue raised; it is sent at once, even inside ``batch()``, and its confirm waited for,
        so that when publish returns a queue holds it. (filesystem:// and memory:// have no
        returns: there the client declares the queue it sends to, see Transport.queues_for_servers.)

        With ``content_type``, ``body`` is sent as it is (bytes or text), not
        serialized: how a message is passed on unchanged (dead-lettering).
        Inside ``batch()``, the message waits for the end of the batch, unless
        ``now`` (a call's request: its reply is awaited inside the batch).
        Raises InvalidName at once, whether in a batch or not, for an exchange
        or routing key AMQP cannot carry, and MessageTooLarge for a body over
        ``max_bytes`` (what a Berth server would refuse to read).
        """
        for what, name in (("exchange", exchange.name), ("routing key", routing_key)):
            why = names.problem(name)
            if why is not None:
                raise InvalidName(f"cannot publish: the {what} {names.printable(name)[:300]!r} is {why}")
        transport = self.transport
        if persistent is None:
            persistent = transport.durable
        properties = {"delivery_mode": 2 if persistent else 1}
        if expiration is not None and (transport.is_rabbit or transport.kind == "filesystem"):
            properties["expiration"] = expiration
        if headers:
            properties["headers"] = headers
        mandatory = mandatory and transport.is_rabbit
        if mandatory:
            properties["mandatory"] = True  # kombu's publish argument, passed on to basic.publish
        if content_type is None:
            # Serialized here: kombu's serializer makes a JSON encoder per message.
            body = envelope.dumps(body)
            if max_bytes is not None and len(body) > max_bytes // 4 and len(body.encode("utf-8")) > max_bytes:
                raise MessageTooLarge(f"cannot publish a message of {len(body.encode('utf-8'))} bytes: "
                                      f"a Berth server refuses bodies over max_message_bytes ({max_bytes})")
            properties["content_type"] = "application/json"
            properties["content_encoding"] = "utf-8"
        else:
            properties["content_type"] = content_type
            properties["content_encoding"] = content_encoding or "binary"
        message = (body, exchange, routing_key, properties, queue)
        pending = getattr(self._local, "pending", None)
        if pending is not None and not now and not mandatory:
            pending.append(message)
        else:
            self._send([message])

    def _send(self, messages, wait=True, idle=None):
        """Publish ``messages`` ([(body, exchange, routing_key, properties, queue)]) in order;
        several without waiting for each confirm, then for all of them (on the
        fast paths; py-amqp's public API waits for each in turn).

        With ``wait=False`` the confirms are not waited for: returns
        (connection, [batch_confirms.Pending]) to wait for them on, if any
        (none without the fast paths: each was waited for)."""
        transport = self.transport
        rabbit = transport.conf.oslo_messaging_rabbit
        waits = delays(transport.conf)
        attempt = 0
        redeclared = False
        with self._lock if idle is None else self._locked(idle):
            while True:
                conn = None
                try:
                    conn = self._connect(None if idle is None else IDLE_CONNECT_TIMEOUT)
                    for _, exchange, _, properties, queue in messages:
                        if exchange.name and exchange.name not in self._declared:
                            exchange(self._producer.channel).declare()
                            self._declared.add(exchange.name)
                        if queue is not None and ("queue", queue.name) not in self._declared:
                            queue(self._producer.channel).declare()
                            self._declared.add(("queue", queue.name))
                        if transport.is_rabbit:
                            properties["user_id"] = conn.userid
                    channel = self._producer.channel
                    deferring = not wait and isinstance(channel, batch_confirms.Channel)
                    if deferring:
                        channel.deferred = []
                    several = len(messages) > 1 or deferring
                    batch = self._producer.batch() if several else contextlib.nullcontext()
                    try:
                        with batch:
                            for body, exchange, routing_key, properties, _ in messages:
                                self._producer.publish(
                                    body,
                                    exchange=exchange,
                                    routing_key=routing_key,
                                    retry=False,
                                    declare=None,
                                    confirm_timeout=transport.conf.rpc_response_timeout,
                                    **properties,
                                )
                    finally:
                        deferred = channel.deferred if deferring else None
                        if deferring:
                            channel.deferred = None
                    _raise_if_returned(channel, transport)
                    return (conn, deferred) if deferred else None
                except NoQueue:
                    raise  # the broker's answer: sending again would meet the same
                except Exception as exc:
                    recoverable = conn is None or isinstance(exc, self.transport.recoverable_errors(conn))
                    self._reset()
                    if getattr(exc, "code", None) == 404 and not redeclared:
                        # The exchange went away since we declared it (RabbitMQ
                        # auto-deletes a fanout exchange with its last queue).
                        redeclared = True
                        continue
                    if not recoverable:
                        _, exchange, routing_key, _, _ = messages[0]
                        what = f"a batch of {len(messages)}, the first " if len(messages) > 1 else ""
                        raise MessageDeliveryFailure(
                            f"cannot publish {what}to {exchange.name or '(default exchange)'} "
                            f"with routing key {routing_key}: {exc}"
                        ) from exc
                    if attempt >= rabbit.publish_retries:
                        raise MessageDeliveryFailure(
                            f"cannot publish to {transport.safe_url} after {attempt + 1} attempts: {exc}"
                        ) from exc
                    delay = next(waits)
                    attempt += 1
                    LOG.warning(
                        "Publishing to %s failed (%s); retrying in %.1f s (%d/%d)",
                        transport.safe_url,
                        exc,
                        delay,
                        attempt,
                        rabbit.publish_retries,
                    )
                    _pause(delay, idle)

    def _confirm(self, ticket, messages, idle=None):
        """Wait for the confirms of ``ticket`` (from ``_send(wait=False)``); if they
        do not come, or the connection they were sent on is gone, send
        ``messages`` again, waiting.

        With ``idle``, the wait is cut in slices of IDLE_EVERY seconds, the lock let go and
        ``idle()`` called between them (what it raises ends the wait): how a consume loop
        waiting for the confirms of what it sent keeps up its own connection's heartbeats."""
        if ticket is None:
            return
        conn, pending = ticket
        within = None if idle is None else IDLE_EVERY
        while True:
            with self._lock if idle is None else self._locked(idle):
                if conn is not self._conn:
                    break
                try:
                    if all(each.wait(within) for each in pending):
                        return
                except Exception as exc:
                    LOG.warning("%d published message(s) were not confirmed (%s); sending them again",
                                len(messages), exc)
                    self._reset()
                    break
            idle()
        self._send(messages, idle=idle)

    @contextlib.contextmanager
    def _locked(self, idle):
        """The connection, once no other sender uses it; ``idle()`` called every IDLE_EVERY
        seconds until then."""
        while not self._lock.acquire(timeout=IDLE_EVERY):
            idle()
        try:
            yield
        finally:
            self._lock.release()

    def connect(self, timeout):
        """Connect now if not connected: one attempt per broker host, each within
        ``timeout`` seconds. Raises what the last attempt raised."""
        with self._lock:
            self._connect(timeout)

    def _connect(self, timeout=None):
        if self._conn is None:
            # No heartbeat on the publisher: it idles between sends, and a dead
            # connection shows as an error (or an unconfirmed publish) on the next send.
            conn = self.transport.connection("publisher", heartbeat=False, connect_timeout=timeout)
            try:
                if timeout is None:
                    conn.connect()
                else:  # each host once, without kombu's pause between tries
                    conn.ensure_connection(max_retries=max(len(conn.alt), 1) - 1,
                                           reraise_as_library_errors=False)
                if self.transport.is_rabbit:
                    channel = publisher_channel(conn.connection, self.transport.fast_paths)
                else:
                    channel = conn.channel()
                self._producer = kombu.Producer(channel, auto_declare=False)
            except BaseException:
                self._close(conn)
                raise
            self._conn = conn
            self._declared = set()
        return self._conn

    def _reset(self):
        conn, self._conn, self._producer = self._conn, None, None
        self._declared = set()
        if conn is not None:
            self._close(conn)

    @staticmethod
    def _close(conn):
        try:
            conn.release()
        except Exception:  # already broken, nothing to save
            LOG.debug("Error closing a broken connection", exc_info=True)

    def close(self):
        with self._lock:
            self._reset()
