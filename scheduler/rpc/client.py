"""RPCClient: cast and call methods of the servers of a topic."""

from __future__ import annotations

import collections
import logging
import queue
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

from berth_contract import versions
from scheduler.rpc import envelope, topology
from scheduler.rpc.context import REQUEST_ID
from scheduler.rpc.exceptions import MessageTooLarge, MessagingTimeout, NoConsumer, RPCVersionCapError
from scheduler.rpc.target import Target

LOG = logging.getLogger(__name__)


#: A request context: an oslo.context-style object with ``to_dict()``, or its dict.
Context = Any

#: Casts a bundle carries at most (RPCClient.cast_each).
BUNDLE_CASTS = 100


class ConsumerCheck:
    """Shared by the clients of one command: its first call whose queue the broker says
    nothing consumes raises NoConsumer at once, where it would wait out its timeout. Once a
    consumer was there, later calls wait as any call does: a server restarting meanwhile
    answers when it is back (a service's clients have no check: their calls may wait for a
    server that starts later)."""

    #: Seconds a first call waits, where the broker cannot count consumers (filesystem://),
    #: before ``notice`` is told that no server has answered yet.
    NOTICE_AFTER = 5.0

    def __init__(self, notice: Callable[[str], None] | None = None) -> None:
        self.pending = True
        self.notice = notice
        self.uncounted: str | None = None  # the queue of a first call the broker could not count

    def before_call(self, transport: Any, queue_name: str) -> None:
        self.uncounted = None
        if not self.pending:
            return
        count = transport.consumers(queue_name)
        if count == 0:
            raise NoConsumer(queue_name, transport.safe_url)
        if count is None and self.notice is not None and transport.kind != "memory":
            self.uncounted = queue_name  # filesystem://, or a broker that did not answer the count
        self.pending = False

    def waited(self, transport: Any, seconds: float, timeout: float) -> None:
        """The first call has waited ``seconds`` without a reply from a queue nobody could count."""
        if self.uncounted is not None and self.notice is not None:
            queued = (" (the request waits in it for a server to start, until the timeout: then it is "
                      "dropped, never run)" if transport.queues_for_servers else "")
            self.notice(f"nothing has answered on queue {self.uncounted!r} of {transport.safe_url} within "
                        f"{seconds:g} s{queued}; waiting up to {timeout:g} s (rpc_response_timeout)")
        self.uncounted = None


