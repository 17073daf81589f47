"""Bounds, on real processes, RabbitMQ and PostgreSQL: a scaling group cannot starve the other
requests, nothing a client sends makes storage grow without bound, a number no float holds is
bad input, and a refused call logs no bogus line.

Each test prints what it measured; the reliability table of doc/source/admin/reliability.md quotes
the figures.
"""

import datetime
import json
import shlex
import statistics
import subprocess
import threading
import time
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from scheduler import rpc, states
from scheduler.client import CAST_AT
from scheduler.cmd.instance_commands import build_request
from scheduler.db.api import Database
from scheduler.rpc import deadletter
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

BIG = 10**400  # 401 digits: JSON carries it, no float holds it
TINY = {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}


def remote_error(call):
    with pytest.raises(rpc.RemoteError) as caught:
        call()
    return caught.value


def scheduler_queue(fleet):
    """Messages in the scheduler's shared queue now, as the broker counts them."""
    out = wire.rabbitmqctl("list_queues", "-p", wire.vhost_of(fleet.conf.transport_url), "name", "messages",
                           "--formatter", "json")
    return {q["name"]: q["messages"] for q in json.loads(out.stdout or "[]")}.get("scheduler", 0)


def dead_letter_queue(fleet):
    """(messages, bytes of bodies) of the dead-letter queue."""
    out = wire.rabbitmqctl("list_queues", "-p", wire.vhost_of(fleet.conf.transport_url), "name", "messages",
                           "message_bytes", "--formatter", "json")
    found = {q["name"]: q for q in json.loads(out.stdout or "[]")}[f"{fleet.exchange}.dead-letters"]
    return found["messages"], found["message_bytes"]


def wait_drained(fleet, timeout=120):
    """Until the scheduler's queue is empty and a call behind it is answered."""
    fleet.wait(lambda: scheduler_queue(fleet) == 0, timeout, "the scheduler's queue to drain")
    fleet.client.list_hosts({})


# -- a fleet for the small cases ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp, url, transport_url, scaling__max_pushed_metrics="64")
        fleet.database = Database(url)
        try:
            fleet.start_schedulers(["limits-1"])
            fleet.start_agent("limits-a", fake_memory_mb=65536, fake_local_gb=1000, fake_vcpus=64)
            fleet.wait_hosts_up(["limits-a"])
            yield fleet
        finally:
            fleet.close()
            fleet.database.dispose()


def boot_one(fleet):
    request_spec, filter_properties = build_request(TINY, 1)
    [uuid] = request_spec["instance_uuids"]
    fleet.client.run_instance({}, request_spec, filter_properties)
    fleet.wait_states([uuid], {states.ACTIVE})
    return uuid


def test_11_a_refused_call_logs_its_own_traceback_not_nonetype_none(fleet):
    request_spec, filter_properties = build_request(dict(TINY, memory_mb=10**6), 1)  # fits nowhere
    error = remote_error(lambda: fleet.client.select_destinations({}, request_spec, filter_properties))
    assert error.exc_type == "NoValidHost"
    fleet.wait(lambda: "Traceback of the failed call of select_destinations" in fleet.log("limits-1"), 10,
               "the refusal's debug traceback")
    log = fleet.log("limits-1")
    assert "Call of select_destinations on scheduler failed: NoValidHost" in log
    assert "NoneType: None" not in log
    assert "raise NoValidHost" in log or "NoValidHost: No valid host" in log.split(
        "Traceback of the failed call of select_destinations", 1)[1]


