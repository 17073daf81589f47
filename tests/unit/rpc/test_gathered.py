"""Casts gathered while a publish is out (a group commit): one message for those that came
meanwhile, each caller back once the message that carried its cast is confirmed."""

import threading
import time
import types

import pytest

from scheduler import rpc
from scheduler.rpc import envelope
from scheduler.rpc import gathered as gathered_module
from scheduler.rpc.exceptions import MessageDeliveryFailure, MessageTooLarge
from scheduler.rpc.gathered import GatheredCasts
from tests.unit.rpc.conftest import WAIT, Recorder
from tests.unit.rpc.test_bundles import _rid


class HeldPublisher:
    """The transport's publisher, its first publish held until ``release`` is set (a publish
    waiting for the broker's confirm), each publish's casts' arguments recorded (a list per message);
    ``fail`` raises instead of publishing the messages after the first."""

    def __init__(self, transport, monkeypatch, fail=None):
        self.entered, self.release = threading.Event(), threading.Event()
        self.messages = []
        self.fail = fail
        publish = transport.publisher.publish

        def held(body, *args, **kwargs):
            first = not self.entered.is_set()
            if first:
                self.entered.set()
                assert self.release.wait(WAIT)
            elif self.fail is not None:
                raise self.fail
            msg = envelope.unwrap(body)
            publish(body, *args, **kwargs)
            self.messages.append([c["args"] for c in envelope.bundled_casts(msg) or [msg]])

        monkeypatch.setattr(transport.publisher, "publish", held)

    def ns(self):
        """The ``n`` of each message's casts."""
        return [[args["n"] for args in message] for message in self.messages]


def _thread(gathered, n, errors, **more):
    def cast():
        try:
            gathered.cast({"request_id": _rid(n)}, n=n, **more)
        except Exception as exc:
            errors[n] = exc

    thread = threading.Thread(target=cast)
    thread.start()
    return thread


def _until(condition):
    deadline = time.monotonic() + WAIT
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert condition()


def _held_then(gathered, held, count, errors, more=None):
    """The first cast held at its publish, ``count`` more gathered meanwhile, then released: the
    threads, joined."""
    threads = [_thread(gathered, 0, errors)]
    assert held.entered.wait(WAIT)
    threads += [_thread(gathered, n, errors, **(more or {}).get(n, {})) for n in range(1, count + 1)]
    _until(lambda: gathered.gathered() == count)
    held.release.set()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)
    return threads


def test_casts_that_come_while_one_is_published_go_together_and_each_is_handled_once(
        transport, topic, start_server, monkeypatch):
    endpoint = Recorder()
    start_server([endpoint], server="s1")
    held = HeldPublisher(transport, monkeypatch)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0", limit=4)
    errors = {}
    _held_then(gathered, held, 6, errors)
    assert errors == {}
    # The lone first at once; the six that came while it was out, four to a message.
    assert [len(m) for m in held.ns()] == [1, 4, 2]
    assert sorted(n for m in held.ns() for n in m) == list(range(7))
    assert endpoint.wait_for(7)
    time.sleep(0.1)  # a cast handled twice would show now
    assert sorted(kw["n"] for _, kw in endpoint.received) == list(range(7))
    assert {c.values["request_id"]: kw["n"] for c, kw in endpoint.received} == {_rid(n): n for n in range(7)}


def test_a_lone_cast_is_published_at_once_and_so_is_the_next_one_after_it(transport, topic, monkeypatch):
    held = HeldPublisher(transport, monkeypatch)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0")
    errors = {}
    first = _thread(gathered, 0, errors)
    # Published while nothing else came: it waits for no company.
    assert held.entered.wait(WAIT)
    held.release.set()
    first.join(WAIT)
    gathered.cast({}, n=1)
    assert (held.ns(), errors, gathered.gathered()) == ([[0], [1]], {}, 0)


def test_a_failed_publish_raises_in_every_caller_whose_cast_it_carried(transport, topic, monkeypatch):
    failure = MessageDeliveryFailure("cannot publish to the broker after 3 attempts: connection refused")
    held = HeldPublisher(transport, monkeypatch, fail=failure)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0")
    errors = {}
    _held_then(gathered, held, 3, errors)
    assert held.ns() == [[0]]
    assert sorted(errors) == [1, 2, 3]
    assert all(type(exc) is MessageDeliveryFailure and str(exc) == str(failure) for exc in errors.values())
    # Each its own exception to raise, not one shared by three threads' tracebacks.
    assert len({id(exc) for exc in errors.values()}) == 3
    held.fail = None
    gathered.cast({}, n=4)  # nothing left waiting on the failure
    assert held.ns() == [[0], [4]]


