"""Bad messages: a call is answered with what was wrong, a cast is dead-lettered
with the reason in its headers, and the server goes on with the next message."""

import json
import logging
import os
import time

import pytest

from scheduler import rpc
from scheduler.rpc import deadletter, envelope, topology
from tests.unit.rpc.conftest import WAIT, Recorder, publish_raw
from tests.unit.telemetry.scrape import value


def dead_letters(transport, expected, timeout=WAIT):
    """The messages of the dead-letter queue (consumed), once there are ``expected``."""
    found = []
    deadline = time.monotonic() + timeout
    with transport.connection("test-dlq") as conn:
        queue = topology.dead_letter_queue(transport)(conn.channel())
        queue.declare()
        while len(found) < expected and time.monotonic() < deadline:
            message = queue.get(no_ack=True)
            if message is None:
                time.sleep(0.02)
                continue
            found.append(message)
    return found


class Strict(Recorder):
    def place(self, context, host, count=1):
        self.record(context, host=host, count=count)
        return host

    def explode(self, context):
        raise RuntimeError("endpoint bug")

    def listing(self, context, size):
        return ["x" * 100] * size


@pytest.fixture
def server(start_server):
    endpoint = Strict()
    start_server([endpoint])
    return endpoint


def test_bad_casts_are_dead_lettered_with_the_reason_and_valid_ones_flow(transport, topic, server):
    classes = ("InvalidEnvelope", "NoSuchMethod", "InvalidArguments", "RuntimeError")
    counted = {name: value("berth_rpc_dead_letters_total", queue=topic, reason=name) for name in classes}
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    publish_raw(transport, topic, "{not json")
    publish_raw(transport, topic, json.dumps({"oslo.version": "3.0", "oslo.message": "{}"}))
    publish_raw(transport, topic, b"\xff\xfe\xfa")
    client.cast({}, "no_such_method")
    client.cast({}, "_private")
    client.cast({}, "place")  # host missing
    client.cast({}, "place", host="h1", color="red")  # unexpected argument
    client.cast({}, "explode")
    client.cast({}, "place", host="h2")

    assert server.wait_for(1)
    letters = dead_letters(transport, 8)
    reasons = [m.headers[deadletter.REASON] for m in letters]
    assert len(reasons) == 8, reasons
    assert reasons[0].startswith("InvalidEnvelope: cannot decode the body")
    assert reasons[1] == "InvalidEnvelope: unsupported envelope version '3.0'; this server speaks 2.0"
    assert reasons[2].startswith("InvalidEnvelope: cannot decode the body")
    assert reasons[3] == "NoSuchMethod: Endpoint does not support RPC method no_such_method"
    assert reasons[4] == "NoSuchMethod: Endpoint does not support RPC method _private"
    assert reasons[5] == "InvalidArguments: place: missing a required argument: 'host'"
    assert reasons[6] == "InvalidArguments: place: got an unexpected keyword argument 'color'"
    assert reasons[7] == "RuntimeError: endpoint bug"
    assert [m.headers[deadletter.METHOD] for m in letters[3:]] == [
        "no_such_method",
        "_private",
        "place",
        "place",
        "explode",
    ]
    assert {m.headers[deadletter.ROUTING_KEY] for m in letters} == {topic}
    # The original body, unchanged, for the operator to look at.
    assert letters[0].body in (b"{not json", "{not json")
    assert [kwargs for _, kwargs in server.received] == [{"host": "h2", "count": 1}]
    # What Prometheus is told: the letters by the exception's class.
    assert {name: value("berth_rpc_dead_letters_total", queue=topic, reason=name) - counted[name]
            for name in classes} == {"InvalidEnvelope": 3, "NoSuchMethod": 2, "InvalidArguments": 2,
                                       "RuntimeError": 1}
    assert value("berth_rpc_batch_messages_count", topic=topic) >= 1  # the valid cast's unit of work


