"""What a server does with bad messages and on stop."""

import json
import logging
import os
import threading

from scheduler import rpc
from tests.unit.rpc.conftest import WAIT, Recorder, publish_raw


def test_malformed_messages_are_acked_and_the_next_one_processed(transport, topic, start_server, caplog):
    endpoint = Recorder()
    server = start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))

    with caplog.at_level(logging.WARNING, logger="scheduler.rpc"):
        publish_raw(transport, topic, "{not json")
        publish_raw(transport, topic, json.dumps({"method": "record"}))  # no envelope
        publish_raw(transport, topic, "plain", content_type="text/plain")
        client.cast({}, "record", n=1)
        assert endpoint.wait_for(1)

        # Nothing of it comes back to the next server: it was all acked.
        server.stop()
        server.wait()
        later = Recorder()
        start_server([later])
        client.cast({}, "record", n=2)
        assert later.wait_for(1)

    assert [kwargs for _, kwargs in endpoint.received] == [{"n": 1}]
    assert [kwargs for _, kwargs in later.received] == [{"n": 2}]
    dropped = [r for r in caplog.records if "Dead-lettered a message" in r.getMessage()]
    assert len(dropped) == 3


def test_stop_finishes_the_message_in_flight_and_leaves_the_rest(transport, topic, start_server):
    entered, release = threading.Event(), threading.Event()
    done = []

    class Blocking:
        def work(self, context, n):
            entered.set()
            release.wait(WAIT)
            done.append(n)

    server = start_server([Blocking()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    client.cast({}, "work", n=1)
    assert entered.wait(WAIT)
    client.cast({}, "work", n=2)

    server.stop()
    release.set()
    server.wait()
    assert done == [1]

    class Next(Recorder):
        def work(self, context, n):
            self.record(context, n=n)

    successor = Next()
    start_server([successor])
    assert successor.wait_for(1)
    assert successor.received[0][1] == {"n": 2}


def test_clean_stop_removes_the_fanout_queue(conf, tmp_path, topic):
    conf.set_override("polling_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "filesystem://")
    try:
        server = rpc.get_rpc_server(transport, rpc.Target(topic=topic, server="h"), [Recorder()])
        server.start()
        control = os.path.join(conf.state_path, "broker", "control", f"{topic}_fanout.exchange")
        with open(control) as f:
            assert server.fanout_queue_name in f.read()

        server.stop()
        server.wait()
        rpc.RPCClient(transport, rpc.Target(topic=topic, fanout=True)).cast({}, "record")

        with open(control) as f:
            assert server.fanout_queue_name not in f.read()
        queues = os.listdir(os.path.join(conf.state_path, "broker", "queues"))
        assert not [name for name in queues if server.fanout_queue_name in name]
    finally:
        transport.cleanup()


def test_cleanup_stops_running_servers(conf, topic):
    transport = rpc.get_transport(conf, "memory://")
    server = rpc.get_rpc_server(transport, rpc.Target(topic=topic), [Recorder()])
    server.start()
    assert server.ready

    transport.cleanup()

    assert not server.ready
    assert not server._loop.alive