def test_9_numbers_no_float_holds_are_bad_input_naming_the_field(fleet):
    uuid = boot_one(fleet)
    pushed = remote_error(lambda: fleet.client.admin_call({}, "push_instance_metrics", instance_uuid=uuid,
                                                          metrics={"rps": BIG}))
    assert pushed.exc_type == "InvalidRequest"
    assert str(pushed.value).startswith("push_instance_metrics: metric rps must be a finite number >= 0, "
                                        "got 1000")
    request_spec, filter_properties = build_request(TINY, 1)
    request_spec["image"]["properties"]["hw_disk_bus"] = BIG
    placed = remote_error(lambda: fleet.client.select_destinations({}, request_spec, filter_properties))
    assert (placed.exc_type, str(placed.value)) == (
        "InvalidRequest",
        "request_spec.image.properties[hw_disk_bus]: must be a string, finite number or list")
    policy = {"type": "percent", "value": BIG, "period_s": 15}
    spec = {"max": 3, "behavior": {"scale_up": {"policies": [policy]}}}
    group = remote_error(lambda: fleet.client.admin_call({}, "create_scaling_group", name="big", spec=spec,
                                                         template={"flavor_name": "m1.tiny"}))
    assert (group.exc_type, str(group.value)) == (
        "InvalidRequest",
        "spec.behavior.scale_up.policies[0].value: must be a whole number from 1 to 2147483647, "
        f"got {str(BIG)[:57]}...")

    # A report: a bad figure refuses it whole, naming the figure; a bad instance_usage entry
    # is dropped and the rest of the report kept.
    letters = wire.dead_letter_count(fleet)
    report = {"host": "ghost-9", "nodename": "ghost-9", "memory_mb": 8192, "free_ram_mb": 8192,
              "local_gb": 100, "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "running_vms": 2,
              "report_seq": 1, "instance_uuids": [uuid, str(uuidlib.uuid4())]}
    usage = {uuid: {"cpu": 0.5}, report["instance_uuids"][1]: {"cpu": BIG}}
    fleet.client.report_resources({}, "ghost-9", dict(report, instance_usage=usage))
    fleet.wait(lambda: "ghost-9" in fleet.hosts(), 30, "the report with a bad usage entry to be taken")
    dropped = (f"Report of host ghost-9: instance_usage entries dropped, the rest of the report kept: "
               f"{report['instance_uuids'][1]}: cpu must be a finite number >= 0, got 1000")
    assert dropped in fleet.log("limits-1")
    bad = dict(report, host="ghost-8", nodename="ghost-8", memory_mb=BIG)
    fleet.client.report_resources({}, "ghost-8", bad)
    fleet.wait(lambda: wire.dead_letter_count(fleet) == letters + 1, 30, "the bad report's dead letter")
    [letter] = wire.dead_letters(fleet, 10)[-1:]
    assert letter.headers[deadletter.REASON].startswith(
        "InvalidRequest: report_resources from ghost-8: memory_mb must be between 0 and 2147483647, got 1000")
    assert "ghost-8" not in fleet.hosts()


def test_7b_fresh_metric_names_pushed_for_30_s_leave_at_most_the_cap(fleet):
    uuid = boot_one(fleet)
    accepted = refused = 0
    reasons = set()
    deadline = time.monotonic() + 30
    batch = 0
    while time.monotonic() < deadline:
        batch += 1
        metrics = {f"m{batch}.{i}": i for i in range(32)}  # 32 fresh names a push
        try:
            fleet.client.admin_call({}, "push_instance_metrics", instance_uuid=uuid, metrics=metrics)
            accepted += 1
        except rpc.RemoteError as exc:
            assert exc.exc_type == "InvalidRequest", exc
            refused += 1
            reasons.add(str(exc.value).split(";", 1)[0])
    with fleet.database.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT count(*) FROM instance_metrics WHERE instance_uuid = :u"),
                                  {"u": uuid}).scalar_one()
    shown = fleet.client.admin_call({}, "show_instance_metrics", instance_uuids=[uuid])[uuid]
    print(f"\n7b: {accepted} pushes of 32 fresh names saved, {refused} refused in 30 s; "
          f"{rows} rows stored for the instance, show lists {len(shown)}")
    assert accepted == 2 and refused > 10
    assert reasons == {
        f"push_instance_metrics: instance {uuid} holds 64 pushed metric(s) of the 64 it may hold"}
    assert rows <= 64 + 2 and len(shown) <= 64 + 2


