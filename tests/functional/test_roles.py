"""Who may speak, on real processes and the RabbitMQ users the admin guide's recipe makes: the issue's
attacks fail, every RPC method of the scheduler and the agent sent by every role that may not
call it is refused and changes nothing, and each role's own requests still work.

One fleet for the module ([roles] enforce = true): a scheduler, agents a1 (16 GB) and a2
(8 GB), each on its own user. Senders: the scheduler's user, an operator's, an API client's
(in no list), guest (in no list, with every permission of the virtual host: whatever the
broker lets through), each agent's user (with the recipe's permissions: to another agent's
queue only through the default exchange), and guest again without a user_id.
"""

import re
import subprocess
import threading
import time
import uuid

import kombu
import pytest
from prometheus_client import REGISTRY

from berth_contract import flavors
from compute_agent.client import ComputeClient
from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.cmd.instance_commands import build_request
from tests.docs_pages import blocks, page
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, write_conf

HOSTS = ("a1", "a2")
SYNC_PERIOD = 2
SCALING = {"scaling__sync_period": str(SYNC_PERIOD), "scaling__cpu_initialization_period": "0",
           "scaling__initial_readiness_delay": "0", "scaling__metric_max_age": "10"}
CLIENTS = {"sched", "op", "api", "guest"}
SENDERS = ("sched", "op", "api", "guest", "a1", "a2", "none")
EVERYONE = set(SENDERS)
TINY = flavors.get("m1.tiny")


def recipe(vhost, exchange, prefix, hosts, tag):
    """The admin guide's rabbitmqctl recipe ("Who may speak"), its first lines (the names, the
    passwords) set for this test."""
    [block] = [b for b in blocks("sh", page("admin/dead-letters.md")) if "set_topic_permissions" in b]
    given = {"VHOST": vhost, "EXCHANGE": exchange, "PREFIX": prefix, "HOSTS": f'"{" ".join(hosts)}"'}
    lines = []
    for line in block.splitlines():
        name = line.split("=", 1)[0]
        if name in given:
            line = f"{name}={given.pop(name)}"
        elif line.startswith("password() "):
            line = f'password() {{ echo "pw-$1-{tag}"; }}'
        lines.append(line)
    assert not given, f"the admin guide's recipe no longer sets {given}"
    return "\n".join(lines)


class Raw:
    """A broker user's own connection, publishing what any AMQP client could: into a queue
    through the default exchange, or to a fanout exchange, with the user's user_id (RabbitMQ
    checks it) or none."""

    def __init__(self, url, user_id):
        self.user_id = user_id
        self.conn = kombu.Connection(url.replace("rabbit://", "amqp://", 1),
                                     transport_options={"confirm_publish": True})
        self.producer = kombu.Producer(self.conn.channel(), auto_declare=False)

    def cast(self, method, queue="scheduler", fanout=None, version=None, **args):
        properties = {} if self.user_id is None else {"user_id": self.user_id}
        self.producer.publish(wire.cast_body(method, version, **args), exchange=fanout or "",
                              routing_key="scheduler" if fanout else queue, content_type="application/json",
                              content_encoding="utf-8", delivery_mode=2, retry=False, **properties)

    def close(self):
        self.conn.release()


