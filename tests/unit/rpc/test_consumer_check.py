"""ConsumerCheck: the command line's first call to a queue nothing consumes is refused at once."""

import pytest

from scheduler import rpc
from scheduler.rpc.client import ConsumerCheck
from tests.unit.rpc.conftest import Recorder


class Counted:
    """Stands in for a broker that counts ``consumers`` on every queue (None: cannot tell)."""

    def __init__(self, transport, consumers):
        self.transport, self.consumers_on, self.asked = transport, consumers, []

    def __call__(self, queue_name, timeout=5.0):
        self.asked.append(queue_name)
        return self.consumers_on


@pytest.fixture
def server(transport, topic):
    recorder = Recorder()
    server = rpc.get_rpc_server(transport, rpc.Target(topic=topic, server="s1"), [recorder])
    server.start()
    yield recorder
    server.stop()
    server.wait()


def test_a_call_to_a_queue_nothing_consumes_is_refused_before_anything_is_sent(transport, topic, monkeypatch):
    counted = Counted(transport, 0)
    monkeypatch.setattr(transport, "consumers", counted)
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=3600, consumer_check=ConsumerCheck())
    with pytest.raises(rpc.NoConsumer) as info:
        client.call({}, "echo", x=1)
    assert str(info.value) == f"nothing is consuming queue {topic!r} on {transport.safe_url}"
    assert (info.value.queue, counted.asked) == (topic, [topic])


@pytest.mark.parametrize("consumers", [1, None], ids=["consumed", "cannot-tell"])
def test_a_call_goes_ahead_when_a_server_consumes_or_the_broker_cannot_tell(transport, topic, server,
                                                                            monkeypatch, consumers):
    monkeypatch.setattr(transport, "consumers", Counted(transport, consumers))
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=15, consumer_check=ConsumerCheck())
    assert client.call({}, "echo", x=1)["args"] == {"x": 1}


def test_once_a_consumer_was_there_later_calls_wait_for_a_restarting_server(transport, topic, server,
                                                                            monkeypatch):
    counted = Counted(transport, 1)
    monkeypatch.setattr(transport, "consumers", counted)
    check = ConsumerCheck()
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=15, consumer_check=check)
    other = client.prepare(timeout=15)  # the clients of one command share the check
    client.call({}, "echo", x=1)
    counted.consumers_on = 0  # the server restarts: a later call's request waits in its queue
    assert other.call({}, "echo", x=2)["args"] == {"x": 2}
    assert counted.asked == [topic]


def test_without_a_check_nothing_is_counted(transport, topic, server, monkeypatch):
    counted = Counted(transport, 0)
    monkeypatch.setattr(transport, "consumers", counted)
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=15)
    assert client.call({}, "echo", x=1)["args"] == {"x": 1}
    assert counted.asked == []


def test_only_rabbitmq_can_count_consumers(transport):
    assert transport.consumers("scheduler") is None


def test_where_consumers_cannot_be_counted_a_first_call_says_once_that_it_still_waits(transport, topic,
                                                                                     monkeypatch):
    if transport.kind == "memory":
        pytest.skip("memory:// is the tests' own transport: nothing to tell")
    said = []
    check = ConsumerCheck(said.append)
    monkeypatch.setattr(ConsumerCheck, "NOTICE_AFTER", 0.2)
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=1, consumer_check=check)
    with pytest.raises(rpc.MessagingTimeout):
        client.call({}, "echo", x=1)
    assert said == [f"nothing has answered on queue {topic!r} of {transport.safe_url} within 0.2 s (the "
                    "request waits in it for a server to start, until the timeout: then it is dropped, never "
                    "run); waiting up to 1 s (rpc_response_timeout)"]


def test_a_reply_before_the_notice_says_nothing(transport, topic, server, monkeypatch):
    said = []
    monkeypatch.setattr(ConsumerCheck, "NOTICE_AFTER", 30)
    check = ConsumerCheck(said.append)
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=15, consumer_check=check)
    assert client.call({}, "echo", x=1)["args"] == {"x": 1}
    assert said == []
