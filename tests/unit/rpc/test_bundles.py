"""Bundles: several casts in one message, each handled by the server as if it came alone."""

import time

import kombu
import pytest

from scheduler import rpc
from scheduler.rpc import deadletter, deliveries, envelope, topology
from scheduler.rpc.bundles import Bundle
from tests.unit.rpc.conftest import Recorder, stop_and_count_waiting
from tests.unit.rpc.test_bad_input import dead_letters
from tests.unit.rpc.test_batches import Away, Endpoint, Work


def _waiting(transport, queue_name):
    """The inner messages waiting on ``queue_name`` (taken off it)."""
    found = []
    with transport.connection("test") as conn:
        queue = kombu.Queue(queue_name, channel=conn.default_channel)
        while (message := queue.get(no_ack=True)) is not None:
            found.append(envelope.unwrap(envelope.decode(message)))
    return found


def _declare(transport, topic):
    with transport.connection("test") as conn:
        topology.shared_queue(transport, topic)(conn.default_channel).declare()


def _rid(n):
    return f"req-00000000-0000-4000-8000-{n:012d}"


def _calls(count, first=0, **more):
    return [({"request_id": _rid(n), "user": "u1"}, {"n": n, **more}) for n in range(first, first + count)]


def test_casts_bundled_travel_as_one_message_that_carries_each_as_it_would_go_alone(transport, topic):
    _declare(transport, topic)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    client.cast_each("record", _calls(3), bundled_from="1.0")
    [bundle] = _waiting(transport, topic)
    casts = envelope.bundled_casts(bundle)
    assert [(c["method"], c["args"], c["_context_request_id"], c["version"]) for c in casts] == [
        ("record", {"n": n}, _rid(n), "1.0") for n in range(3)]
    assert bundle["version"] == "1.0"


@pytest.mark.parametrize(("cap", "bundled_from", "count"), [
    ("1.2", "1.3", 3),  # servers that may not read bundles yet: each alone
    (None, None, 3),  # no bundles asked for
    (None, "1.3", 1),
])
def test_casts_go_one_message_each_where_bundles_are_not_to_be_sent(transport, topic, cap, bundled_from,
                                                                   count):
    _declare(transport, topic)
    client = rpc.RPCClient(transport, rpc.Target(topic), version_cap=cap)
    client.cast_each("record", _calls(3), bundled_from=bundled_from)
    waiting = _waiting(transport, topic)
    if count == 3:
        assert [m["args"] for m in waiting] == [{"n": 0}, {"n": 1}, {"n": 2}]
    else:
        assert len(waiting) == 1 and len(envelope.bundled_casts(waiting[0])) == 3


def test_a_bundle_holds_at_most_a_hundred_casts_and_stays_under_max_message_bytes(transport, topic, conf):
    _declare(transport, topic)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    client.cast_each("record", _calls(250), bundled_from="1.0")
    assert [len(envelope.bundled_casts(m)) for m in _waiting(transport, topic)] == [100, 100, 50]
    [(ctxt, kwargs)] = _calls(1, first=10, pad="x" * 600)
    one = len(envelope.dumps(envelope.wrap(envelope.request("record", kwargs, ctxt))))
    conf.set_override("max_message_bytes", int(2.5 * one), group="oslo_messaging_rabbit")
    client = rpc.RPCClient(transport, rpc.Target(topic))
    client.cast_each("record", _calls(8, first=10, pad="x" * 600), bundled_from="1.0")
    waiting = _waiting(transport, topic)
    sizes = [len(envelope.bundled_casts(m)) if "casts" in m else 1 for m in waiting]
    assert sum(sizes) == 8 and max(sizes) == 2, sizes
    assert all(len(envelope.dumps(envelope.wrap(m))) <= 2.5 * one for m in waiting)


def test_each_cast_of_a_bundle_is_handled_with_its_own_context_and_the_bundle_acked(transport, topic):
    work = Work()
    endpoint = Recorder()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=2,
                                unit_of_work=work)
    server.start()
    client = rpc.RPCClient(transport, rpc.Target(topic))
    client.cast_each("record", _calls(5), bundled_from="1.0")
    assert endpoint.wait_for(5)
    assert [(c.values["request_id"], kw) for c, kw in endpoint.received] == [
        (_rid(n), {"n": n}) for n in range(5)]
    # Two to a unit of work (batch_size), though one message brought them all.
    assert stop_and_count_waiting(transport, [server], [topic]) == 0


def test_a_bad_cast_in_a_bundle_is_dead_lettered_alone_and_the_others_are_handled(transport, topic):
    endpoint = Recorder()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=8,
                                unit_of_work=Work())
    server.start()
    good = [envelope.request("record", {"n": n}, {"request_id": _rid(n)}) for n in (1, 2)]
    unknown = envelope.request("no_such_method", {}, {"request_id": _rid(8)})
    call = envelope.request("record", {"n": 3}, {"request_id": _rid(9)}, msg_id="m1", reply_q="reply_x")
    with transport.publisher.batch():
        transport.publisher.publish(envelope.wrap(envelope.bundle([good[0], unknown, call, good[1]], "1.0")),
                                    topology.topic_exchange(transport), topic)
    letters = dead_letters(transport, 2)
    assert endpoint.wait_for(2)
    assert [kw for _, kw in endpoint.received] == [{"n": 1}, {"n": 2}]
    reasons = {envelope.unwrap(envelope.decode(letter))["_context_request_id"]:
               letter.headers[deadletter.REASON] for letter in letters}
    assert reasons[_rid(8)].startswith("NoSuchMethod")
    assert reasons[_rid(9)] == ("InvalidEnvelope: a bundle carries casts only: a call in one would never "
                                "be answered")
    # Each dead letter is the cast alone, as it would have come without the bundle.
    assert {envelope.unwrap(envelope.decode(letter))["method"] for letter in letters} == {
        "no_such_method", "record"}
    assert stop_and_count_waiting(transport, [server], [topic]) == 0