class World:
    def __init__(self, fleet, urls, users):
        self.fleet, self.urls, self.users = fleet, urls, users
        self.transports = {name: rpc.get_transport(fleet.conf, urls[name]) for name in ("sched", "op", "api")}
        self.transports["guest"] = fleet.transport
        self.victims, self.member, self.server_group = [], None, None

    def scheduler(self, sender, timeout=10):
        return SchedulerClient(self.transports[sender], timeout=timeout)

    def agent(self, sender, host="a1", timeout=10):
        return rpc.RPCClient(self.transports[sender], rpc.Target("compute", server=host), timeout=timeout)

    def raw(self, sender):
        if sender == "none":
            return Raw(self.urls["guest"], None)
        return Raw(self.urls[sender], self.users[sender])

    def described(self, sender):
        """How a refusal names the sender."""
        return "a message without a user_id" if sender == "none" else f"broker user '{self.users[sender]}'"

    def host(self, name):
        return self.fleet.hosts()[name]

    def next_report(self, host):
        """The host's view once a report sent after now was taken."""
        before = self.host(host)["reported_at"]
        return self.fleet.wait(lambda: (v := self.host(host))["reported_at"] != before and v, 30,
                               f"a new report of {host}")

    def letters(self, expected, timeout=30):
        """The dead letters, consumed, once there are ``expected`` (or the timeout passed)."""
        found = []
        deadline = time.monotonic() + timeout
        while len(found) < expected and time.monotonic() < deadline:
            found += wire.dead_letters(self.fleet, expected - len(found))
            if len(found) < expected:
                time.sleep(0.2)
        return found

    def close(self):
        for name in ("sched", "op", "api"):
            self.transports[name].cleanup()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roles")
    tag = uuid.uuid4().hex[:8]
    vhost, prefix = f"berth-roles-{tag}", f"berth-roles-{tag}"
    users = {"sched": f"{prefix}-scheduler", "op": f"{prefix}-operator", "api": f"{prefix}-api",
             "guest": "guest", **{host: f"{prefix}-agent-{host}" for host in HOSTS}}
    passwords = {"sched": "scheduler", "op": "operator", "api": "api", **{h: f"agent-{h}" for h in HOSTS}}
    urls = {name: f"rabbit://{users[name]}:pw-{passwords[name]}-{tag}@127.0.0.1:5672/{vhost}"
            for name in passwords}
    urls["guest"] = f"rabbit://guest:guest@127.0.0.1:5672/{vhost}"
    with temporary_database() as database_url:
        fleet = Fleet(tmp, database_url, urls["guest"], roles__schedulers=users["sched"],
                      roles__operators=users["op"], roles__enforce="true",
                      roles__agents=",".join(f"{h}:{users[h]}" for h in HOSTS), **SCALING)
        done = subprocess.run(["bash", "-e", "-c", recipe(vhost, fleet.exchange, prefix, HOSTS, tag)],
                              capture_output=True, text=True)
        world = None
        try:
            assert done.returncode == 0, done.stdout + done.stderr
            wire.rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
            default = {"host": "sched", "transport_url": urls["sched"]}
            conf = write_conf(tmp / "sched.conf", {"DEFAULT": default})
            fleet._spawn("sched", "scheduler.cmd.scheduler", "--config-file", str(conf))
            fleet.wait(lambda: fleet.hosts() is not None, 60, "the scheduler to answer")
            for host, memory in zip(HOSTS, (16384, 8192), strict=True):
                default = {"host": host, "transport_url": urls[host]}
                conf = write_conf(tmp / f"{host}.conf", {"DEFAULT": default,
                                                         "compute_agent": {"fake_memory_mb": memory}})
                fleet._spawn(host, "compute_agent.cmd.agent", "--config-file", str(conf))
            fleet.wait_hosts_up(HOSTS)
            world = World(fleet, urls, users)
            set_up(world)
            yield world
        finally:
            if world is not None:
                world.close()
            fleet.close()
            wire.rabbitmqctl("delete_vhost", vhost, check=False)
            for name in passwords:
                wire.rabbitmqctl("delete_user", users[name], check=False)


def set_up(w):
    """Each role's own requests, on the users the recipe made: an API client boots two
    instances (on a1, the roomier); an operator disables a1 so that the API client's scaling
    group's member goes to a2, enables it again, and sets the member's load; the API client
    pushes a metric of it and creates a server group."""
    spec, props = build_request(TINY, 2)
    w.scheduler("api").run_instance({}, spec, props)
    booted = w.fleet.wait_states(spec["instance_uuids"], ("ACTIVE", "ERROR"), timeout=60)
    assert {(i["state"], i["host"]) for i in booted.values()} == {("ACTIVE", "a1")}
    w.victims = spec["instance_uuids"]

    assert w.scheduler("op").admin_call({}, "host_disable", host="a1")["disabled"] is True
    group = w.scheduler("api").admin_call(
        {}, "create_scaling_group", name="web", template={"flavor_name": "m1.tiny"},
        spec={"min": 1, "max": 6, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]})

    def member():
        members = w.scheduler("api").admin_call({}, "show_scaling_group", name_or_uuid="web")["members"]
        return members[0] if members and members[0]["state"] == "ACTIVE" else None

    found = w.fleet.wait(member, 60, "web's member ACTIVE")
    assert found["host"] == "a2"
    w.member, w.group = found["uuid"], group["uuid"]
    assert w.scheduler("op").admin_call({}, "host_enable", host="a1")["was_disabled"] is True
    overrides = w.agent("op", "a2").call({}, "set_fake_load", cpu=0.3, instance_uuids=[w.member])
    assert overrides["instances"] == {w.member: {"cpu": 0.3, "memory": None}}
    pushed = w.scheduler("api").admin_call({}, "push_instance_metrics", instance_uuid=w.member,
                                           metrics={"rps": 1})
    assert pushed["metrics"] == {"rps": 1.0}
    w.server_group = w.scheduler("api").admin_call({}, "create_server_group", name="web-spread",
                                                   policy="anti-affinity")["uuid"]
    assert {h["state"] for h in w.fleet.hosts().values()} == {"up"}  # a1 enabled again


