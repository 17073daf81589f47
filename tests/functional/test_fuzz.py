"""Fuzzing: over 10,000 malformed messages, published straight to the scheduler's
and the agents' queues, interleaved with valid requests. The processes stay up,
their memory stays flat, every valid request completes, and every malformed cast
is in the dead-letter queue. The shared queues are quorum queues here."""

import json
import random
import uuid

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENTS = ("fuzz-a", "fuzz-b")
SCHEDULERS = ("sched-1", "sched-2")
MALFORMED = 10_000
VALID_EVERY = 100  # one valid request (two instances) per this many malformed messages
OVERSIZED_EVERY = 500
MAX_BYTES = 1024 * 1024
RSS_GROWTH_BOUND_KIB = 32 * 1024


def _env(message):
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(message)}).encode()


def _spec(u, **flavor):
    return {
        "instance_uuids": [u],
        "num_instances": 1,
        "instance_type": dict({"memory_mb": 512, "root_gb": 1, "vcpus": 1}, **flavor),
    }


def generic(i, rng):
    """Broken at the wire level: whoever receives it cannot read it."""
    cases = [
        lambda: b"{not json " + str(i).encode(),
        lambda: json.dumps([1, 2, i]).encode(),
        lambda: json.dumps("just a string").encode(),
        lambda: json.dumps({"oslo.version": "3.0", "oslo.message": "{}"}).encode(),
        lambda: json.dumps({"oslo.version": 2, "oslo.message": "{}"}).encode(),
        lambda: json.dumps({"oslo.version": "2.0", "oslo.message": 42}).encode(),
        lambda: json.dumps({"oslo.version": "2.0", "oslo.message": "{broken"}).encode(),
        lambda: json.dumps({"oslo.version": "2.0", "oslo.message": "[1]"}).encode(),
        lambda: b'{"oslo.version": "2.0", "oslo.message": "\xff\xfe\xfd"}',
        lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))) + b"\xff",
        lambda: _env({"method": "run_instance", "args": [1, 2]}),
        lambda: _env({"args": {}}),
        lambda: _env({"method": 17, "args": {}}),
        lambda: wire.cast_body(f"no_such_method_{i % 13}"),
        lambda: wire.cast_body("_private"),
        lambda: b"[" * 100_000,  # nesting bomb
    ]
    return rng.choice(cases)()


def for_scheduler(i, rng):
    u = str(uuid.uuid4())
    cases = [
        lambda: wire.cast_body("run_instance", request_spec=_spec(u)),  # filter_properties missing
        lambda: wire.cast_body("run_instance", request_spec=_spec(u, memory_mb="big"), filter_properties={}),
        lambda: wire.cast_body("run_instance", request_spec=_spec(u, memory_mb=-1), filter_properties={}),
        lambda: wire.cast_body("run_instance", request_spec=_spec(u, memory_mb=10**20), filter_properties={}),
        lambda: wire.cast_body("run_instance", request_spec=_spec(u, vcpus=2**40), filter_properties={}),
        lambda: wire.cast_body("run_instance", request_spec=_spec(u), filter_properties={}, surprise=1),
        lambda: wire.cast_body(
            "run_instance", request_spec=_spec(u), filter_properties={"retry": {"hosts": "everywhere"}}
        ),
        lambda: wire.cast_body(
            "run_instance", request_spec={"instance_uuids": ["x"] * 3}, filter_properties={}
        ),
        lambda: wire.cast_body("report_resources", host="ghost", resources={"memory_mb": -5}),
        lambda: wire.cast_body("report_resources", host=i, resources={}),
        lambda: wire.cast_body("report_resources", host="ghost", resources="lots"),
        lambda: wire.cast_body("report_resources", host="ghost"),
        lambda: wire.cast_body("instance_update", instance_uuid=i, host="h", state="ACTIVE"),
        lambda: wire.cast_body("instance_update", instance_uuid=u, host="h", state="FLYING"),
        lambda: wire.cast_body("instance_update", instance_uuid=u, host=["h"], state="ACTIVE"),
        lambda: wire.cast_body("delete_instance", instance_uuid="not-a-uuid"),
        lambda: wire.cast_body("delete_instance"),
        lambda: wire.cast_body("list_instances", include_deleted="maybe"),
    ]
    return rng.choice(cases)() if rng.random() < 0.7 else generic(i, rng)


