"""A broker that cannot be reached: a command gives up within its timeout, in one line
naming the broker; a daemon waits for it, says so, and says when it connected."""

import io
import logging
import os
import signal
import threading
import time

import pytest
from amqp import exceptions as amqp_exceptions

from scheduler import rpc
from scheduler.cmd import cli
from scheduler.process import running
from scheduler.rpc import transport as transport_mod

NOWHERE = "rabbit://u:secret@127.0.0.1:1/"  # nothing listens there: refused at once
REFUSED = "cannot reach the message broker at rabbit://u:***@127.0.0.1:1/: [Errno 111] Connection refused"
WAITING = "Waiting for the message broker at rabbit://u:***@127.0.0.1:1/: {}; retrying"
LOGIN = "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN."


@pytest.fixture
def nowhere(conf):
    for name, value in (("rabbit_retry_interval", 0.01), ("rabbit_retry_backoff", 0.0),
                        ("rabbit_interval_max", 0.01)):
        conf.set_override(name, value, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, NOWHERE)
    yield transport
    transport.cleanup()


def failing(transport, *errors):
    """Make the publisher's connect raise ``errors`` in turn, then connect; returns its calls."""
    calls, errors = [], list(errors)

    def connect(timeout):
        calls.append(timeout)
        if errors:
            raise errors.pop(0)

    transport.publisher.connect = connect
    return calls


def messages(caplog):
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == transport_mod.__name__]


def test_a_command_gives_up_on_a_refused_broker_within_its_timeout(nowhere):
    began = time.monotonic()
    with pytest.raises(rpc.BrokerUnreachable) as info:
        nowhere.reach(0.3)
    assert str(info.value) == REFUSED
    assert time.monotonic() - began < 2


def test_a_refused_login_is_said_at_once_not_tried_again(nowhere):
    calls = failing(nowhere, *[amqp_exceptions.AccessRefused(LOGIN)] * 3)
    with pytest.raises(rpc.LoginRefused) as info:
        nowhere.reach(10)
    assert str(info.value) == f"the message broker at rabbit://u:***@127.0.0.1:1/ refused the login: {LOGIN}"
    with pytest.raises(rpc.LoginRefused):
        nowhere.wait_for_broker(threading.Event())
    assert len(calls) == 2


def test_a_missing_vhost_ends_a_command_at_once_but_a_daemon_waits_for_it(nowhere, caplog):
    missing = amqp_exceptions.NotAllowed("NOT_ALLOWED - vhost berth not found")
    calls = failing(nowhere, missing)
    with pytest.raises(rpc.BrokerUnreachable) as info:
        nowhere.reach(10)
    assert str(info.value) == ("the message broker at rabbit://u:***@127.0.0.1:1/ refused the connection: "
                               "NOT_ALLOWED - vhost berth not found")
    assert len(calls) == 1
    failing(nowhere, missing, missing)
    with caplog.at_level(logging.INFO):
        assert nowhere.wait_for_broker(threading.Event())
    assert messages(caplog)[0] == ("WARNING", WAITING.format("NOT_ALLOWED - vhost berth not found"))


def test_a_daemon_says_once_that_it_waits_then_that_it_connected(nowhere, caplog):
    calls = failing(nowhere, *[ConnectionRefusedError(111, "Connection refused")] * 20)
    with caplog.at_level(logging.INFO):
        assert nowhere.wait_for_broker(threading.Event())
    assert len(calls) == 21
    assert messages(caplog) == [
        ("WARNING", WAITING.format("[Errno 111] Connection refused")),
        ("INFO", "Connected to the message broker at rabbit://u:***@127.0.0.1:1/"),
    ]


def test_a_daemon_says_it_again_when_the_reason_changes_and_after_a_while(nowhere, caplog, monkeypatch):
    refused = ConnectionRefusedError(111, "Connection refused")
    failing(nowhere, refused, refused, TimeoutError("timed out"), refused)
    with caplog.at_level(logging.WARNING):
        assert nowhere.wait_for_broker(threading.Event())
    assert [m for _, m in messages(caplog)] == [
        WAITING.format(why) for why in ("[Errno 111] Connection refused", "no answer within 5 s",
                                        "[Errno 111] Connection refused")]
    caplog.clear()
    monkeypatch.setattr(transport_mod, "WAITING_REPEAT", 0.0)
    failing(nowhere, refused, refused, refused)
    with caplog.at_level(logging.WARNING):
        assert nowhere.wait_for_broker(threading.Event())
    assert len(messages(caplog)) == 3


def test_a_daemon_really_waiting_is_stopped_by_its_stop_event(nowhere, caplog):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with caplog.at_level(logging.INFO):
        assert nowhere.wait_for_broker(stop) is False
    assert messages(caplog) == [
        ("WARNING", WAITING.format("[Errno 111] Connection refused")),
        ("INFO", "Stopped waiting for the message broker at rabbit://u:***@127.0.0.1:1/"),
    ]


class Service:
    def __init__(self):
        self.events = []

    def start(self):
        self.events.append("start")

    def stop(self):
        self.events.append("stop")


@pytest.fixture
def sigterm_survived():
    """A SIGTERM that nothing else handles leaves the test run alone."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_while_waiting_for_the_broker_stops_before_any_service_starts(nowhere, sigterm_survived):
    service = Service()
    signalling = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    signalling.start()
    began = time.monotonic()
    try:
        running.run_until_signalled([service], nowhere)
    finally:
        signalling.join()  # before sigterm_survived stops handling it
    assert time.monotonic() - began < 5
    assert service.events == []


def test_a_service_starts_once_the_broker_answers(nowhere, sigterm_survived):
    service = Service()
    failing(nowhere, ConnectionRefusedError(111, "Connection refused"))
    service.start = lambda: (service.events.append("start"), os.kill(os.getpid(), signal.SIGTERM))
    running.run_until_signalled([service], nowhere)
    assert service.events == ["start", "stop"]


def test_transports_without_a_broker_have_nothing_to_wait_for(transport, caplog):
    transport.publisher.connect = None  # not called
    with caplog.at_level(logging.DEBUG):
        transport.reach(0)
        assert transport.wait_for_broker(threading.Event())
    assert messages(caplog) == []


@pytest.mark.parametrize("argv", [["hosts"], ["boot", "--flavor", "m1.tiny"],
                                  ["delete", "00000000-0000-4000-8000-000000000000"]])
def test_the_command_line_says_it_in_one_line_and_sends_nothing(tmp_path, capsys, argv):
    conf = tmp_path / "berth.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = {NOWHERE}\nstate_path = {tmp_path}\n")
    out = io.StringIO()
    began = time.monotonic()
    assert cli.main(["--config-file", str(conf), "--connect-timeout", "0.5", *argv], out=out) == 1
    assert time.monotonic() - began < 5
    assert (out.getvalue(), capsys.readouterr().err) == ("", f"berth: {REFUSED}\n")