def test_a_flood_of_hosts_changed_from_an_agent_fails_no_boot(world):
    """Issue 23, item 2: an agent's user casting hosts_changed(by="evil", deleted=[...]) on the
    schedulers' fanout made every boot fail."""
    w = world
    flooder, stop, sent = w.raw("a2"), threading.Event(), []

    def flood():
        while not stop.is_set():
            flooder.cast("hosts_changed", fanout="scheduler_fanout", by="evil", deleted=list(HOSTS))
            sent.append(1)
            stop.wait(0.2)

    thread = threading.Thread(target=flood)
    thread.start()
    try:
        w.fleet.wait(lambda: len(sent) >= 5, 10, "the flood to start")
        booted = []
        for _ in range(4):
            spec, props = build_request(TINY, 1)
            w.scheduler("api").run_instance({}, spec, props)
            booted += spec["instance_uuids"]
            time.sleep(0.5)
        states = w.fleet.wait_states(booted, ("ACTIVE", "ERROR"), timeout=60)
    finally:
        stop.set()
        thread.join()
        flooder.close()
    faults = [i["fault_reason"] for i in states.values()]
    assert [i["state"] for i in states.values()] == ["ACTIVE"] * 4, faults
    letters = w.letters(len(sent))
    assert len(letters) == len(sent)
    assert {(m.headers["x-berth-method"], m.headers["x-berth-reason"]) for m in letters} == {(
        "hosts_changed", f"NotAuthorized: hosts_changed refused: sent by {w.described('a2')} (the agent of "
        "host a2); hosts_changed may be called by schedulers ([roles] schedulers)")}
    logged = [line for line in w.fleet.log("sched").splitlines()
              if " WARNING " in line and "hosts_changed refused" in line]
    assert len(logged) == 1, logged  # once a minute per method and user (debug adds each one's traceback)
    print(f"\nroles: {len(sent)} hosts_changed from agent a2's user during 4 boots: 4 ACTIVE, {len(letters)} "
          f"dead-lettered, logged once")


def test_an_agent_terminates_only_what_a_scheduler_sends(world):
    """Issue 23, item 3: a terminate_instance cast straight to compute.a1 from another agent's
    user, or from a user that is no agent, destroyed ACTIVE instances."""
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    before = w.host("a1")["running_vms"]
    a2 = w.raw("a2")
    try:
        for victim in w.victims:
            a2.cast("terminate_instance", queue="compute.a1", instance_uuid=victim)
            ComputeClient(w.transports["guest"]).terminate_instance({}, "a1", victim)
    finally:
        a2.close()
    assert w.next_report("a1")["running_vms"] == before
    assert {i["state"] for i in w.fleet.instances(w.victims).values()} == {"ACTIVE"}
    assert not any(f"Terminated {victim}" in w.fleet.log("a1") for victim in w.victims)
    print(f"\nroles: terminates of a1's 2 instances from agent a2's user and from guest: 2 ACTIVE, a1 "
          f"running {before}")
    letters = w.letters(4)
    assert sorted((m.headers["x-berth-queue"], m.headers["x-berth-method"]) for m in letters) == [
        ("compute.a1", "terminate_instance")] * 4
    assert {m.headers["x-berth-reason"].split(";")[0] for m in letters} == {
        f"NotAuthorized: terminate_instance refused: sent by {w.described('a2')} (the agent of host a2)",
        "NotAuthorized: terminate_instance refused: sent by broker user 'guest' (a client)"}


