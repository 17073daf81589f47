"""filesystem:// carries casts, calls and fanout between OS processes."""

import os
import subprocess
import sys

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


@pytest.fixture
def child(conf, topic):
    proc = subprocess.Popen(
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
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_call_and_cast_reach_a_server_in_another_process(fs_transport, topic, child):
    client = rpc.RPCClient(fs_transport, rpc.Target(topic=topic), timeout=WAIT)

    result = client.prepare(server="child").call({"user": "u"}, "echo", n=1)
    client.cast({}, "record", n=2)

    request_id = result["context"].pop("request_id")  # made at receipt: the caller sent none
    assert result == {"pid": child.pid, "args": {"n": 1}, "context": {"user": "u"}}
    assert rpc.context.is_request_id(request_id)
    assert child.stdout.readline().strip() == "cast {'n': 2}"


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
