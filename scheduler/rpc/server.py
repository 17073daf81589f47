"""RPC servers: consume a topic and dispatch its messages to endpoint methods.

A server consumes ``<topic>`` (shared by all servers of the topic),
``<topic>.<server>`` and its own queue on ``<topic>_fanout``, in one thread:
messages are dispatched inline and in order, and each is acked only once its
endpoint method returned or raised. Endpoints that need long work spawn their
own threads.
"""

import contextlib
import logging
import os
import random
import time

from scheduler.rpc import bundles, deliveries, envelope, topology
from scheduler.rpc import transport as transport_mod
from scheduler.rpc.consumer import ConnectionLost, ConsumeLoop
from scheduler.rpc.context import REQUEST_ID, Context, ensure_request_id, handling
from scheduler.rpc.deadletter import DeadLetters, log_key, reason_of
from scheduler.rpc.dispatcher import Dispatcher
from scheduler.rpc.exceptions import (
    DeliveryLimitExceeded,
    InvalidEnvelope,
    MessageTooLarge,
    QueueInUse,
    RetryLater,
    ServiceUnavailable,
    WorkBroken,
)
from scheduler.telemetry import rpc_metrics
from scheduler.utils.log_once import LogOnce

LOG = logging.getLogger(__name__)

# How long start() waits for the first connection attempt (success or failure).
START_TIMEOUT = 30
# The AMQP reply code with which RabbitMQ refuses a second exclusive consumer.
ACCESS_REFUSED = 403
# Seconds at most before a batch that lost a race (a deadlock) is tried again.
SOON = 0.2
# Seconds at most between two tries of what a passing failure holds (the database away, a
# full disk): once it passes, the messages wait no longer than this.
HOLD_MAX_DELAY = 2.0


def get_rpc_server(transport, target, endpoints, batch_size=1, unit_of_work=None, exclusive=False,
                   hearing=None, access=None, fanouts=(), shared_fanouts=(), methods=None, fanout_queue=True):
    return RPCServer(transport, target, endpoints, batch_size, unit_of_work, exclusive, hearing, access,
                     fanouts, shared_fanouts, methods, fanout_queue)


class _Hold:
    """Requests a passing failure keeps from being handled: unacknowledged, and tried
    again after a delay that grows (a lost race: a short random one) until it passes."""

    def __init__(self, requests, exc, delays):
        self.requests = requests
        self.since = time.monotonic()
        self._delays = delays
        self.retry_at = self.since
        self.said = False  # whether the hold was logged: then its end is too
        self.again(exc)

    def again(self, exc):
        self.soon = exc.soon
        self.reason = reason_of(exc).removeprefix(f"{type(exc).__name__}: ")
        self.delay = random.uniform(0, SOON) if exc.soon else min(next(self._delays), HOLD_MAX_DELAY)
        self.retry_at = time.monotonic() + self.delay
        return self