def test_an_agent_builds_only_what_a_scheduler_sends_whatever_the_limits_say(world):
    """Issue 23, item 3: a forged run_instance to an agent, with forged limits, built a 20 GB
    instance on a 16 GB host that the database never heard of."""
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    before = w.host("a1")
    forged = []
    a2 = w.raw("a2")
    try:
        for send in (lambda **kw: a2.cast("run_instance", queue="compute.a1", **kw),
                     lambda **kw: ComputeClient(w.transports["guest"]).run_instance({}, "a1", **kw)):
            uuid_ = str(uuid.uuid4())
            forged.append(uuid_)
            limits = {"memory_mb": 10**6, "disk_gb": 10**6, "vcpu": 10**3}
            send(instance={"uuid": uuid_, "flavor": {"memory_mb": 20480, "root_gb": 1, "vcpus": 1},
                           "project_id": "evil"},
                 request_spec={}, filter_properties={"limits": limits})
    finally:
        a2.close()
    after = w.next_report("a1")
    used = ("memory_mb_used", "running_vms")
    assert [after[key] for key in used] == [before[key] for key in used]
    assert not any(f"Claimed {uuid_}" in w.fleet.log("a1") for uuid_ in forged)
    letters = w.letters(2)
    assert [(m.headers["x-berth-queue"], m.headers["x-berth-method"]) for m in letters] == [
        ("compute.a1", "run_instance")] * 2
    assert all("run_instance may be called by schedulers ([roles] schedulers)" in m.headers["x-berth-reason"]
               for m in letters)
    print(f"\nroles: forged 20 GB builds to a1 (16 GB): 0 built, a1 memory used {after['memory_mb_used']} MB")


def test_an_agent_cannot_boot_instances_by_forging_a_send_back(world):
    """Issue 42, section 3: agent a2's user cast run_instance for new instances with a2 last in the
    retry record, alone and three in a bundle (API 1.3): every one was created and built ACTIVE on
    another host."""
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    wire.dead_letters(w.fleet, 1000)  # what the tests before left

    def forged(count):
        spec, props = build_request(TINY, count)
        props["retry"] = {"num_attempts": 2, "hosts": [["a2", "a2"]], "exc_reason": "a2: forged"}
        return spec, props

    alone = forged(5)
    bundle = [forged(3) for _ in range(3)]
    unreadable = forged(2)  # a client's would get ERROR rows saying why
    unreadable[0]["instance_type"] = dict(TINY, memory_mb="lots")
    a2, transport = w.raw("a2"), rpc.get_transport(w.fleet.conf, w.urls["a2"])
    try:
        for spec, props in (alone, unreadable):
            a2.cast("run_instance", request_spec=spec, filter_properties=props)
        bundles = REGISTRY.get_sample_value("berth_rpc_bundles_total", {"topic": "scheduler"}) or 0
        SchedulerClient(transport).run_instances([({}, spec, props) for spec, props in bundle])
        assert REGISTRY.get_sample_value("berth_rpc_bundles_total", {"topic": "scheduler"}) == bundles + 1
    finally:
        a2.close()
        transport.cleanup()
    casts = [alone, *bundle]
    letters = w.letters(len(casts) + 1)
    uuids = [u for spec, _ in (*casts, unreadable) for u in spec["instance_uuids"]]
    created = w.fleet.instances(uuids)
    assert created == {}, {u: (i["state"], i["host"]) for u, i in created.items()}
    logs = w.fleet.log("a1") + w.fleet.log("a2")
    assert not [u for u in uuids if f"Claimed {u}" in logs]
    reasons = sorted((m.headers["x-berth-method"], m.headers["x-berth-reason"]) for m in letters)
    [unread] = [reason for _, reason in reasons if "memory_mb: must be an integer" in reason]
    reasons.remove(("run_instance", unread))
    assert reasons == sorted(
        ("run_instance", f"InvalidRequest: run_instance: a send-back from a2 names instances "
         f"{', '.join(spec['instance_uuids'])}, which the database does not have on a2: refused, nothing "
         "created") for spec, _ in casts)
    print(f"\nroles: send-backs forged by agent a2's user for 5 new instances alone, 9 in a bundle of 3 "
          f"casts and 2 unreadable: {len(created)} created, {len(letters)} dead-lettered")


def _forged_report(view, holds):
    """A report of a1 with the figures a1 reported last, holding ``holds``."""
    figures = ("memory_mb", "free_ram_mb", "local_gb", "free_disk_gb", "vcpus", "vcpus_used")
    return {"host": "a1", "nodename": "a1", **{key: view[key] for key in figures}, "instance_uuids": holds,
            "running_vms": len(holds)}


