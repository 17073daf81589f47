"""The digests of shared report ingestion, apart from a broker: who may send one, what a
receiver takes of it, and a digest too large for one message."""

import json
import logging

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.fleet import report_digests
from scheduler.rpc.exceptions import MessageTooLarge
from tests.unit.scheduler.manager_world import report


class Message:
    content_type = "application/json"
    content_encoding = "utf-8"

    def __init__(self, body):
        self.body = json.dumps(body).encode()


def checked(host, ram=1024, seq=1):
    return HostReport.from_wire(dict(report(host, ram), report_seq=seq, started_at="2026-12-05T00:00:00"),
                                host)


@pytest.fixture
def receiver(conf):
    taken = []
    transport = rpc.get_transport(conf)
    access = rpc.Access(schedulers=["sched-user"], enforce=True)
    yield report_digests.DigestReceiver(transport, "me", lambda reports, sender: taken.append(
        (sender, reports)), access), taken
    transport.cleanup()


def test_a_digest_of_a_scheduler_is_taken_as_the_sender_checked_it(receiver):
    digests, taken = receiver
    sent = [checked("h1", 2048), checked("h2", 4096, seq=7)]
    digests.apply("sched-user", Message(report_digests.digest_body("other", sent)))
    [(sender, reports)] = taken
    assert sender == "other"
    assert [r.to_wire() for r in reports] == [r.to_wire() for r in sent]


def test_its_own_digest_is_skipped(receiver):
    digests, taken = receiver
    digests.apply("sched-user", Message(report_digests.digest_body("me", [checked("h1")])))
    assert taken == []


def test_with_enforce_a_digest_of_another_broker_user_is_refused_with_a_log_line(receiver, caplog):
    digests, taken = receiver
    with caplog.at_level(logging.ERROR, logger=report_digests.__name__):
        digests.apply("agent-h1", Message(report_digests.digest_body("other", [checked("h1")])))
    assert taken == []
    assert caplog.messages == ["Digest of reports refused: sent by broker user 'agent-h1' (a client), "
                               "not by a scheduler ([roles] schedulers)"]


def test_an_unreadable_report_is_left_out_and_said_the_others_taken(receiver, caplog):
    digests, taken = receiver
    body = report_digests.digest_body("other", [checked("h1")])
    body["reports"].append("not a report")
    with caplog.at_level(logging.ERROR, logger=report_digests.__name__):
        digests.apply("sched-user", Message(body))
    assert [r.host for r in taken[0][1]] == ["h1"]
    assert caplog.messages[0].startswith(
        "Digest of reports refused: from other: a report of it is unreadable")


class Publisher:
    """Refuses a message of more than ``most`` reports as too large; records the others."""

    def __init__(self, most):
        self.most = most
        self.sent = []

    def publish(self, body, exchange, routing_key, **kwargs):
        if len(body["reports"]) > self.most:
            raise MessageTooLarge("too large")
        self.sent.append((exchange.name, routing_key, [r["host"] for r in body["reports"]]))


def test_a_digest_too_large_for_one_message_is_split_and_every_report_sent(conf):
    transport = rpc.get_transport(conf)
    transport.publisher = Publisher(most=2)
    sender = report_digests.DigestSender(transport, "me", interval=60, size=5)
    for i in range(7):
        sender.add(checked(f"h{i}"))
    sender.flush()
    assert [hosts for _, _, hosts in transport.publisher.sent] == [
        ["h0", "h1"], ["h2"], ["h3", "h4"], ["h5", "h6"]]
    assert {(exchange, key) for exchange, key, _ in transport.publisher.sent} == {
        ("scheduler_report_digests_fanout", "scheduler_report_digests")}
    assert sender.sent == 7