class RPCClient:
    """Casts and calls to a target. ``target.version`` is the version of its API a message
    needs (None: 1.0); ``version_cap``, when set, is the newest this client may send: a
    message needing a newer one raises RPCVersionCapError, and nothing is sent. ``api``
    names the API in that error (the ``[upgrade_levels]`` option that sets the cap).
    ``consumer_check``: see ConsumerCheck. ``require_queue``: a cast no queue of the broker
    takes raises NoQueue (RabbitMQ returns it, published mandatory) where it would be dropped:
    a cast returns once a queue holds it. For those who report a cast accepted (the CLI); a
    service's casts to a server not started yet are dropped as before."""

    def __init__(self, transport: Any, target: Target, timeout: float | None = None,
                 version_cap: str | None = None, api: str | None = None,
                 consumer_check: ConsumerCheck | None = None, require_queue: bool = False,
                 _made: dict[Any, Any] | None = None):
        if version_cap is not None:
            versions.parse(version_cap)
        self.transport = transport
        self.target = target
        self.timeout = timeout
        self.version_cap = version_cap
        self.api = api
        self.consumer_check = consumer_check
        self.require_queue = require_queue
        # What each publish would otherwise build again from the configuration (the exchange,
        # the size limit, the counters' children), shared with the copies prepare() makes.
        self._made = {} if _made is None else _made

    def prepare(self, server: str | None = None, fanout: bool | None = None,
                timeout: float | None = None, version: str | None = None) -> RPCClient:
        """A copy of this client with the target's server, fanout or version, or the timeout, replaced."""
        target = self.target
        if server is not None or fanout is not None or version is not None:
            target = Target(target.topic, target.server if server is None else server,
                            target.fanout if fanout is None else fanout,
                            target.version if version is None else version)
        return RPCClient(self.transport, target, self.timeout if timeout is None else timeout,
                         self.version_cap, self.api, self.consumer_check, self.require_queue, self._made)

    def can_send_version(self, version: str | None = None) -> bool:
        """Whether the cap lets this client send ``version`` (by default its target's)."""
        if self.version_cap is None:
            return True
        return versions.is_compatible(self.version_cap, version or self.target.version or versions.DEFAULT)

    def _check_version_cap(self, method: str) -> str:
        version = self.target.version or versions.DEFAULT
        if self.version_cap is not None and not versions.is_compatible(self.version_cap, version):
            raise RPCVersionCapError(method, version, self.version_cap, self.api)
        return version

    def _timeout(self) -> float:
        if self.timeout is None:
            return float(self.transport.conf.rpc_response_timeout)
        return self.timeout

    def _route(self) -> tuple[Any, int]:
        """(exchange, max_message_bytes) of this client's target."""
        target = self.target
        made = self._made.get(("route", target.fanout and target.topic))
        if made is None:
            exchange = (topology.fanout_exchange(target.topic) if target.fanout
                        else topology.topic_exchange(self.transport))
            # Replies have no such limit: only a server refuses what it reads.
            made = self._made[("route", target.fanout and target.topic)] = (
                exchange, self.transport.conf.oslo_messaging_rabbit.max_message_bytes)
        return made

    def _queue(self, key: str) -> Any:
        """The queue the target's server consumes ``key`` from, where the client declares it
        (Transport.queues_for_servers), else None. A fanout goes to the queues of the servers
        running (each its own): one that starts later loads the state the fanout tells of."""
        if self.target.fanout or not self.transport.queues_for_servers:
            return None
        made = self._made.get(("queue", key))
        if made is None:
            made = self._made[("queue", key)] = topology.shared_queue(self.transport, key)
        return made

    def _publish(self, msg: dict[str, Any], expiration: float | None = None, now: bool = False,
                 mandatory: bool = False) -> str:
        target = self.target
        key = target.topic if target.fanout else topology.routing_key(target)
        exchange, limit = self._route()
        self.transport.publisher.publish(envelope.wrap(msg), exchange, key, expiration=expiration, now=now,
                                         max_bytes=limit, queue=self._queue(key), mandatory=mandatory)
        return key

    def _cast_publish(self, msg: dict[str, Any]) -> str:
        """Publish a cast: with require_queue (and a target that does not fan out), mandatory."""
        return self._publish(msg, mandatory=self.require_queue and not self.target.fanout)

    def _count_cast(self, method: str) -> None:
        counter = self._made.get(("cast", self.target.topic, method))
        if counter is None:
            counter = self._made[("cast", self.target.topic, method)] = _metrics().CASTS.labels(
                self.target.topic, method)
        counter.inc()

    def cast(self, ctxt: Context, method: str, **kwargs: Any) -> None:
        """Send ``method(**kwargs)`` without waiting (to every server if the target fans out);
        RPCVersionCapError, and nothing sent, when the version it needs is above the cap."""
        msg = envelope.request(method, kwargs, ctxt, version=self._check_version_cap(method))
        key = self._cast_publish(msg)
        self._count_cast(method)
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("CAST %s to %s (unique_id %s%s)", method, key, msg["_unique_id"], _of_request(msg))

    def cast_each(self, method: str, calls: Sequence[tuple[Context, dict[str, Any]]],
                  bundled_from: str | None = None) -> None:
        """Cast ``method`` once per ``(context, kwargs)`` of ``calls``: each a request of its own.

        With ``bundled_from``, the version of the target's API whose servers take bundles, and a
        cap that lets this client send it, the casts travel ``BUNDLE_CASTS`` to a message (fewer
        when a message would pass max_message_bytes): the broker, this client and the server
        handle one message where they handled each. Otherwise each goes alone, as cast() sends it.
        """
        if self.target.fanout:
            raise ValueError("casts to a fanout target are not bundled; use cast")
        version = self._check_version_cap(method)
        msgs = [envelope.request(method, kwargs, ctxt, version=version) for ctxt, kwargs in calls]
        if bundled_from is None or len(msgs) < 2 or not self.can_send_version(bundled_from):
            for msg in msgs:
                self._cast_publish(msg)
                self._count_cast(method)
            return
        for start in range(0, len(msgs), BUNDLE_CASTS):
            self._publish_bundle(msgs[start:start + BUNDLE_CASTS], bundled_from)
        for _ in msgs:
            self._count_cast(method)

    def cast_apart(self, method: str, calls: Sequence[tuple[Context, dict[str, Any]]],
                   bundled_from: str) -> list[Exception | None]:
        """cast_each's casts, each call's outcome told apart: None once the broker has the message
        that carried it, else what publishing that message raised. Only a cast too large alone fails
        by itself; once a message fails otherwise, the calls it carried and those not sent yet fail
        with it. RPCVersionCapError is raised, nothing sent, as cast_each raises it."""
        if self.target.fanout:
            raise ValueError("casts to a fanout target are not bundled; use cast")
        version = self._check_version_cap(method)
        msgs = [envelope.request(method, kwargs, ctxt, version=version) for ctxt, kwargs in calls]
        size = BUNDLE_CASTS if self.can_send_version(bundled_from) else 1
        groups = collections.deque(range(start, min(start + size, len(msgs)))
                                   for start in range(0, len(msgs), size))
        outcomes: list[Exception | None] = [None] * len(msgs)
        failure: Exception | None = None
        while groups:
            group = groups.popleft()
            if failure is not None:
                for i in group:
                    outcomes[i] = failure
                continue
            try:
                self._publish_group(method, [msgs[i] for i in group], bundled_from)
            except MessageTooLarge as exc:
                if len(group) == 1:
                    outcomes[group[0]] = exc
                else:
                    half = len(group) // 2
                    groups.extendleft((group[half:], group[:half]))
            except Exception as exc:
                failure = exc
                for i in group:
                    outcomes[i] = exc
        return outcomes

    def _publish_group(self, method: str, msgs: list[dict[str, Any]], bundled_from: str) -> None:
        """Publish ``msgs``, casts of ``method``, in one message: alone as cast() sends it, or a bundle."""
        if len(msgs) == 1:
            key = self._cast_publish(msgs[0])
        else:
            key = self._cast_publish(envelope.bundle(msgs, bundled_from))
            _metrics().BUNDLES.labels(self.target.topic).inc()
            _metrics().BUNDLED_CASTS.labels(self.target.topic).inc(len(msgs))
        for _ in msgs:
            self._count_cast(method)
        if LOG.isEnabledFor(logging.DEBUG):
            if len(msgs) > 1:
                LOG.debug("CAST %d %s in one bundle to %s", len(msgs), method, key)
            else:
                LOG.debug("CAST %s to %s (unique_id %s%s)", method, key, msgs[0]["_unique_id"],
                          _of_request(msgs[0]))

    def _publish_bundle(self, msgs: list[dict[str, Any]], version: str) -> None:
        """Publish ``msgs`` as one bundle, or halves of it, each under max_message_bytes; a cast too
        large alone raises MessageTooLarge, as cast() would."""
        if len(msgs) == 1:
            self._cast_publish(msgs[0])
            return
        try:
            key = self._cast_publish(envelope.bundle(msgs, version))
        except MessageTooLarge:
            half = len(msgs) // 2
            self._publish_bundle(msgs[:half], version)
            self._publish_bundle(msgs[half:], version)
            return
        _metrics().BUNDLES.labels(self.target.topic).inc()
        _metrics().BUNDLED_CASTS.labels(self.target.topic).inc(len(msgs))
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("CAST %d %s in one bundle to %s", len(msgs), msgs[0]["method"], key)

    def call(self, ctxt: Context, method: str, **kwargs: Any) -> Any:
        """Run ``method(**kwargs)`` on one server and return its result.

        Raises MessagingTimeout when no reply comes within the timeout, RemoteError
        when the remote method raised, and RPCVersionCapError (before sending
        anything) when the version it needs is above the cap.
        """
        if self.target.fanout:
            raise ValueError("a call cannot fan out; use cast")
        version = self._check_version_cap(method)
        if self.consumer_check is not None:
            self.consumer_check.before_call(self.transport, topology.routing_key(self.target))
        timeout = self._timeout()
        deadline = time.monotonic() + timeout
        listener = self.transport.reply_listener()
        if not listener.wait_ready(timeout):
            raise MessagingTimeout(
                f"Timed out waiting for the reply queue to {method} on {self.transport.safe_url}"
            )
        msg_id = envelope.new_id()
        msg = envelope.request(method, kwargs, ctxt, msg_id=msg_id, reply_q=listener.queue_name, timeout=None,
                               version=version)
        replies = listener.register(msg_id)
        try:
            key = self._publish(msg, expiration=timeout, now=True)
            if LOG.isEnabledFor(logging.DEBUG):
                LOG.debug("CALL %s to %s (msg_id %s%s)", method, key, msg_id, _of_request(msg))
            result = None
            check = self.consumer_check
            notice_at = (time.monotonic() + check.NOTICE_AFTER
                         if check is not None and check.uncounted is not None else None)
            while True:
                until = deadline if notice_at is None else min(notice_at, deadline)
                try:
                    data = replies.get(timeout=max(until - time.monotonic(), 0))
                except queue.Empty:
                    if notice_at is not None and notice_at < deadline:
                        assert check is not None
                        check.waited(self.transport, check.NOTICE_AFTER, timeout)
                        notice_at = None
                        continue
                    raise MessagingTimeout(
                        f"Timed out after {timeout} s waiting for a reply to {method} "
                        f"(msg_id {msg_id}) on {key}"
                    ) from None
                notice_at = None
                if data.get("failure"):
                    raise envelope.failure_to_error(data["failure"])
                if data.get("result") is not None:
                    result = data["result"]
                if data.get("ending", False):
                    return result
                # ending False and no result: a call-monitor heartbeat; keep waiting.
        finally:
            listener.unregister(msg_id)


def _of_request(msg: dict[str, Any]) -> str:
    """", request <id>" of a message whose context names its request (sent after the request's
    handling, from an outbox, its log line would not say it otherwise)."""
    request_id = msg.get(envelope.CONTEXT_PREFIX + REQUEST_ID)
    return f", request {request_id}" if request_id else ""


def _metrics() -> types.ModuleType:
    """The counters of casts, imported at the first cast: a command that only calls never needs
    prometheus_client."""
    from scheduler.telemetry import rpc_metrics

    return rpc_metrics