def test_a_report_does_not_set_the_samples_of_another_hosts_instance(world):
    """Issue 23, item 4: agent a1's report listing a2's member at cpu 64 made its group scale
    1 -> 5 -> 6."""
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    holds = [i["uuid"] for i in w.fleet.client.list_instances({}, host="a1")] + [w.member]
    report = dict(_forged_report(w.host("a1"), holds), instance_usage={w.member: {"cpu": 64.0}})
    a1, seen, desired = w.raw("a1"), set(), set()
    try:
        deadline = time.monotonic() + 3 * SYNC_PERIOD + 1
        while time.monotonic() < deadline:
            a1.cast("report_resources", fanout="scheduler_fanout", host="a1", resources=report)
            sample = w.fleet.client.admin_call({}, "show_instance_metrics", instance_uuids=[w.member])
            seen.add(sample.get(w.member, {}).get("cpu", {}).get("value"))
            desired.add(w.fleet.client.admin_call({}, "show_scaling_group", name_or_uuid="web")["desired"])
            time.sleep(0.25)
    finally:
        a1.close()
    time.sleep(SYNC_PERIOD + 1)
    group = w.fleet.client.admin_call({}, "show_scaling_group", name_or_uuid="web")
    assert 64.0 not in seen and seen - {None} <= {0.3}, seen  # only a2's own word: the load the operator set
    assert (desired, group["desired"], len(group["members"])) == ({1}, 1, 1)
    assert "Report of host a1: usage samples of 1 scaling group member(s) the database places on another " \
           f"host dropped, not stored: {w.member}" in w.fleet.log("sched")
    print(f"\nroles: a1's reports carrying a2's member at cpu 64 for {3 * SYNC_PERIOD + 1} s: samples seen "
          f"{sorted(s for s in seen if s is not None)}, desired {group['desired']}")