def for_agent(i, rng):
    u = str(uuid.uuid4())
    cases = [
        lambda: wire.cast_body("run_instance", instance="x"),
        lambda: wire.cast_body("run_instance", instance={"uuid": u, "flavor": {"memory_mb": -1, "vcpus": 1}}),
        lambda: wire.cast_body(
            "run_instance", instance={"uuid": "nope", "flavor": {"memory_mb": 1, "vcpus": 1}}
        ),
        lambda: wire.cast_body(
            "run_instance",
            instance={"uuid": u, "flavor": {"memory_mb": 1, "vcpus": 1}},
            filter_properties={"limits": {"memory_mb": -10}},
        ),
        lambda: wire.cast_body("run_instance"),
        lambda: wire.cast_body("terminate_instance", instance_uuid=5),
        lambda: wire.cast_body("terminate_instance", instance_uuid=u, force=True),
    ]
    return rng.choice(cases)() if rng.random() < 0.7 else generic(i, rng)


def oversized(i):
    return wire.cast_body(
        "run_instance",
        request_spec=_spec(str(uuid.uuid4())),
        filter_properties={"pad": "x" * (MAX_BYTES + 1000 + i)},
    )


def test_10000_malformed_messages_interleaved_with_valid_requests(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(
            tmp_path,
            url,
            transport_url,
            DEFAULT__debug="false",
            oslo_messaging_rabbit__rabbit_quorum_queue="true",
            # Room for every dead letter, which the test counts (the bounds keep 10,000).
            oslo_messaging_rabbit__dead_letter_max_length="100000",
            oslo_messaging_rabbit__dead_letter_max_bytes=str(2**30),
        )
        try:
            _run(fleet, transport_url)
        finally:
            fleet.close()


def _diagnosis(fleet, transport_url):
    """What a stalled run leaves to read: the count reached, each queue's backlog and
    consumers, and what the processes logged besides dead letters."""
    listed = wire.rabbitmqctl("list_queues", "-p", wire.vhost_of(transport_url), "name", "messages_ready",
                              "messages_unacknowledged", "consumers", check=False)
    lines = [f"dead letters so far: {wire.dead_letter_count(fleet)}", "queues (ready, unacked, consumers):",
             listed.stdout]
    for name in fleet.processes:
        odd = [line for line in fleet.log(name).splitlines()
               if any(level in line for level in (" WARNING ", " ERROR ", " CRITICAL "))
               and "Dead-lettered" not in line]
        lines.append(f"{name}: {len(odd)} other warnings or errors; the last ones:")
        lines += [line[:300] for line in odd[-15:]]
    return "\n".join(lines)


def _run(fleet, transport_url):
    rng = random.Random(4)
    fleet.start_schedulers(SCHEDULERS)
    for host in AGENTS:
        fleet.start_agent(host, fake_memory_mb=131072, fake_local_gb=4096, fake_vcpus=64)
    for name in SCHEDULERS:
        fleet.wait(
            lambda n=name: (
                {h["host"] for h in fleet.scheduler_client(n).call({}, "list_hosts")} == set(AGENTS)
            ),
            60,
            f"{name} to see the agents",
        )

    listed = wire.rabbitmqctl("list_queues", "-p", wire.vhost_of(transport_url), "name", "type", "arguments")
    types = dict(line.split("\t")[:2] for line in listed.stdout.splitlines()[1:] if "\t" in line)
    assert types["scheduler"] == "quorum" and types["compute.fuzz-a"] == "quorum", types
    assert (
        f'x-dead-letter-exchange",<<"{fleet.exchange}.dlx' in listed.stdout.replace("{", "").replace("}", "")
        or f"{fleet.exchange}.dlx" in listed.stdout
    ), listed.stdout
    assert '{"x-delivery-limit",11}' in listed.stdout  # 2 * delivery_limit + 1, a backstop

    # Warm up (the first requests load code and fill caches), then take the baseline.
    warm, _ = build_request(flavors.get("m1.tiny"), 10)
    warm_uuids = warm["instance_uuids"]
    fleet.client.run_instance({}, warm, {})
    fleet.wait_states(warm_uuids, ("ACTIVE",))
    pids = {name: proc.pid for name, proc in fleet.processes.items()}
    before = {name: wire.rss_kib(pid) for name, pid in pids.items()}

    publisher = wire.RawPublisher(fleet)
    valid, expected_dead, sent = (
        [],
        0,
        {"scheduler": 0, "scheduler_fanout": 0, "compute.<host>": 0, "compute_fanout": 0, "oversized": 0},
    )
    try:
        for i in range(MALFORMED):
            if i % VALID_EVERY == 0:
                spec, props = build_request(flavors.get("m1.tiny"), 2)
                publisher.publish(
                    wire.cast_body("run_instance", request_spec=spec, filter_properties=props), "scheduler"
                )
                valid += spec["instance_uuids"]
            if i % OVERSIZED_EVERY == OVERSIZED_EVERY - 1:
                publisher.publish(oversized(i), "scheduler")
                sent["oversized"] += 1
                expected_dead += 1
                continue
            where = rng.random()
            if where < 0.7:
                publisher.publish(for_scheduler(i, rng), "scheduler")
                sent["scheduler"] += 1
                expected_dead += 1
            elif where < 0.8:
                publisher.publish(for_scheduler(i, rng), "scheduler", fanout="scheduler")
                sent["scheduler_fanout"] += 1
                expected_dead += len(SCHEDULERS)  # every scheduler gets a copy
            elif where < 0.9:
                publisher.publish(for_agent(i, rng), f"compute.{rng.choice(AGENTS)}")
                sent["compute.<host>"] += 1
                expected_dead += 1
            else:
                publisher.publish(for_agent(i, rng), "compute", fanout="compute")
                sent["compute_fanout"] += 1
                expected_dead += len(AGENTS)  # every agent gets a copy
    finally:
        publisher.close()

    # No call before the backlog is through: a call that expires in a quorum queue
    # is dead-lettered by RabbitMQ itself, and would be counted too.
    try:
        fleet.wait(lambda: wire.dead_letter_count(fleet) >= expected_dead, 300,
                   f"{expected_dead} dead letters")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(fleet, transport_url)}") from None
    instances = fleet.wait_states(valid, ("ACTIVE", "ERROR"), timeout=180)
    errors = {u: i["fault_reason"] for u, i in instances.items() if i["state"] != "ACTIVE"}
    dead = wire.dead_letter_count(fleet)
    fleet.check_alive()
    after = {name: wire.rss_kib(pid) for name, pid in pids.items()}
    warnings = sum(fleet.log(n).count("Dead-lettered") for n in SCHEDULERS)
    sample = wire.dead_letters(fleet, 3)

    print(
        f"\nfuzz: {sum(sent.values())} malformed messages sent {sent}; "
        f"{len(valid)} valid instances in {len(valid) // 2} requests interleaved"
    )
    print(
        f"fuzz: dead-letter queue holds {dead} (expected {expected_dead}); "
        f"valid: {len(valid) - len(errors)} ACTIVE, {len(errors)} ERROR"
    )
    for name in pids:
        print(
            f"fuzz: {name} RSS {before[name]} KiB -> {after[name]} KiB "
            f"({after[name] - before[name]:+d} KiB, bound {RSS_GROWTH_BOUND_KIB} KiB)"
        )
    print(f"fuzz: the schedulers logged {warnings} dead-letter warning lines (rate-limited)")
    print(f"fuzz: sample reasons: {[m.headers['x-berth-reason'][:80] for m in sample]}")

    assert sum(sent.values()) >= MALFORMED
    assert errors == {}
    assert dead == expected_dead
    assert all(m.headers["x-berth-reason"] for m in sample)
    for name in pids:
        assert after[name] - before[name] < RSS_GROWTH_BOUND_KIB, (name, before[name], after[name])
    assert warnings < 1000