class _NoWork:
    """The unit of work of a server without one: each message stands alone."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @contextlib.contextmanager
    def step(self, method, read_only=False):
        yield


class RPCServer:
    """Consume a target's queues and dispatch to the endpoints.

    With ``batch_size`` > 1 the server takes up to that many messages that are
    already waiting and dispatches them inside one ``unit_of_work()`` (a
    context manager with a ``step(method, read_only)`` per message, e.g. one
    database transaction with a savepoint per message, none for a method
    marked ``rpc.read_only``): the messages are acked, and calls answered,
    only after it exits cleanly. If it raises, the messages are handled again
    one by one (see _handle).

    With ``access`` (scheduler.rpc.access.Access), each message is checked against
    the callers its method declares before it runs, whether alone or in a batch
    (see Dispatcher): a refused call gets NotAuthorized, a refused cast is
    dead-lettered with it.

    ``fanouts``: other topics whose fanout exchanges the server's own fanout queue is bound to
    too (it takes every message cast to them); ``shared_fanouts``: ``(topic, message_ttl)`` of
    topics whose fanout exchange it takes from through the queue ``<topic>`` it shares with the
    other servers consuming it (each message taken by one of them).

    ``methods``: the only methods served (see Dispatcher); ``fanout_queue=False``: no queue of the
    server's own on ``<topic>_fanout`` (a topic nothing fans out to).
    """

    def __init__(self, transport, target, endpoints, batch_size=1, unit_of_work=None, exclusive=False,
                 hearing=None, access=None, fanouts=(), shared_fanouts=(), methods=None, fanout_queue=True):
        if target.fanout:
            raise ValueError("a server's target cannot be fanout")
        if exclusive and not target.server:
            raise ValueError("only a server's own queue (<topic>.<server>) can be consumed exclusively")
        self.exclusive = exclusive
        self.transport = transport
        self.target = target
        if fanouts and not fanout_queue:
            raise ValueError("a server without a fanout queue takes no other topic's fanout")
        self.dispatcher = Dispatcher(endpoints, access, methods)
        self.fanout_queue_name = f"{target.topic}_fanout_{envelope.new_id()}" if fanout_queue else None
        self._fanouts = tuple(fanouts)
        self._shared_fanouts = tuple(shared_fanouts)
        self._fanout_exchanges = {topology.fanout_exchange(t).name for t in (target.topic, *self._fanouts)}
        label = f"{target.topic}.{target.server}" if target.server else target.topic
        self.dead_letters = DeadLetters(transport, label)
        self.refusals = LogOnce(LOG)  # refused and failed calls: their callers get the failure
        self._deliveries = deliveries.DeliveryLog(
            os.path.join(transport.conf.state_path, "deliveries", label.replace(os.sep, "_") + ".json"))
        self.batch_size = max(1, batch_size)
        self._unit_of_work = unit_of_work or _NoWork
        self._batch = []
        self._unsettled = None  # (Sent, messages) of the last batch, until its confirms came
        self._held = None  # a _Hold, while a passing failure lasts
        # Told when this server stops taking its messages (deaf(since)) and takes them again
        # (heard(now)): the scheduler's hosts are not down for the time it could not hear them.
        self._hearing = hearing
        self._deaf_since = None
        self._loop = ConsumeLoop(
            transport,
            f"rpc-server-{label}",
            queues=self._queues,
            on_message=self._on_message,
            # Room beyond the batch being handled for the one waiting to be acked
            # (see _flush) and for the next one, which fills meanwhile.
            prefetch=max(transport.conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count,
                         3 * self.batch_size if self.batch_size > 1 else 0),
            on_stop=self._delete_fanout_queue,
            on_connect=self.dead_letters.declare,
            on_drained=self._flush,
            want_more=lambda: len(self._batch) < self.batch_size,
            on_lost=self._forget,
        )
        self._started = False

    def _queues(self):
        queues = [topology.shared_queue(self.transport, self.target.topic)]
        if self.target.server:
            queues.append(topology.shared_queue(self.transport, topology.routing_key(self.target),
                                                exclusive=self.exclusive))
        if self.fanout_queue_name is not None:
            queues.append(topology.fanout_queue(self.transport, self.target.topic, self.fanout_queue_name,
                                                self._fanouts))
        queues.extend(topology.shared_fanout_queue(self.transport, topic, ttl)
                      for topic, ttl in self._shared_fanouts)
        return queues

    def start(self):
        """Start consuming. Returns once the queues are declared (or the first
        connection attempt failed; the server then keeps reconnecting).

        An exclusive server whose own queue another process consumes raises
        QueueInUse instead, and stops: it must not run beside that one.
        """
        if self._started:
            return
        self._started = True
        if self.dispatcher.access is not None:
            self.dispatcher.access.warn_if_open(self.transport, self.target.topic)
        self.transport._add_server(self)
        self._loop.start()
        self._loop.first_attempt.wait(START_TIMEOUT)
        error = self._loop.first_error
        if self.exclusive and getattr(error, "code", None) == ACCESS_REFUSED:
            self.stop()
            self.wait()
            raise QueueInUse(f"{topology.routing_key(self.target)} is consumed by another process "
                             f"already ({reason_of(error)})")

    def stop(self):
        """Stop consuming; the message being dispatched is finished and acked."""
        self._loop.stop()

    def wait(self):
        """Wait until the server has stopped (call stop() first)."""
        self._loop.join()

    @property
    def ready(self):
        return self._loop.ready.is_set()

    def _delete_fanout_queue(self, channel):
        if self.fanout_queue_name is None:
            return
        fanout = topology.fanout_queue(self.transport, self.target.topic, self.fanout_queue_name,
                                       self._fanouts)(channel)
        if not self.transport.is_rabbit:
            fanout.purge()
        fanout.delete()
        # The memory transport keeps a deleted queue in the exchange's table.
        for topic in (self.target.topic, *self._fanouts):
            fanout.unbind_from(topology.fanout_exchange(topic), topic)

    def _forget(self):
        """The connection is gone: what it delivered and was not acked comes again."""
        self._batch = []
        self._unsettled = None
        self._held = None
        self._deaf(self._loop.heard_at or time.monotonic())

    def _deaf(self, since):
        if self._deaf_since is None:
            self._deaf_since = since
            if self._hearing is not None:
                self._hearing.deaf(since)

    def _heard(self):
        if self._deaf_since is not None:
            self._deaf_since = None
            if self._hearing is not None:
                self._hearing.heard(time.monotonic())

    def _on_message(self, message):
        if self._loop.stopping.is_set():
            if message.delivery_info.get("exchange") in self._fanout_exchanges:
                message.ack()  # our fanout queue is going away with us
            else:
                message.requeue()  # for the next server of the topic
            return
        self._batch.append(message)

    def _flush(self):
        """Handle the batch received, then settle the one before it.

        What a batch sends (builds, answers) goes out at its end, but the
        broker's confirms are waited for only after the next batch is handled:
        the broker works through one batch while this server works on the next.
        Each batch's messages are acked once what it sent is confirmed.
        """
        if self._held is not None and not self._retry_held():
            self._settle()
            return
        self._heard()
        batch, self._batch = self._batch, []
        if not batch:
            self._settle()
            return
        # In the order delivered: a channel's messages are acked up to a tag (see _ack).
        run = []
        for index, message in enumerate(batch):
            if message.delivery_info.get("redelivered"):
                self._handle_run(run)
                run = []
                if self._held is None:
                    self._handle_redelivered(message)
                    index += 1
                if self._held is not None:  # the rest waits behind what is held, in order
                    self._batch[:0] = batch[index:]
                    return
            else:
                run.append(message)
        self._handle_run(run)

    def _retry_held(self):
        """Try the held requests again once their delay is over: whether they went through.
        Until then, a call that arrives is answered at once that the service is unavailable."""
        held = self._held
        if time.monotonic() < held.retry_at:
            if not held.soon:
                self._batch = self._answer_calls(self._batch, held)
            return False
        self._held = None
        self._heard()  # for the time so far; deaf again below if it has not passed
        self._handle(held.requests, held)
        if self._held is not None:
            LOG.debug("%s: still %s; %d message(s) held, trying again in %.1f s", self.target.topic,
                      self._held.reason, len(held.requests), self._held.delay)
            return False
        if held.said:
            LOG.warning("%s: the failure passed after %.1f s: the %d message(s) held are handled",
                        self.target.topic, time.monotonic() - held.since, len(held.requests))
        return True

    def _answer_calls(self, messages, held):
        """Answer the calls among ``messages`` (and refuse the bad ones) at once, for ``held``'s
        reason; the casts are returned, to be handled once it passes."""
        casts = []
        for message in messages:
            if self._is_bundle(message):  # casts only, each checked once handled
                casts.append(message)
                continue
            request = self._parse(message)
            if request is None:
                continue
            context, method, _ = request
            if not (context.msg_id and context.reply_q):
                casts.append(message)
                continue
            exc = ServiceUnavailable(f"{self.target.topic} holds its messages for "
                                     f"{time.monotonic() - held.since:.0f} s already: {held.reason}; "
                                     "nothing was done, try again later")
            with handling(context):
                self._log_refusal(method, exc)
                self._reply(context.msg_id, context.reply_q, failure=exc)
            message.ack()
        return casts

    def _handle_run(self, messages):
        # Read once a batch, not once a message: an option's lookup is dearer than the check.
        limit = self.transport.conf.oslo_messaging_rabbit.max_message_bytes
        requests = [request for message in messages for request in self._requests(message, limit)]
        # A bundle carries several requests: a unit of work takes batch_size of them at most.
        for start in range(0, len(requests), self.batch_size):
            if self._held is not None:  # the rest waits behind what is held, in order
                self._held.requests.extend(requests[start:])
                return
            self._handle(requests[start:start + self.batch_size])

    def _handle_redelivered(self, message):
        """Handle a message delivered before (see scheduler.rpc.deliveries) alone, and
        settle it before anything else; or dead-letter it when workers stopped
        handling it delivery_limit times already (a bundle: see _isolate)."""
        limit = self.transport.conf.oslo_messaging_rabbit.delivery_limit
        key = deliveries.fingerprint(message)
        stopped = self._deliveries.begin(key)
        if limit and stopped >= limit and self._is_bundle(message):
            self._isolate(message, key, stopped, limit)
        elif limit and stopped >= limit:
            exc = DeliveryLimitExceeded(f"the worker handling it stopped {stopped} times; "
                                        f"delivery_limit is {limit}")
            self.dead_letters.send(message, exc)
            message.ack()
        else:
            requests = self._requests(message)
            if requests:
                self._handle(requests)
            self._settle()
        self._deliveries.end(key)

    def _isolate(self, message, key, stopped, limit):
        """A bundle whose handling stopped workers delivery_limit times: each of its casts
        handled alone and settled, counted on its own; the one a worker stopped on while
        handling it alone is dead-lettered, and only it."""
        requests = self._requests(message)
        for index, (cast, request) in enumerate(requests):
            cast_key = f"{key}/{index}"
            if self._deliveries.begin(cast_key):
                exc = DeliveryLimitExceeded(
                    f"the worker handling it alone stopped; its bundle had stopped the workers handling it "
                    f"{stopped} times (delivery_limit {limit})")
                with handling(request[0]):
                    self.dead_letters.send(cast, exc, method=request[1])
                cast.ack()
            else:
                self._handle([(cast, request)])
                if self._held is not None:  # the rest waits behind what is held, in order
                    self._held.requests.extend(requests[index + 1:])
                    self._deliveries.end(cast_key)
                    return
                self._settle()
            self._deliveries.end(cast_key)

    def _handle(self, requests, held=None):
        """Handle ``requests`` ([(message, (context, method, args))]) in one unit of work.

        Should the unit of work fail as a whole, for a passing reason
        (RetryLater: the database is away, a lost race) the requests are held,
        unacknowledged, and tried again after a delay (``held``: the hold they
        come from); for any other, each is handled again alone, and one that
        fails alone is refused: dead-lettered, or answered with the failure.
        Nothing is held for ever for what one message does.
        """
        try:
            done = self._attempt(requests)
        except RetryLater as exc:
            self._hold(requests, exc, held)
            return
        except Exception as exc:
            LOG.debug("Traceback of the failed unit of work", exc_info=True)
            if len(requests) > 1:
                LOG.warning("%s: a batch of %d message(s) failed together (%s); handling each alone",
                            self.target.topic, len(requests), reason_of(exc))
                for request in requests:
                    self._handle([request])
                return
            done = self._refuse(requests[0], exc)
        if done is not None:
            self._settle()
            self._unsettled = done

    def _hold(self, requests, exc, held):
        if held is not None:
            self._held = held.again(exc)
        else:
            self._held = _Hold(requests, exc, transport_mod.delays(self.transport.conf))
            if exc.soon:
                LOG.info("%s: %d message(s) lost a race (%s); trying them again in %.2f s",
                         self.target.topic, len(requests), self._held.reason, self._held.delay)
        # A hold that began as a lost race may turn into an outage, and an outage end in a lost
        # race: said once when the database is first found away, and then once when it passes.
        if not exc.soon and not self._held.said:
            self._held.said = True
            LOG.warning("%s: %s; holding %d message(s), unacknowledged, until it passes (trying "
                        "again in %.1f s, the wait growing; calls meanwhile are answered that nothing "
                        "was done)",
                        self.target.topic, self._held.reason, len(requests), self._held.delay)
        if not exc.soon:
            self._held.requests = self._answer_held_calls(self._held.requests, self._held)
            self._deaf(time.monotonic())

    def _answer_held_calls(self, requests, held):
        """The held requests but the calls, which are answered now (see _answer_calls)."""
        calls = [message for message, (context, _, _) in requests if context.msg_id and context.reply_q]
        if not calls:
            return requests
        self._answer_calls(calls, held)
        return [(message, request) for message, request in requests if message not in calls]

    def _attempt(self, requests):
        """Run ``requests`` in one unit of work and send their answers: (Sent, messages)
        to settle, or None when the answers could not be sent (the messages are handed
        back: what they decided is committed, and their redelivery is answered from it)."""
        outcomes = []
        committed = False
        try:
            with self.transport.publisher.batch(confirm=False, idle=self._loop.listen) as sent:
                with self._unit_of_work() as work:
                    for method, form, group in self._groups(requests):
                        outcomes.extend(self._run(work, method, form, group))
                committed = True
                rpc_metrics.BATCH_MESSAGES.labels(self.target.topic).observe(len(requests))
                rpc_metrics.count_handled(self.target.topic, [method for _, _, method, _, _ in outcomes])
                for message, context, method, result, exc in outcomes:
                    self._answer(message, context, method, result, exc)
        except ConnectionLost:
            raise  # the consume loop's own connection: it reconnects, and they come again
        except Exception as exc:
            if not committed:
                raise
            LOG.warning("%s: cannot send the answers of %d message(s) (%s); handing them back",
                        self.target.topic, len(outcomes), reason_of(exc))
            self._requeue([message for message, *_ in outcomes])
            return None
        return sent, [message for message, *_ in outcomes]

    def _refuse(self, request, exc):
        """Refuse a message that failed alone: (Sent, [message]) to settle, as _attempt."""
        message, (context, method, _) = request
        with self.transport.publisher.batch(confirm=False, idle=self._loop.listen) as sent:
            self._answer(message, context, method, None, exc)
        return sent, [message]

    def _settle(self):
        """Wait for the confirms of what the last batch sent, then ack its messages
        (or hand them back when it could not be sent)."""
        unsettled, self._unsettled = self._unsettled, None
        if unsettled is None:
            return
        sent, messages = unsettled
        try:
            sent.confirm(idle=self._loop.listen)
        except ConnectionLost:
            raise  # the consume loop's own connection: it reconnects, and they come again
        except Exception as exc:
            LOG.warning("%s: cannot send what %d message(s) caused (%s); handing them back",
                        self.target.topic, len(messages), reason_of(exc))
            self._requeue(messages)
            return
        try:
            self._ack(messages)
        except Exception as exc:  # the connection they came on is gone: they come again
            LOG.debug("%s: cannot ack %d message(s): %s", self.target.topic, len(messages), exc)

    @staticmethod
    def _requeue(messages):
        for message in messages:
            try:
                message.requeue()
            except Exception as exc:  # the connection they came on is gone: they come again
                LOG.debug("Cannot hand back a message: %s", exc)

    def _groups(self, requests):
        """[(method, its batch form or None, [(message, request), ...]), ...] in the order of
        the batch, except that the messages of a method with a batch form join its first one."""
        groups, joined = [], {}
        for message, request in requests:
            method = request[1]
            form = self.dispatcher.batch_form(method)
            if form is not None and method in joined:
                joined[method].append((message, request))
                continue
            groups.append((method, form, [(message, request)]))
            if form is not None:
                joined[method] = groups[-1][2]
        return groups

    def _ack(self, messages):
        """Ack ``messages``; on RabbitMQ with one ack per channel, up to the last tag (every
        message delivered before it on that channel is settled by then)."""
        if not self.transport.is_rabbit:
            for message in messages:
                message.ack()
            return
        last = {}
        for message in messages:
            if isinstance(message, bundles.BundledCast):
                message = message.settle()  # the bundle's message, once its every cast is settled
                if message is None:
                    continue
            if message.delivery_tag > getattr(last.get(id(message.channel)), "delivery_tag", -1):
                last[id(message.channel)] = message
        for message in last.values():
            message.ack(multiple=True)

    def _run(self, work, method, form, group):
        """Dispatch ``group`` (messages naming ``method``) inside ``work``; their outcomes.

        The messages of a method with a batch form go to it together (a lone one
        too, so that it behaves the same), inside one step; should that step
        fail as a whole, each message is run again alone (through the batch form,
        one message at a time), so that only the one at fault fails.
        """
        read_only = self.dispatcher.is_read_only(method)
        if form is not None:
            outcomes, calls = {}, []
            for message, (context, _, args) in group:
                try:
                    self.dispatcher.check(context, method, args)
                    calls.append((message, context, args))
                except Exception as exc:
                    outcomes[id(message)] = (message, context, method, None, exc)
            try:
                with work.step(method, read_only=read_only):
                    results = form([(context, args) for _, context, args in calls])
                for (message, context, _), result in zip(calls, results, strict=True):
                    failed = isinstance(result, Exception)
                    outcomes[id(message)] = (message, context, method, None if failed else result,
                                             result if failed else None)
                return [outcomes[id(message)] for message, _ in group]
            except (RetryLater, WorkBroken):
                raise
            except Exception as exc:
                LOG.warning("%s: %d %s messages failed together (%s); running them one by one",
                            self.target.topic, len(calls), method, reason_of(exc))
                LOG.debug("Traceback of the failed group", exc_info=True)
        outcomes = []
        for message, (context, _, args) in group:
            try:
                with work.step(method, read_only=read_only), handling(context):
                    if form is None:
                        result = self.dispatcher.dispatch(context, method, args)
                    else:
                        # Refusals come back as outcomes: what the form wrote about them stays.
                        self.dispatcher.check(context, method, args)
                        [result] = form([(context, args)])
                if isinstance(result, Exception) and form is not None:
                    outcomes.append((message, context, method, None, result))
                else:
                    outcomes.append((message, context, method, result, None))
            except (RetryLater, WorkBroken):
                raise
            except Exception as exc:
                outcomes.append((message, context, method, None, exc))
        return outcomes

    def _parse(self, message, limit=None):
        """(context, method, args) of a message, or None once a bad one is refused and acked.
        ``limit``: ``[oslo_messaging_rabbit] max_message_bytes`` (None: read it)."""
        msg = self._unwrapped(message, limit)
        return None if msg is None else self._request(message, msg)

    def _requests(self, message, limit=None):
        """[(message, (context, method, args))] of a message: itself, or each cast of a bundle
        (scheduler.rpc.bundles), each as a message of its own; what is refused is left out,
        once dead-lettered or answered, and acked."""
        msg = self._unwrapped(message, limit)
        if msg is None:
            return []
        try:
            casts = envelope.bundled_casts(msg)
        except InvalidEnvelope as exc:
            self._refuse_whole(message, exc)
            return []
        if casts is None:
            request = self._request(message, msg)
            return [] if request is None else [(message, request)]
        requests = []
        for cast in bundles.Bundle(message, len(casts)).casts(casts):
            request = self._request(cast, cast.msg)
            if request is not None:
                requests.append((cast, request))
        return requests

    @staticmethod
    def _is_bundle(message):
        """Whether ``message`` is a well-formed bundle; refuses nothing (see _requests)."""
        try:
            return envelope.bundled_casts(envelope.unwrap(envelope.decode(message))) is not None
        except Exception:
            return False

    def _unwrapped(self, message, limit=None):
        """The inner message of ``message``, or None once it is refused (dead-lettered) and acked."""
        # Nothing of a message is trusted before it is checked here: its size
        # (before decoding), its envelope, its method and arguments (Dispatcher),
        # then what the endpoint checks itself. A call that fails gets a failure
        # reply; a cast, or a message too broken to answer, is dead-lettered.
        try:
            if limit is None:
                limit = self.transport.conf.oslo_messaging_rabbit.max_message_bytes
            size = len(message.body or b"")
            if size > limit:
                raise MessageTooLarge(f"message body of {size} bytes exceeds max_message_bytes ({limit})")
            try:
                body = envelope.decode(message)
            except Exception as exc:  # bad JSON or UTF-8, a content type other than JSON
                raise InvalidEnvelope(f"cannot decode the body: {reason_of(exc)}") from None
            return envelope.unwrap(body)
        except Exception as exc:
            self._refuse_whole(message, exc)
            return None

    def _refuse_whole(self, message, exc):
        """Dead-letter ``message``, too broken to answer or to split, and ack it."""
        with handling({REQUEST_ID: None}):
            self.dead_letters.send(message, exc)
        message.ack()

    def _request(self, message, msg):
        """(context, method, args) of the inner message ``msg`` of ``message``, or None once it is
        refused: answered with the failure (a call), else dead-lettered; and acked."""
        method = msg_id = reply_q = None
        try:
            msg_id, reply_q = envelope.reply_address(msg)
            method = msg.get("method") if isinstance(msg.get("method"), str) else None
            if isinstance(message, bundles.BundledCast) and ("_reply_q" in msg or "_msg_id" in msg):
                msg_id = reply_q = None
                raise InvalidEnvelope("a bundle carries casts only: a call in one would never be answered")
            method, args, values, msg_id, reply_q = envelope.parse_request(msg)
            version = envelope.version_of(msg)
            unanswerable = envelope.unanswerable(msg)
        except Exception as exc:
            given = msg.get(envelope.CONTEXT_PREFIX + REQUEST_ID)
            with handling({REQUEST_ID: given}):
                if msg_id and reply_q:
                    self._log_refusal(method, exc)
                    self._reply(msg_id, reply_q, failure=exc)
                else:
                    self.dead_letters.send(message, exc, method=method)
            message.ack()
            return None
        ensure_request_id(values)
        context = Context(
            values,
            user_id=message.properties.get("user_id"),
            redelivered=message.delivery_info.get("redelivered", False),
            msg_id=msg_id,
            reply_q=reply_q,
            unanswerable=unanswerable,
            version=version,
            exchange=message.delivery_info.get("exchange"),
        )
        return context, method, args

    def _answer(self, message, context, method, result, exc):
        if exc is None and context.unanswerable is None:
            if context.msg_id and context.reply_q:
                self._reply(context.msg_id, context.reply_q, result=result)
            return
        with handling(context):  # what is logged of a refusal names its request
            self._refuse_answer(message, context, method, exc)

    def _refuse_answer(self, message, context, method, exc):
        if context.unanswerable is not None:
            outcome = "it failed: " + reason_of(exc) if exc is not None else "it was done"
            self.refusals.log(
                (method, "unanswerable", exc is None), logging.WARNING,
                "Call of %s on %s cannot be answered: %s; %s, and nothing is sent back",
                method, self.target.topic, context.unanswerable, outcome,
            )
            return
        if context.msg_id and context.reply_q:
            self._log_refusal(method, exc)
            self._reply(context.msg_id, context.reply_q, failure=exc)
        else:
            LOG.debug("Traceback of the failed cast of %s", method, exc_info=exc)
            self.dead_letters.send(message, exc, method=method)

    def _log_refusal(self, method, exc):
        """A failed call: its caller gets the failure; we log it once, without traceback
        for bad input (a bug's traceback goes to the debug log)."""
        if getattr(exc, "invalid_input", False):
            self.refusals.log(
                log_key(method, exc), logging.INFO, "Call of %s on %s refused: %s",
                method or "?", self.target.topic, reason_of(exc),
            )
        else:
            self.refusals.log(
                log_key(method, exc), logging.WARNING, "Call of %s on %s failed: %s",
                method, self.target.topic, reason_of(exc),
            )
            LOG.debug("Traceback of the failed call of %s", method, exc_info=exc)

    def _reply(self, msg_id, reply_q, result=None, failure=None):
        if failure is not None:
            body = envelope.reply(msg_id, failure=envelope.serialize_failure(failure))
            wrapped = envelope.wrap(body)
        else:
            try:
                wrapped = envelope.wrap(envelope.reply(msg_id, result=result))
            except (TypeError, ValueError) as exc:
                LOG.error("Reply to %s cannot be serialized: %s", msg_id, exc)
                wrapped = envelope.wrap(envelope.reply(msg_id, failure=envelope.serialize_failure(exc)))
        try:
            self.transport.publisher.publish(wrapped, topology.DEFAULT_EXCHANGE, reply_q, persistent=False)
        except Exception as exc:
            LOG.error("Cannot send the reply to %s on %s: %s", msg_id, reply_q, exc)