def cases(w):
    """(queue, method, who may send it, its arguments): every public RPC method of the scheduler
    (queue scheduler) and of the agent (compute.a1), with arguments it would act on."""

    def new_request():
        spec, props = build_request(TINY, 1)
        return {"request_spec": spec, "filter_properties": props}

    def sent_back():
        spec, props = build_request(TINY, 1)
        props["retry"] = {"num_attempts": 1, "hosts": [["a1", "a1"]], "exc_reason": "a1: forged"}
        return {"request_spec": spec, "filter_properties": props}

    spec = {"min": 1, "max": 6, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]}
    view = w.host("a1")
    victim = w.victims[0]
    return [
        ("scheduler", "run_instance", CLIENTS, new_request),
        ("scheduler", "run_instance", {"a1"}, sent_back),
        ("scheduler", "select_destinations", CLIENTS, new_request),
        ("scheduler", "delete_instance", CLIENTS, lambda: {"instance_uuid": victim}),
        ("scheduler", "report_resources", {"a1"}, lambda: {
            "host": "a1", "resources": dict(_forged_report(view, w.victims), memory_mb=999_999)}),
        ("scheduler", "instance_update", {"a1"}, lambda: {"instance_uuid": victim, "host": "a1",
                                                          "state": "ERROR"}),
        ("scheduler", "start_build", {"a1"}, lambda: {"instance_uuid": victim, "host": "a1"}),
        ("scheduler", "hosts_changed", {"sched"}, lambda: {"by": "evil", "deleted": list(HOSTS)}),
        ("scheduler", "aggregates_changed", {"sched"}, lambda: {"by": "evil"}),
        ("scheduler", "host_disable", {"op"}, lambda: {"host": "a1", "reason": "evil"}),
        ("scheduler", "host_enable", {"op"}, lambda: {"host": "a1"}),
        ("scheduler", "host_delete", {"op"}, lambda: {"host": "a1"}),
        ("scheduler", "create_aggregate", {"op"}, lambda: {"name": "evil"}),
        ("scheduler", "delete_aggregate", {"op"}, lambda: {"name": "evil"}),
        ("scheduler", "aggregate_add_host", {"op"}, lambda: {"name": "evil", "host": "a1"}),
        ("scheduler", "aggregate_remove_host", {"op"}, lambda: {"name": "evil", "host": "a1"}),
        ("scheduler", "aggregate_set_metadata", {"op"}, lambda: {"name": "evil", "metadata": {"k": "v"}}),
        ("scheduler", "create_server_group", CLIENTS, lambda: {"name": "evil", "policy": "affinity"}),
        ("scheduler", "delete_server_group", CLIENTS, lambda: {"group_uuid": w.server_group}),
        ("scheduler", "create_scaling_group", CLIENTS, lambda: {
            "name": "evil", "spec": spec, "template": {"flavor_name": "m1.tiny"}}),
        ("scheduler", "update_scaling_group", CLIENTS, lambda: {"name_or_uuid": "web",
                                                                "changes": {"desired": 6}}),
        ("scheduler", "pause_scaling_group", CLIENTS, lambda: {"name_or_uuid": "web"}),
        ("scheduler", "resume_scaling_group", CLIENTS, lambda: {"name_or_uuid": "web"}),
        ("scheduler", "delete_scaling_group", CLIENTS, lambda: {"name_or_uuid": "web"}),
        ("scheduler", "push_instance_metrics", CLIENTS, lambda: {"instance_uuid": w.member,
                                                                 "metrics": {"rps": 1000}}),
        ("scheduler", "migrate_instance", {"op"}, lambda: {"instance_uuid": victim}),
        ("scheduler", "evacuate_host", {"op"}, lambda: {"host": "a1"}),
        ("scheduler", "resize_instance", CLIENTS, lambda: {"instance_uuid": victim,
                                                           "flavor": {"memory_mb": 128, "vcpus": 1}}),
        ("scheduler", "confirm_resize", CLIENTS, lambda: {"instance_uuid": victim}),
        ("scheduler", "revert_resize", CLIENTS, lambda: {"instance_uuid": victim}),
        ("scheduler", "move_update", {"a1"}, lambda: {"instance_uuid": victim, "host": "a1",
                                                      "migration_id": 1, "outcome": "done"}),
        ("scheduler", "start_drain", {"op"}, lambda: {"host": "a1"}),
        ("scheduler", "apply_rebalance_plan", {"op"}, lambda: {"plan_id": 1}),
        ("scheduler", "show_job", {"op"}, lambda: {"job_id": 1}),
        ("scheduler", "list_jobs", {"op"}, dict),
        ("scheduler", "stop_job", {"op"}, lambda: {"job_id": 1}),
        ("scheduler", "stop_instance", CLIENTS, lambda: {"instance_uuid": victim}),
        ("scheduler", "start_instance", CLIENTS, lambda: {"instance_uuid": victim}),
        ("scheduler", "reboot_instance", CLIENTS, lambda: {"instance_uuid": victim, "hard": True}),
        ("scheduler", "list_migrations", EVERYONE, dict),
        ("scheduler", "list_hosts", EVERYONE, dict),
        ("scheduler", "list_instances", EVERYONE, dict),
        ("scheduler", "show_instance", EVERYONE, lambda: {"instance_uuid": victim}),
        ("scheduler", "list_services", EVERYONE, dict),
        ("scheduler", "list_aggregates", EVERYONE, dict),
        ("scheduler", "show_aggregate", EVERYONE, lambda: {"name": "evil"}),
        ("scheduler", "list_server_groups", EVERYONE, dict),
        ("scheduler", "show_server_group", EVERYONE, lambda: {"group_uuid": w.server_group}),
        ("scheduler", "list_scaling_groups", EVERYONE, dict),
        ("scheduler", "show_scaling_group", EVERYONE, lambda: {"name_or_uuid": "web"}),
        ("scheduler", "show_instance_metrics", EVERYONE, lambda: {"instance_uuids": [w.member]}),
        ("compute.a1", "run_instance", {"sched"}, lambda: {
            "instance": {"uuid": str(uuid.uuid4()), "flavor": dict(TINY)}, "request_spec": {},
            "filter_properties": {"limits": {"memory_mb": 10**6}}}),
        ("compute.a1", "terminate_instance", {"sched"}, lambda: {"instance_uuid": victim}),
        ("compute.a1", "move_instance", {"sched"}, lambda: {
            "instance": {"uuid": str(uuid.uuid4()), "flavor": dict(TINY)}, "request_spec": {},
            "filter_properties": {"limits": {"memory_mb": 10**6}},
            "migration": {"id": 1, "kind": "migration", "source_host": "a2", "live": False,
                          "old_flavor": dict(TINY)}}),
        ("compute.a1", "end_resize", {"sched"}, lambda: {"instance_uuid": victim, "migration_id": 1,
                                                         "confirmed": True}),
        ("compute.a1", "prepare_move", {"sched"}, lambda: {
            "instance": {"uuid": str(uuid.uuid4()), "flavor": dict(TINY)}, "request_spec": {},
            "filter_properties": {"limits": {"memory_mb": 10**6}},
            "migration": {"id": 1, "kind": "migration", "source_host": "a2", "live": False,
                          "old_flavor": dict(TINY)}}),
        ("compute.a1", "migrate_out", {"sched"}, lambda: {
            "instance_uuid": victim, "transfer": {},
            "migration": {"id": 1, "kind": "migration", "source_host": "a1", "dest_host": "a2"}}),
        ("compute.a1", "finish_move", {"sched"}, lambda: {"instance_uuid": victim, "migration_id": 1}),
        ("compute.a1", "abort_move", {"sched"}, lambda: {"instance_uuid": victim, "migration_id": 1}),
        ("compute.a1", "power_off_instance", {"sched"}, lambda: {"instance_uuid": victim}),
        ("compute.a1", "power_on_instance", {"sched"}, lambda: {"instance_uuid": victim}),
        ("compute.a1", "reboot_instance", {"sched"}, lambda: {"instance_uuid": victim, "hard": True}),
        ("compute.a1", "console_output", CLIENTS, lambda: {"instance_uuid": victim, "lines": 5}),
        ("compute.a1", "set_fake_load", {"op"}, lambda: {"cpu": 1.0}),
        ("compute.a1", "clear_fake_load", {"op"}, dict),
    ]