def test_an_oversized_body_is_refused_undecoded_and_kept_truncated(conf, transport, topic, server):
    conf.set_override("max_message_bytes", 2048, group="oslo_messaging_rabbit")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    # From a client that does not look (Berth's own refuses to send it: see below).
    oversized = envelope.wrap(envelope.request("place", {"host": "x" * 100_000}))
    publish_raw(transport, topic, json.dumps(oversized))
    client.cast({}, "place", host="ok")
    assert server.wait_for(1)
    [letter] = dead_letters(transport, 1)
    assert letter.headers[deadletter.REASON].startswith("MessageTooLarge: message body of")
    assert letter.headers[deadletter.TRUNCATED] > 100_000
    assert len(letter.body) == deadletter.KEEP_BYTES
    assert server.received[0][1]["host"] == "ok"


@pytest.mark.parametrize("transport_url", ["filesystem://"])
@pytest.mark.parametrize("bound", [{"dead_letter_max_length": 4}, {"dead_letter_max_bytes": 20_000}])
def test_the_dead_letters_stored_on_the_filesystem_keep_the_newest_within_their_bounds(
        conf, transport, topic, start_server, bound):
    for name, setting in bound.items():
        conf.set_override(name, setting, group="oslo_messaging_rabbit")
    endpoint = Strict()
    start_server([endpoint])
    for index in range(10):
        publish_raw(transport, topic, f"{index:04d} not JSON ".ljust(3000, "x"))
    rpc.RPCClient(transport, rpc.Target(topic=topic)).cast({}, "place", host="after")
    assert endpoint.wait_for(1)
    folder = os.path.join(conf.state_path, "broker", "queues")
    stored = [os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
              if f.endswith(f".{conf.control_exchange}.dead-letters.msg")]
    letters = dead_letters(transport, 10, timeout=1)
    kept = len(letters)
    assert [letter.body[:4] for letter in letters] == [f"{i:04d}".encode() for i in range(10 - kept, 10)]
    if "dead_letter_max_length" in bound:
        assert kept == 4
    else:  # each file holds a body of 3,000 bytes (base64) and its headers
        assert 3 <= kept <= 6 and sum(stored) <= 20_000


def test_a_message_a_server_would_refuse_for_its_size_is_not_sent(conf, transport, topic, server):
    conf.set_override("max_message_bytes", 2048, group="oslo_messaging_rabbit")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    with pytest.raises(rpc.MessageDeliveryFailure, match=r"a message of \d+ bytes: a Berth server refuses"):
        client.cast({}, "place", host="é" * 1500)  # 1,500 characters, over 3,000 bytes
    client.cast({}, "place", host="ok")
    assert server.wait_for(1)
    assert dead_letters(transport, 1, timeout=0.5) == []


def test_a_reply_larger_than_max_message_bytes_still_reaches_the_caller(conf, transport, topic, server):
    # The limit guards what a server reads; a listing of many instances is a large reply.
    conf.set_override("max_message_bytes", 2048, group="oslo_messaging_rabbit")
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    assert client.call({}, "listing", size=100) == ["x" * 100] * 100  # over 10,000 bytes


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, "InvalidArguments: place: missing a required argument: 'host'"),
        ({"host": "h", "extra": 1}, "InvalidArguments: place: got an unexpected keyword argument 'extra'"),
    ],
)
def test_a_bad_call_gets_a_failure_naming_what_was_wrong(transport, topic, server, kwargs, error):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    with pytest.raises(rpc.RemoteError) as info:
        client.call({}, "place", **kwargs)
    assert str(info.value) == error
    assert client.call({}, "place", host="fine") == "fine"
    assert dead_letters(transport, 1, timeout=0.2) == []  # answered, not dead-lettered


def test_a_call_with_args_that_are_not_an_object_is_answered(transport, topic, server):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    original = envelope.request

    def bad_request(method, args, *a, **kw):
        msg = original(method, args, *a, **kw)
        msg["args"] = ["not", "an", "object"]
        return msg

    envelope.request = bad_request
    try:
        with pytest.raises(rpc.RemoteError) as info:
            client.call({}, "place", host="h")
    finally:
        envelope.request = original
    assert info.value.exc_type == "InvalidEnvelope"
    assert "args are not an object" in str(info.value)


def test_a_failed_call_logs_its_own_traceback_at_debug(transport, topic, server, caplog):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    with caplog.at_level(logging.DEBUG, logger="scheduler.rpc"), pytest.raises(rpc.RemoteError):
        client.call({}, "explode")
    [traceback] = [r for r in caplog.records if r.getMessage() == "Traceback of the failed call of explode"]
    # The endpoint's exception, not "NoneType: None" (no exception being handled at that point).
    assert traceback.exc_info[0] is RuntimeError
    assert "endpoint bug" in caplog.text and "NoneType: None" not in caplog.text


