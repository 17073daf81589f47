"""Each message a server handles is logged under its own request id, batch or not, a line about
no request under none, and a dead letter says which request it came with."""

import logging
import threading

from scheduler import rpc
from scheduler.rpc import deadletter
from tests.unit.logs import request_ids, service_log
from tests.unit.rpc.conftest import WAIT, Recorder
from tests.unit.rpc.test_bad_input import dead_letters

LOG = logging.getLogger(__name__)


class Talker(Recorder):
    def __init__(self):
        super().__init__()
        self.go = threading.Event()
        self.go.set()

    def say(self, context, n):
        if n == 0:
            self.go.wait(WAIT)  # hold the server while the others queue up behind
        LOG.info("Handling message %d", n)
        self.record(context, n=n)


def said(lines, text):
    return [line for line in lines if text in line]


def test_each_message_of_a_batch_is_logged_under_its_own_request(conf, tmp_path, transport, topic):
    endpoint = Talker()
    endpoint.go.clear()
    server = rpc.get_rpc_server(transport, rpc.Target(topic=topic, server="s1"), [endpoint], batch_size=16)
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    sent = [rpc.new_request_id() for _ in range(5)]
    with service_log(conf, tmp_path / "server.log") as read:
        server.start()
        try:
            for n, request_id in enumerate(sent):
                client.cast({"request_id": request_id}, "say", n=n)
            client.cast({}, "say", n=5)  # without a request id: it gets one of its own
            endpoint.go.set()
            assert endpoint.wait_for(6)
        finally:
            server.stop()
            server.wait()
        lines = read()
    got = [request_ids(line) for n in range(6) for line in said(lines, f"Handling message {n}")]
    assert got[:5] == [[request_id] for request_id in sent]
    assert len(got[5]) == 1 and got[5][0] not in sent


def test_a_line_about_no_request_names_none(conf, tmp_path):
    request_id = rpc.new_request_id()
    jobs = [({"request_id": rpc.new_request_id()}, n) for n in range(3)]
    with service_log(conf, tmp_path / "berth.log") as read:
        with rpc.handling({"request_id": request_id}):
            LOG.info("Within the request")
            for _context, n in rpc.each_request(jobs):
                LOG.info("Job %d", n)
                if n == 1:
                    break
            LOG.info("Within the request again")
        LOG.info("Between requests")
        lines = read()
    assert [request_ids(line) for line in lines] == [
        [request_id], [jobs[0][0]["request_id"]], [jobs[1][0]["request_id"]], [request_id], []]
    assert " [-] Between requests" in lines[-1]


def test_a_dead_letter_says_which_request_it_came_with(conf, tmp_path, transport, topic, start_server):
    start_server([Talker()])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    request_id = rpc.new_request_id()
    with service_log(conf, tmp_path / "server.log") as read:
        client.cast({"request_id": request_id}, "say")  # n missing
        client.cast({}, "no_such_method")
        letters = dead_letters(transport, 2)
        lines = said(read(), "Dead-lettered a cast of ")
    assert letters[0].headers[deadletter.REQUEST_ID] == request_id
    made = letters[1].headers[deadletter.REQUEST_ID]
    assert rpc.context.is_request_id(made) and made != request_id
    assert [request_ids(line) for line in lines] == [[request_id], [made]]