def test_7c_an_invalid_request_is_refused_once_not_once_per_instance(fleet):
    before = len(fleet.instances())
    letters = wire.dead_letter_count(fleet)
    publisher = wire.RawPublisher(fleet)
    try:
        request_spec = {"num_instances": 1000, "instance_type": {"memory_mb": 512, "vcpus": 1, "root_gb": 1},
                        "instance_properties": {"project_id": "demo", "display_name": "many-%d"},
                        "image": {"properties": {}}}
        filter_properties = {"scheduler_hints": {"group": "00000000-0000-4000-8000-00000000f00d"}}
        body = wire.cast_body("run_instance", request_spec=request_spec, filter_properties=filter_properties)
        for _ in range(10):
            publisher.publish(body, "scheduler")
    finally:
        publisher.close()
    named_spec, _ = build_request(TINY, 3)
    named = named_spec["instance_uuids"]
    fleet.client.run_instance({}, named_spec, filter_properties)
    wait_drained(fleet)
    fleet.wait(lambda: len(fleet.instances()) - before >= 3, 30, "the named instances' rows")
    after = fleet.instances()
    print(f"\n7c: 10 invalid casts of {len(body)} bytes asking for 1,000 instances each, and one naming 3: "
          f"{len(after) - before} rows, {wire.dead_letter_count(fleet) - letters} dead letters")
    assert len(after) - before == 3
    assert wire.dead_letter_count(fleet) - letters == 11
    assert {after[u]["state"] for u in named} == {states.ERROR}
    reason = ("Invalid request: Server group 00000000-0000-4000-8000-00000000f00d does not exist "
              "(scheduler hint group)")
    assert all(after[u]["fault_reason"] == reason for u in named)
    lines = [line for line in fleet.log("limits-1").splitlines()
             if "Dead-lettered a cast of run_instance" in line]
    assert len(lines) == 1, lines  # identical refusals: one line a minute


# -- 7a: the dead letters ----------------------------------------------------------------------------


def test_7a_400_casts_of_1_mb_that_are_not_json_leave_at_most_the_bound(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["dlq-1"])
            publisher = wire.RawPublisher(fleet)
            started = time.monotonic()
            try:
                for index in range(400):
                    publisher.publish(f"{index:04d} ".encode() + b"x" * 999_995, "scheduler")
            finally:
                publisher.close()
            wait_drained(fleet)
            took = time.monotonic() - started
            messages, size = dead_letter_queue(fleet)
            oldest = wire.dead_letters(fleet, 1)[0]
            print(f"\n7a: 400 casts of 1 MB of non-JSON in {took:.1f} s: the dead-letter queue holds "
                  f"{messages} messages, {size / 2**20:.1f} MiB; the oldest kept is #{int(oldest.body[:4])}")
            assert size <= 64 * 2**20 and messages <= 10_000
            assert messages >= 60 and int(oldest.body[:4]) == 400 - messages  # the newest kept
            fleet.check_alive()
        finally:
            fleet.close()


def test_7a_a_dead_letter_queue_declared_unbounded_before_is_used_and_the_fix_said_once(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      oslo_messaging_rabbit__dead_letter_max_length="3")
        name = f"{fleet.exchange}.dead-letters"
        with wire.raw_connection(fleet) as conn:  # as an earlier Berth declared it: no bound
            channel = conn.default_channel
            channel.exchange_declare(f"{fleet.exchange}.dlx", "fanout", durable=True, auto_delete=False)
            channel.queue_declare(name, durable=True, auto_delete=False)
            channel.queue_bind(name, f"{fleet.exchange}.dlx", "#")
        try:
            fleet.start_schedulers(["dlq-2"])
            publisher = wire.RawPublisher(fleet)
            try:
                for index in range(5):
                    publisher.publish(f"{index} not JSON".encode(), "scheduler")
                wait_drained(fleet)
                assert dead_letter_queue(fleet)[0] == 5  # used as it is
                log = fleet.log("dlq-2")
                [said] = [line for line in log.splitlines() if "was declared without the bounds" in line]
                assert " WARNING " in said and "inequivalent arg 'x-max-length'" in said
                assert " lost " not in log and fleet.processes["dlq-2"].poll() is None  # no crash loop
                recipe = said.split("To bound it, apply a policy", 1)[1].split(": ", 1)[1]
                recipe = recipe.split("; or delete", 1)[0]
                assert recipe.startswith("rabbitmqctl set_policy -p ")
                subprocess.run(shlex.split(recipe), check=True, capture_output=True)
                for index in range(5, 10):
                    publisher.publish(f"{index} not JSON".encode(), "scheduler")
                wait_drained(fleet)
            finally:
                publisher.close()
            print(f"\n7a: an unbounded queue from an earlier Berth: the recipe said once, applied: "
                  f"{dead_letter_queue(fleet)[0]} dead letters kept of 10")
            assert dead_letter_queue(fleet)[0] == 3
            assert [m.body[:1] for m in wire.dead_letters(fleet, 10)] == [b"7", b"8", b"9"]
        finally:
            fleet.close()
            wire.rabbitmqctl("clear_policy", "-p", wire.vhost_of(transport_url), name, check=False)