def test_identical_refusals_are_logged_once(transport, topic, server, caplog):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    with caplog.at_level(logging.WARNING, logger="scheduler.rpc"):
        for _ in range(20):
            client.cast({}, "no_such_method")
        client.cast({}, "place", host="h")
        assert server.wait_for(1)
    assert len(dead_letters(transport, 20)) == 20
    lines = [r for r in caplog.records if "Dead-lettered" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].levelno == logging.WARNING and lines[0].exc_info is None


def test_a_refused_call_is_logged_by_the_server_not_as_a_dead_letter(transport, topic, server, caplog):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    with caplog.at_level(logging.INFO, logger="scheduler.rpc"), pytest.raises(rpc.RemoteError):
        client.call({}, "place", hots="h1")
    [line] = [r for r in caplog.records if r.getMessage().startswith("Call of place on")]
    assert (line.name, line.levelno) == ("scheduler.rpc.server", logging.INFO)
    assert "refused: InvalidArguments" in line.getMessage()


def test_log_once_counts_what_it_suppressed():
    records = []

    class Logger:
        def log(self, level, fmt, *args):
            records.append(fmt % args)

    limiter = deadletter.LogOnce(Logger(), interval=0.0)
    limiter.log("k", logging.WARNING, "bad %s", "x")
    limiter.log("k", logging.WARNING, "bad %s", "x")
    assert records == ["bad x", "bad x"]
    limiter = deadletter.LogOnce(Logger(), interval=3600)
    for _ in range(5):
        limiter.log("k", logging.WARNING, "again")
    assert records[2:] == ["again"]


def _call_with_reply_queue(reply_q, method="place", **args):
    msg = envelope.request(method, args, {}, msg_id="m1", reply_q=reply_q)
    return json.dumps(envelope.wrap(msg))


def test_a_call_whose_answer_cannot_be_sent_is_done_acked_and_logged_once(transport, topic, server, caplog):
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    with caplog.at_level(logging.WARNING, logger="scheduler.rpc"):
        publish_raw(transport, topic, _call_with_reply_queue("reply_" + "é" * 200, host="h1"))
        publish_raw(transport, topic, _call_with_reply_queue("reply_" + "é" * 200, host="h2"))
        publish_raw(transport, topic, _call_with_reply_queue("compute.h1", host="h3"))
        assert client.call({}, "place", host="h4") == "h4"
    assert [kwargs["host"] for _, kwargs in server.received] == ["h1", "h2", "h3", "h4"]
    lines = [r.getMessage() for r in caplog.records if "cannot be answered" in r.getMessage()]
    assert len(lines) == 1  # unanswerable calls of a method: one line a minute, then a count
    assert "406 bytes in UTF-8, over AMQP's 255" in lines[0]
    assert dead_letters(transport, 1, timeout=0.5) == []


def test_a_message_that_is_not_text_is_dead_lettered(transport, topic, server):
    publish_raw(transport, topic, _call_with_reply_queue("reply_\ud800", host="h1"))
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    assert client.call({}, "place", host="h2") == "h2"
    [letter] = dead_letters(transport, 1)
    assert "lone surrogate" in letter.headers[deadletter.REASON]
    assert [kwargs["host"] for _, kwargs in server.received] == ["h2"]


def test_a_dead_letter_keeps_a_routing_key_no_name_can_hold_as_its_escape(transport, topic, server):
    message = type("Message", (), {})()
    message.delivery_info = {"exchange": "scheduler_fanout", "routing_key": "scheduler\ud800"}
    message.body = b"{}"
    message.content_type = "application/json\ud800"
    message.content_encoding = "utf-8"
    letters = deadletter.DeadLetters(transport, topic)
    letters.send(message, ValueError("bad \ud800 value"))
    [letter] = dead_letters(transport, 1)
    assert letter.headers[deadletter.ROUTING_KEY] == "scheduler\\ud800"
    assert letter.headers[deadletter.REASON] == "ValueError: bad \\ud800 value"