def test_a_cast_too_large_fails_alone_and_the_others_gathered_with_it_go(transport, topic, conf, monkeypatch):
    conf.set_override("max_message_bytes", 2000, group="oslo_messaging_rabbit")
    held = HeldPublisher(transport, monkeypatch)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0")
    errors = {}
    _held_then(gathered, held, 3, errors, more={2: {"pad": "x" * 3000}})
    assert list(errors) == [2] and isinstance(errors[2], MessageTooLarge)
    assert sorted(n for m in held.ns() for n in m) == [0, 1, 3]


def test_casts_are_not_gathered_for_servers_that_cannot_read_bundles(transport, topic):
    client = rpc.RPCClient(transport, rpc.Target(topic), version_cap="1.2", api="demo")
    with pytest.raises(ValueError, match="the cap 1.2 of demo API is below 1.3"):
        GatheredCasts(client, "record", "1.3")
    with pytest.raises(ValueError, match="fanout"):
        GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic, fanout=True)), "record", "1.0")


def test_a_cast_inside_a_publishers_batch_goes_with_that_batch(transport, topic, monkeypatch):
    held = HeldPublisher(transport, monkeypatch)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0")
    errors = {}
    first = _thread(gathered, 0, errors)
    assert held.entered.wait(WAIT)

    def batched():
        with transport.publisher.batch():
            gathered.cast({}, n=1)
            gathered.cast({}, n=2)

    # Not gathered behind the first, still out: sent at the batch's end, before the first.
    thread = threading.Thread(target=batched)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert (held.ns(), gathered.gathered()) == ([[1], [2]], 0)
    held.release.set()
    first.join(WAIT)
    assert (held.ns(), errors) == ([[1], [2], [0]], {})


class Stoppable(threading.Event):
    """An event whose waiter is stopped on ``stop()`` (KeyboardInterrupt), as a killed
    greenthread is while it waits."""

    def __init__(self):
        super().__init__()
        self.stopped = False

    def wait(self, timeout=None):
        while not super().wait(0.01):
            if self.stopped:
                raise KeyboardInterrupt
        return True


def test_a_caller_stopped_while_it_waits_takes_its_cast_back_and_the_others_go(transport, topic,
                                                                               monkeypatch):
    events = []

    def event():
        events.append(Stoppable())
        return events[-1]

    monkeypatch.setattr(gathered_module, "threading", types.SimpleNamespace(Event=event, Lock=threading.Lock))
    held = HeldPublisher(transport, monkeypatch)
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0")
    stopped = []

    def cast(n):
        try:
            gathered.cast({}, n=n)
        except KeyboardInterrupt:
            stopped.append(n)

    threads = [threading.Thread(target=cast, args=(0,))]
    threads[0].start()
    assert held.entered.wait(WAIT)
    for n in (1, 2, 3):
        threads.append(threading.Thread(target=cast, args=(n,)))
        threads[-1].start()
        _until(lambda n=n: gathered.gathered() == n)
    events[-2].stopped = True  # of the three gathered, the second's: cast 2
    threads[2].join(WAIT)
    assert (stopped, gathered.gathered()) == ([2], 2)
    held.release.set()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(held.ns()) == [[0], [1, 3]]


def test_many_threads_casting_in_turn_each_have_every_cast_handled_once(transport, topic, start_server):
    endpoint = Recorder()
    start_server([endpoint], server="s1")
    gathered = GatheredCasts(rpc.RPCClient(transport, rpc.Target(topic)), "record", "1.0", limit=5)
    errors = []

    def casts(first):
        try:
            for n in range(first, first + 30):
                gathered.cast({}, n=n)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=casts, args=(30 * i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads) and errors == []
    assert endpoint.wait_for(360)
    time.sleep(0.1)  # a cast handled twice would show now
    assert sorted(kw["n"] for _, kw in endpoint.received) == list(range(360))
