"""One message must never stall or poison the others.

Each poison below once wedged a scheduler or dead-lettered every valid request
behind it. Here each is published in the middle of 300 valid requests, to two
schedulers and three agents on the real RabbitMQ and PostgreSQL (one fleet for
all the poisons, one after the other, each judged by what came after it): the valid
requests all end ACTIVE within seconds of the time the same requests take
without the poison, the poison ends as one dead letter (a call whose answer
cannot be sent: with nothing, logged once), and the schedulers go on.
"""

import json
import time

import pytest

from scheduler.db.api import Database
from scheduler.rpc import envelope
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_faults import burst

SCHEDULERS = ("poison-s1", "poison-s2")
AGENTS = ("poison-a", "poison-b", "poison-c")
VALID = 300
SLACK_SECONDS = 10


def call_body(method, reply_q, **args):
    msg = envelope.request(method, args, {}, msg_id="m1", reply_q=reply_q)
    return json.dumps(envelope.wrap(msg)).encode()


def report_body(host):
    resources = {"host": host, "memory_mb": 10**6, "free_ram_mb": 10**6, "local_gb": 10**5,
                 "free_disk_gb": 10**5, "vcpus": 10**3, "vcpus_used": 0, "instance_uuids": []}
    return wire.cast_body("report_resources", host=host, resources=resources)


# Each poison, and the dead letters it leaves: none for a call (it is run, and nothing is
# sent back), one per scheduler for a fanout cast (each refuses its own copy).
POISONS = {
    # A reply queue of 206 characters but 406 bytes: AMQP names are at most 255 bytes.
    "reply-queue-over-255-bytes": (0, lambda pub: pub.publish(
        call_body("list_hosts", "reply_" + "é" * 200), "scheduler")),
    "reply-queue-with-a-lone-surrogate": (1, lambda pub: pub.publish(
        call_body("list_hosts", "reply_\ud800"), "scheduler")),
    # A host name no queue can be named after: compute.<250 characters> is over 255 bytes.
    "report-for-a-250-character-host": (2, lambda pub: pub.publish(
        report_body("h" * 250), "scheduler", fanout="scheduler")),
    # A host name the database cannot store.
    "report-for-a-host-with-a-lone-surrogate": (2, lambda pub: pub.publish(
        report_body("ghost\ud800"), "scheduler", fanout="scheduler")),
    # A routing key no dead letter can reuse.
    "fanout-routing-key-with-a-lone-surrogate": (2, lambda pub: pub.publish(
        wire.cast_body("no_such_method"), "scheduler\ud800", fanout="scheduler")),
}


def active(database, uuids):
    return sum(1 for i in database.get_instances(uuids).values() if i["state"] == "ACTIVE")


def timed_run(fleet, database, poison=None):
    """Seconds until ``VALID`` requests, a poison (if any) cast in their middle, are all ACTIVE.
    They are deleted afterwards (not timed), so that every run meets the same empty fleet."""
    publisher = wire.RawPublisher(fleet)
    try:
        began = time.monotonic()
        uuids = burst(fleet, VALID // 2, per_request=1)
        if poison is not None:
            poison(publisher)
        uuids += burst(fleet, VALID - VALID // 2, per_request=1)
        fleet.wait(lambda: active(database, uuids) == len(uuids), 120,
                   f"{len(uuids)} valid requests to be ACTIVE", interval=0.1)
        took = time.monotonic() - began
    finally:
        publisher.close()
    for uuid in uuids:
        fleet.client.delete_instance({}, uuid)
    fleet.wait(lambda: not any(n for state, n in database.count_instances_by_state().items()
                               if state != "DELETED"),
               120, f"the {len(uuids)} instances to be deleted", interval=0.1)
    return took


@pytest.fixture(scope="module")
def poisoned_fleet(tmp_path_factory):
    """Two schedulers and three agents, started once for every poison: (fleet, database, the
    seconds of each run without a poison so far, the first before any poison)."""
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path_factory.mktemp("poison"), url, transport_url, DEFAULT__debug="false")
        database = Database(url)
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256)
            fleet.wait_hosts_up(AGENTS)
            yield fleet, database, [timed_run(fleet, database)]
        finally:
            database.dispose()
            fleet.close()


@pytest.mark.parametrize("name", sorted(POISONS))
def test_a_poison_among_300_valid_requests_stalls_nothing(poisoned_fleet, name):
    fleet, database, clean_runs = poisoned_fleet
    assert wire.dead_letter_count(fleet) == 0  # the poison before left none unread
    said_before = {s: len(fleet.log(s)) for s in SCHEDULERS}
    expected, poison = POISONS[name]
    clean = clean_runs[-1]
    poisoned = timed_run(fleet, database, poison)
    again = timed_run(fleet, database)
    clean_runs.append(again)
    fleet.check_alive()
    fleet.wait(lambda: wire.dead_letter_count(fleet) >= expected, 30, "the poison's dead letters")
    time.sleep(2)  # a poison that loops would have left more by now
    dead = wire.dead_letters(fleet, 10)
    hosts = set(fleet.hosts())
    logs = "".join(fleet.log(s)[said_before[s]:] for s in SCHEDULERS)
    print(f"\n{name}: {VALID} valid requests ACTIVE in {clean:.1f} s without it, "
          f"{poisoned:.1f} s with it, {again:.1f} s without it again; {len(dead)} dead letter(s): "
          f"{dead[0].headers.get('x-berth-reason') if dead else None}")
    if not expected:
        assert "cannot be answered" in logs
    assert poisoned <= max(clean, again) + SLACK_SECONDS
    assert len(dead) == expected
    assert hosts == set(AGENTS)  # no forged host was ever taken in
    assert "Traceback" not in logs
    assert "cannot send the answers" not in logs and "failed together" not in logs