#: The methods of the compute API 2.x alone, sent at their version; the others at 1.0 (or their 1.x
#: version).
COMPUTE_2 = {"prepare_move": "2.0", "migrate_out": "2.0", "finish_move": "2.0", "abort_move": "2.0",
             "power_off_instance": "2.1", "power_on_instance": "2.1", "reboot_instance": "2.1",
             "console_output": "2.1"}
#: The methods of the scheduler API from 1.6.
SCHEDULER_1_6 = {"stop_instance", "start_instance", "reboot_instance"}


def declared_methods():
    """{(queue, method)} of every public RPC method the scheduler and the agent serve."""
    from compute_agent.fake_load_endpoint import FakeLoadEndpoint
    from compute_agent.manager import ComputeEndpoint, ComputeV1Endpoint
    from scheduler.admin.grouping import AdminEndpoint
    from scheduler.admin.hosts import HostAdminEndpoint
    from scheduler.manager import SchedulerManager
    from scheduler.moves.api import MoveEndpoint
    from scheduler.moves.jobs.api import JobEndpoint
    from scheduler.scaling.api import ScalingGroupEndpoint
    from scheduler.scaling.instance_metrics_api import InstanceMetricsEndpoint

    found = set()
    for queue, classes in (("scheduler", (SchedulerManager, MoveEndpoint, AdminEndpoint, HostAdminEndpoint,
                                          JobEndpoint, ScalingGroupEndpoint, InstanceMetricsEndpoint)),
                           ("compute.a1", (ComputeEndpoint, ComputeV1Endpoint, FakeLoadEndpoint))):
        found |= {(queue, name) for cls in classes for name in dir(cls)
                  if not name.startswith("_") and callable(getattr(cls, name))}
    return found


def _state(w):
    """What a message that got through would change."""
    instances = w.fleet.instances()
    watched = [*w.victims, w.member]
    samples = w.fleet.client.admin_call({}, "show_instance_metrics", instance_uuids=[w.member])
    samples = samples.get(w.member, {})
    return {
        "hosts": {h: (v["state"], v["memory_mb"]) for h, v in w.fleet.hosts().items()},
        "instances": {u: (i["state"], i["host"]) for u, i in instances.items() if u in watched},
        "instance count": len(instances),
        "aggregates": w.fleet.client.admin_call({}, "list_aggregates"),
        "server groups": sorted(g["name"] for g in w.fleet.client.admin_call({}, "list_server_groups")),
        "scaling groups": [(g["name"], g["state"], g["desired"])
                           for g in w.fleet.client.admin_call({}, "list_scaling_groups")],
        # Pushed metrics alone: the agent's measured ones (cpu, memory) arrive with its reports.
        "metrics": {name: sample["value"] for name, sample in samples.items()
                    if name not in ("cpu", "memory")},
    }


def done_on_a1(log):
    """What a1's log says it did: claims, terminates, fake loads set, power actions begun."""
    return tuple(log.count(what) for what in ("Claimed ", "Terminated ", "Fake load set on a1",
                                              "power_off of ", "power_on of ", "reboot of ",
                                              "reboot (hard) of "))