# -- 6: a scaling group far larger than the fleet --------------------------------------------------------

GROUP_HOSTS = ("grp-1", "grp-2")
PLAIN_HOSTS = ("plain-1", "plain-2")


def test_6_a_group_far_larger_than_its_room_does_not_starve_plain_boots(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scaling__sync_period="2",
                      scheduler__periodic_interval="1")
        database = Database(url)
        try:
            fleet.start_schedulers(["grow-1"])
            for host in GROUP_HOSTS:  # room for 12 members each
                fleet.start_agent(host, fake_memory_mb=512 + 12 * 512, fake_local_gb=100, fake_vcpus=64)
            for host in PLAIN_HOSTS:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=1000, fake_vcpus=64)
            fleet.wait_hosts_up(GROUP_HOSTS + PLAIN_HOSTS)
            assert fleet.cli("aggregate", "create", "grp", "--zone", "grp").returncode == 0
            for host in GROUP_HOSTS:
                assert fleet.cli("aggregate", "add-host", "grp", host).returncode == 0
            template = dict(TINY, availability_zone="grp")
            group = fleet.client.admin_call({}, "create_scaling_group", name="many",
                                            spec={"min": 1000, "max": 1000}, template=template)

            latencies, depths, booted = [], [], []
            stop = threading.Event()

            def sample_depth():
                while not stop.is_set():
                    depths.append(scheduler_queue(fleet))
                    stop.wait(0.5)

            sampler = threading.Thread(target=sample_depth)
            sampler.start()
            try:
                for _ in range(20):  # a plain boot every 2 s for 40 s
                    request_spec, filter_properties = build_request(TINY, 1)
                    [uuid] = request_spec["instance_uuids"]
                    cast_at = time.time()
                    fleet.client.run_instance({CAST_AT: cast_at}, request_spec, filter_properties)
                    booted.append((uuid, cast_at))
                    time.sleep(2)
                found = fleet.wait_states([u for u, _ in booted], {states.ACTIVE}, timeout=300)
            finally:
                stop.set()
                sampler.join()
            for uuid, cast_at in booted:
                latencies.append(_launched(database, uuid) - cast_at)
            with database.engine.connect() as connection:
                rows = connection.execute(
                    sa.text("SELECT count(*) FROM instances WHERE scaling_group_uuid = :g"),
                    {"g": group["uuid"]}).scalar_one()
            active = fleet.wait(lambda: _active_members(fleet, "many") == 24 and 24, 60, "24 members ACTIVE",
                                last_seen=lambda: _active_members(fleet, "many"))
            print(f"\n6: a group of min = max = 1000 with room for 24: {rows} member rows in about 45 s, "
                  f"{active} ACTIVE; the scheduler's queue at most {max(depths)} (median "
                  f"{statistics.median(depths)}); 20 plain boots ACTIVE, median "
                  f"{statistics.median(latencies):.2f} s, max {max(latencies):.2f} s from cast to ACTIVE")
            assert all(i["state"] == states.ACTIVE for i in found.values())
            assert max(depths) <= 250  # one sync's members, the agents' updates of those placed, the boots
            assert rows <= 500  # 100 a sync, and then only as the ERROR members' back-off allows
            too_big = remote_error(lambda: fleet.client.admin_call(
                {}, "create_scaling_group", name="huge", spec={"min": 5000, "max": 5000}, template=template))
            assert str(too_big.value).startswith("spec.max: must be at most 1000 ([scaling] max_members")
        finally:
            fleet.close()
            database.dispose()


def _active_members(fleet, name):
    group = fleet.client.admin_call({}, "show_scaling_group", name_or_uuid=name)
    return sum(1 for m in group["members"] if m["state"] == states.ACTIVE)


def _launched(database, uuid):
    """When the instance went ACTIVE (the database's time, which runs on this machine)."""
    with database.engine.connect() as connection:
        launched = connection.execute(sa.text("SELECT launched_at FROM instances WHERE uuid = :u"),
                                      {"u": uuid}).scalar_one()
    return launched.replace(tzinfo=datetime.UTC).timestamp()
