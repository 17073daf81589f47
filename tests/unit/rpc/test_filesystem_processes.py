"""filesystem:// carries casts, calls and fanout between OS processes."""

import os
import subprocess
import sys
import threading
import time

import kombu
import pytest

from scheduler import rpc
from tests.unit.rpc.conftest import WAIT, Recorder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


@pytest.fixture
def fs_transport(conf):
    conf.set_override("polling_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "filesystem://")
    yield transport
    transport.cleanup()


def start_child(conf, topic, **popen):
    """The child server's process, started: ready once its line "ready" is read."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.unit.rpc.child_server",
            "filesystem://",
            conf.state_path,
            conf.control_exchange,
            topic,
            "child",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **popen,
    )


def stop_child(proc):
    if proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def child(conf, topic):
    proc = start_child(conf, topic)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        stop_child(proc)


def queued(conf, queue):
    """The message files waiting in ``queue``."""
    folder = os.path.join(conf.state_path, "broker", "queues")
    return [name for name in os.listdir(folder) if name.partition(".")[2] == f"{queue}.msg"]


def test_call_and_cast_reach_a_server_in_another_process(fs_transport, topic, child):
    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic), timeout=WAIT)

    result = client.prepare(server="child").call({"user": "u"}, "echo", n=1)
    client.cast({}, "record", n=2)

    request_id = result["context"].pop("request_id")  # made at receipt: the caller sent none
    assert result == {"pid": child.pid, "args": {"n": 1}, "context": {"user": "u"}}
    assert rpc.context.is_request_id(request_id)
    assert child.stdout.readline().strip() == "cast {'n': 2}"


def test_a_cast_sent_before_its_server_ever_started_reaches_it_once_it_does(conf, fs_transport, topic):
    rpc.RPCClient(fs_transport, rpc.Target(topic=topic)).cast({}, "record", n=1)
    rpc.RPCClient(fs_transport, rpc.Target(topic=topic, server="child")).cast({}, "record", n=2)
    assert len(queued(conf, topic)) == len(queued(conf, f"{topic}.child")) == 1  # waiting, not dropped

    proc = start_child(conf, topic)
    try:
        said = sorted(proc.stdout.readline().strip() for _ in range(3))  # "ready" may come after a cast
        assert said == ["cast {'n': 1}", "cast {'n': 2}", "ready"]
    finally:
        stop_child(proc)
    assert queued(conf, topic) == queued(conf, f"{topic}.child") == []


@pytest.mark.parametrize("server", [None, "child"], ids=["topic", "server"])
def test_a_call_sent_before_its_server_ever_started_is_answered_once_it_does(conf, fs_transport, topic,
                                                                            server):
    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic, server=server), timeout=WAIT)
    answers = []
    calling = threading.Thread(target=lambda: answers.append(client.call({}, "echo", n=3)))
    calling.start()
    queue = topic if server is None else f"{topic}.{server}"
    deadline = time.monotonic() + WAIT
    while not queued(conf, queue) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(queued(conf, queue)) == 1  # sent while nothing had ever declared the queue

    proc = start_child(conf, topic)
    try:
        calling.join(WAIT)
        assert not calling.is_alive()
        [answer] = answers
        assert (answer["pid"], answer["args"]) == (proc.pid, {"n": 3})
    finally:
        stop_child(proc)


def test_a_call_whose_caller_gave_up_is_dropped_with_a_warning_not_run_when_a_server_starts(
        conf, fs_transport, topic):
    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic), timeout=0.5)
    with pytest.raises(rpc.MessagingTimeout):
        client.call({}, "record", n=1)
    assert len(queued(conf, topic)) == 1
    time.sleep(0.1)  # past its expiration by the file's clock, not only by the caller's
    rpc.RPCClient(fs_transport, rpc.Target(topic=topic)).cast({}, "record", n=2)

    proc = start_child(conf, topic, stderr=subprocess.PIPE)
    try:
        said = sorted(proc.stdout.readline().strip() for _ in range(2))
        assert said == ["cast {'n': 2}", "ready"]  # the call, older, would have come first
    finally:
        stop_child(proc)
    assert proc.stdout.read().strip() == "stopped"
    warning = proc.stderr.read()
    assert f"Dropped a message of queue {topic}: its caller stopped waiting for it" in warning, warning
    assert "it expired 0.5 s after it was sent" in warning
    assert queued(conf, topic) == []


def test_fanout_reaches_servers_in_both_processes_and_child_cleans_up(conf, fs_transport, topic, child):
    here = Recorder()
    server = rpc.get_rpc_server(fs_transport, rpc.Target(topic=topic, server="parent"), [here])
    server.start()

    rpc.RPCClient(fs_transport, rpc.Target(topic=topic, fanout=True)).cast({}, "record", r=1)

    assert child.stdout.readline().strip() == "cast {'r': 1}"
    assert here.wait_for(1)

    child.stdin.close()
    assert child.stdout.readline().strip() == "stopped"
    assert child.wait(WAIT) == 0
    control = os.path.join(conf.state_path, "broker", "control", f"{topic}_fanout.exchange")
    with open(control) as f:
        assert f.read().count(f"{topic}_fanout_") == 1  # only ours is left
    server.stop()
    server.wait()


def test_a_message_a_killed_process_had_taken_comes_back_to_the_next_consumer(fs_transport, topic, child):
    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic), timeout=WAIT)
    client.cast({}, "block", n=7)
    assert child.stdout.readline().strip() == "blocking {'n': 7}"
    child.kill()  # it took the message and never acknowledged it
    child.wait(WAIT)
    recorder = Recorder()
    server = rpc.get_rpc_server(fs_transport, rpc.Target(topic=topic, server="heir"), [Block(recorder)])
    server.start()
    try:
        assert recorder.wait_for(1)
    finally:
        server.stop()
        server.wait()
    [(context, kwargs)] = recorder.received
    assert kwargs == {"n": 7} and context.redelivered


class Block:
    def __init__(self, recorder):
        self.recorder = recorder

    def block(self, context, **kwargs):
        self.recorder.record(context, **kwargs)


def test_a_message_is_handed_back_on_a_full_disk(conf, fs_transport, topic, monkeypatch):
    from scheduler.rpc import filesystem

    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic), timeout=WAIT)
    with fs_transport.connection("test") as connection:
        queue = kombu.Queue(topic, exchange=kombu.Exchange(conf.control_exchange, "topic"), routing_key=topic)
        simple = connection.SimpleQueue(queue)
        client.cast({}, "record", n=1)
        message = simple.get(timeout=WAIT)

        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(filesystem.Channel, "_put", full)
        message.requeue()  # needs no space: the taken file goes back
        again = simple.get(timeout=WAIT)
        assert again.delivery_info["redelivered"] and again.payload == message.payload
        again.ack()
        simple.close()