def test_every_method_from_every_role_that_may_not_call_it_is_refused_and_changes_nothing(world):
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    table = cases(w)
    assert {(queue, method) for queue, method, _, _ in table} == declared_methods()
    wire.dead_letters(w.fleet, 1000)  # what the tests before left
    before = _state(w)
    log = w.fleet.log("a1")
    claimed = done_on_a1(log)
    answered, by_broker, cast = {}, [], []
    for queue, method, allowed, args in table:
        for sender in SENDERS:
            if sender in allowed:
                continue
            version = (COMPUTE_2.get(method) if queue == "compute.a1" else
                       "1.6" if method in SCHEDULER_1_6 else None)
            if sender in ("a1", "a2", "none"):  # casts: agents may not declare reply queues
                raw = w.raw(sender)
                try:
                    raw.cast(method, queue=queue, version=version, **args())
                finally:
                    raw.close()
                cast.append((queue, method, sender))
                continue
            client = (w.agent(sender) if queue == "compute.a1" else
                      rpc.RPCClient(w.transports[sender], rpc.Target("scheduler"), timeout=10))
            try:
                client.prepare(version=version).call({}, method, **args())
            except rpc.RemoteError as exc:
                answered[(queue, method, sender)] = f"{exc.exc_type}: {exc.value}"
            except rpc.MessagingException as exc:
                assert "ACCESS_REFUSED" in str(exc) and sender == "api" and queue == "compute.a1", exc
                by_broker.append((queue, method, sender))
            else:
                answered[(queue, method, sender)] = "done"
    for (queue, method, sender), outcome in answered.items():
        assert outcome.startswith("NotAuthorized: ") and f"sent by {w.described(sender)}" in outcome, \
            (queue, method, sender, outcome)
        assert f"{method} " in outcome

    letters = w.letters(len(cast))
    refused = {}
    for letter in letters:
        who = re.search(r"sent by (broker user '([^']+)'|a message without a user_id)",
                        letter.headers["x-berth-reason"])
        sender = next(s for s in SENDERS if who and w.described(s) == who.group(0)[len("sent by "):])
        queue = "scheduler" if letter.headers["x-berth-queue"].startswith("scheduler") else "compute.a1"
        assert letter.headers["x-berth-reason"].startswith("NotAuthorized: "), letter.headers
        refused[(queue, letter.headers["x-berth-method"], sender)] = letter.headers["x-berth-reason"]
    assert sorted(refused) == sorted(set(cast)), set(cast) ^ set(refused)

    after = _state(w)
    assert after == before
    log = w.fleet.log("a1")
    assert done_on_a1(log) == claimed
    print(f"\nroles: {len(answered)} calls answered NotAuthorized, {len(refused)} casts dead-lettered "
          f"NotAuthorized, {len(by_broker)} refused by RabbitMQ (the API client's topic permissions), of "
          f"{len(table)} cases on {len(declared_methods())} methods; state unchanged")

    # Each role's own requests still work after all that.
    spec, props = build_request(TINY, 1)
    w.scheduler("api").run_instance({}, spec, props)
    booted = w.fleet.wait_states(spec["instance_uuids"], ("ACTIVE", "ERROR"))
    assert {i["state"] for i in booted.values()} == {"ACTIVE"}
    assert w.scheduler("op").admin_call({}, "create_aggregate", name="rack-1")["name"] == "rack-1"
    assert w.agent("op", "a1").call({}, "clear_fake_load")["host"] == "a1"


def test_an_api_client_stops_starts_and_reads_the_console_of_an_instance(world):
    """Issue 44: an API client's user (in no list) stops and starts an instance through the
    scheduler and reads its console from its agent, whose [roles] check lets a client do that alone
    (the recipe lets API clients publish to the agents: every other method there is refused above)."""
    w = world
    w.fleet.wait_hosts_up(HOSTS)
    victim = w.victims[0]
    api = w.scheduler("api")
    assert api.stop_instance({}, victim)["state"] == "POWERING_OFF"
    w.fleet.wait_states([victim], ("SHUTOFF",), timeout=60)
    assert api.start_instance({}, victim)["state"] == "POWERING_ON"
    w.fleet.wait_states([victim], ("ACTIVE",), timeout=60)
    lines = ComputeClient(w.transports["api"]).console_output({}, "a1", victim, 3)["lines"]
    said = ("powered off", "powered on", "booted")
    assert lines == [f"berth fake console: {victim} {what}" for what in said]