@pytest.mark.parametrize("casts", [[], "record", [1, 2]])
def test_a_bundle_that_carries_no_list_of_casts_is_dead_lettered_whole(transport, topic, casts):
    endpoint = Recorder()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint])
    server.start()
    transport.publisher.publish(envelope.wrap({"casts": casts, "version": "1.0"}),
                                topology.topic_exchange(transport), topic)
    [letter] = dead_letters(transport, 1)
    assert letter.headers[deadletter.REASON].startswith("InvalidEnvelope: a bundle's cast")
    assert endpoint.received == []
    assert stop_and_count_waiting(transport, [server], [topic]) == 0


class Message:
    def __init__(self):
        self.acks, self.requeues = [], 0
        self.delivery_tag, self.channel = 7, None

    def ack(self, multiple=False):
        self.acks.append(multiple)

    def requeue(self):
        self.requeues += 1


def test_a_bundles_message_is_acked_once_every_cast_is_settled_and_handed_back_once():
    message = Message()
    first, second, third = Bundle(message, 3).casts([{}, {}, {}])
    first.ack()
    second.ack(multiple=True)
    second.ack()  # twice is once
    assert message.acks == []
    third.ack(multiple=True)
    assert message.acks == [True]

    message = Message()
    first, second = Bundle(message, 2).casts([{}, {}])
    first.ack()
    second.requeue()
    first.requeue()
    second.ack()
    assert (message.acks, message.requeues) == ([], 1)


def test_a_lone_cast_is_no_bundle():
    assert envelope.bundled_casts(envelope.request("record", {"casts": 1})) is None



class Redelivered:
    """A bundle as the broker gives it again, after a worker stopped while handling it."""

    content_type, content_encoding = "application/json", "utf-8"
    properties, headers, delivery_tag, channel = {}, {}, 1, None

    def __init__(self, topic, msgs):
        self.body = envelope.dumps(envelope.wrap(envelope.bundle(msgs, "1.0"))).encode()
        self.delivery_info = {"redelivered": True, "exchange": "openstack", "routing_key": topic}
        self.acks = 0

    def ack(self, multiple=False):
        self.acks += 1

    def requeue(self):
        raise AssertionError("handed back")


def test_a_bundle_that_stopped_its_workers_delivery_limit_times_loses_only_the_cast_that_stops_them(
        transport, topic, conf):
    conf.set_override("delivery_limit", 3, group="oslo_messaging_rabbit")
    endpoint = Recorder()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=8,
                                unit_of_work=Work())
    message = Redelivered(topic, [envelope.request("record", {"n": n}, {"request_id": _rid(n)})
                                  for n in range(3)])
    key = deliveries.fingerprint(message)
    dead_letters(transport, 0)  # the dead-letter queue declared, as a started server does
    # Three workers stopped on the bundle; the last, handling its casts alone, on the second.
    log = server._deliveries
    for _ in range(3):
        log.begin(key)
    log.begin(f"{key}/1")
    server._handle_redelivered(message)
    server._settle()
    assert [kw for _, kw in endpoint.received] == [{"n": 0}, {"n": 2}]
    [letter] = dead_letters(transport, 1)
    assert envelope.unwrap(envelope.decode(letter))["args"] == {"n": 1}
    assert letter.headers[deadletter.REASON] == (
        "DeliveryLimitExceeded: the worker handling it alone stopped; its bundle had stopped the workers "
        "handling it 3 times (delivery_limit 3)")
    assert message.acks == 1
    assert log.begin("anything") == 0 and log.begin(key) == 0  # every count settled


def test_bundles_wait_out_a_database_away_whole_and_then_every_cast_is_handled_once(transport, topic, conf):
    conf.set_override("rabbit_retry_interval", 0.2, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_backoff", 0.2, group="oslo_messaging_rabbit")
    work = Away()
    endpoint = Endpoint(work)
    endpoint.go.set()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=8,
                                unit_of_work=work)
    server.start()
    client = rpc.RPCClient(transport, rpc.Target(topic))
    try:
        work.away.set()
        # More than a unit of work takes: the first 8 are held, the other 4 wait behind them.
        client.cast_each("record", _calls(12, first=1), bundled_from="1.0")
        for _ in range(200):
            if work.attempts >= 2:
                break
            time.sleep(0.05)
        client.cast_each("record", _calls(3, first=13), bundled_from="1.0")  # comes while held
        time.sleep(0.5)
        assert work.commits == []
        work.away.clear()
        for _ in range(200):
            if sorted(n for batch in work.commits for n in batch) == list(range(1, 16)):
                break
            time.sleep(0.05)
    finally:
        waiting = stop_and_count_waiting(transport, [server], [topic])
    assert sorted(n for batch in work.commits for n in batch) == list(range(1, 16))
    assert server.dead_letters.count == 0 and waiting == 0
