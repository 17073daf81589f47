"""Moving instances on real processes: RabbitMQ, PostgreSQL, schedulers and agents.

A drain while boots go on and a scheduler and an agent are SIGKILLed in the middle, an agent
SIGKILLed while it takes an instance in, resizes in place and with a move, confirmed
and reverted, the evacuation of a host whose agent died, and an oslo.messaging
client calling the new methods.
"""

import collections
import importlib
import signal
import threading
import time

import oslo_messaging
import pytest
from oslo_config import cfg

from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_messaging_oslo import OSLO_OPTS

pytestmark = pytest.mark.functional

SMALL = {"memory_mb": 1024, "root_gb": 1, "vcpus": 1}
HOST_MB = 16384


def boot(fleet, count, flavor=SMALL, force=None, hints=()):
    request_spec, filter_properties = build_request(flavor, count, hints=hints)
    if force:
        filter_properties["force_hosts"] = [force]
    fleet.client.run_instance({}, request_spec, filter_properties)
    return request_spec["instance_uuids"]


class Sampler:
    """Samples, every 0.2 s while a test runs, what would break a rule: a host whose claims pass its
    memory (the hosts' figures the agents report, and what the scheduler counts on top of them),
    and two members of the anti-affinity group on one host (a moving one counts on both)."""

    def __init__(self, fleet, members):
        self.fleet, self.members = fleet, set(members)
        self.over, self.together, self.samples = [], [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.2):
            try:
                hosts = self.fleet.hosts()
                instances = self.fleet.instances(include_deleted=False)
            except Exception:  # a scheduler being killed: the next sample
                continue
            self.samples += 1
            for name, host in hosts.items():
                if host["memory_mb_used"] > host["memory_mb"]:
                    self.over.append((name, host["memory_mb_used"], host["memory_mb"]))
            held = collections.Counter()
            for uuid in self.members:
                instance = instances.get(uuid)
                if instance is None:
                    continue
                for host in {instance.get("host"), instance.get("move_host")} - {None}:
                    held[host] += 1
            self.together += [(host, count) for host, count in held.items() if count > 1]

    def stop(self):
        self._stop.set()
        self._thread.join(10)


def drain_fleet(tmp_path, url, transport_url):
    fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                  compute_agent__reserved_host_memory_mb=0)
    fleet.start_schedulers(["sched-1", "sched-2"])
    hosts = ["src", "a", "b", "c", "d", "spare"]
    for host in hosts:
        memory = 2 * HOST_MB if host == "src" else HOST_MB
        fleet.start_agent(host, fake_memory_mb=memory, fake_migration_time_per_gb=0.5)
    fleet.wait_hosts_up(hosts)
    group = fleet.client.admin_call({}, "create_server_group", name="web", policy="anti-affinity")
    members = []
    for host in ("src", "a", "b", "c", "d"):  # one member a host; spare holds none
        members += boot(fleet, 1, force=host, hints={"group": group["uuid"]})
    others = boot(fleet, 19, force="src")  # src holds 20
    fleet.wait_states(members + others, ("ACTIVE",))
    return fleet, members, others


def check_drained(fleet, result, sampler, members, moved, booted):
    assert result.returncode == 0, result.stdout + result.stderr
    assert "host src is empty" in result.stdout
    final = fleet.wait_states(list(dict.fromkeys(members + moved + booted)), ("ACTIVE",))
    assert all(i["host"] != "src" and i["move_host"] is None for i in final.values())
    assert not [i for i in fleet.instances(include_deleted=False).values() if i["host"] == "src"]
    assert fleet.wait(lambda: fleet.hosts()["src"]["running_vms"] == 0, 30, "src's agent to hold nothing")
    assert len({final[u]["host"] for u in members}) == len(members)  # the group's rule at the end
    assert sampler.samples > 10
    assert sampler.over == [], "a host held more than its memory"
    assert sampler.together == [], "two members of the anti-affinity group shared a host"
    migrations = fleet.client.list_migrations({}, host="src")
    assert collections.Counter(m["status"] for m in migrations) == {"completed": len(moved)}


def start_drain(fleet, max_parallel):
    """`berth host drain src` in a thread; its CompletedProcess lands in the dict returned."""
    draining = {}
    drain = threading.Thread(target=lambda: draining.update(
        result=fleet.cli("host", "drain", "src", "--max-parallel", str(max_parallel), timeout=300)))
    drain.start()
    return drain, draining


def test_a_drain_moves_everything_off_a_host_while_boots_go_on_and_a_scheduler_and_an_agent_die(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet, members, others = drain_fleet(tmp_path, url, transport_url)
        try:
            sampler = Sampler(fleet, members)
            drain, draining = start_drain(fleet, 4)
            booted = boot(fleet, 2)
            fleet.wait(lambda: len(fleet.client.list_migrations({}, host="src")) >= 4, 60, "4 moves to start")
            fleet.stop("sched-1", sig=signal.SIGKILL)
            fleet.stop("spare", sig=signal.SIGKILL)  # a destination: what it was taking in resumes
            booted += boot(fleet, 2)
            time.sleep(1)
            fleet.start_agent("spare", fake_memory_mb=HOST_MB, fake_migration_time_per_gb=0.5)
            while drain.is_alive() and len(booted) < 30:
                booted += boot(fleet, 2)
                time.sleep(0.3)
            drain.join(300)
            sampler.stop()
            check_drained(fleet, draining["result"], sampler, members, members[:1] + others, booted)
        finally:
            fleet.close()


def test_an_agent_killed_while_it_takes_an_instance_in_finishes_the_move_when_it_is_back(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url)
        try:
            fleet.start_schedulers(["sched-1"])
            fleet.start_agent("from")
            fleet.start_agent("to", fake_move_finish_time=6.0)
            fleet.wait_hosts_up(["from", "to"])
            [uuid] = boot(fleet, 1, flavor={"memory_mb": 2048, "root_gb": 1, "vcpus": 1}, force="from")
            fleet.wait_states([uuid], ("ACTIVE",))
            moved = fleet.cli("migrate", uuid, "--host", "to")
            assert moved.returncode == 0, moved.stderr
            fleet.wait(lambda: f"Finishing the move of {uuid}" in fleet.log("to"), 30, "to to take it in")
            fleet.stop("to", sig=signal.SIGKILL)
            assert fleet.instances([uuid])[uuid]["state"] == "MIGRATING"
            fleet.start_agent("to", fake_move_finish_time=6.0)
            [done] = fleet.wait_states([uuid], ("ACTIVE",)).values()
            assert (done["host"], done["move_host"]) == ("to", None)
            assert fleet.wait(lambda: fleet.hosts()["from"]["running_vms"] == 0, 30, "from to let it go")
            [migration] = fleet.client.list_migrations({}, instance_uuid=uuid)
            assert (migration["status"], migration["dest_host"]) == ("completed", "to")
        finally:
            fleet.close()


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moves")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0, scheduler__service_down_time=6)
        try:
            fleet.start_schedulers(["sched-1"])
            for host, memory in (("big", 8192), ("mid", 6144), ("tiny", 4096)):
                fleet.start_agent(host, fake_memory_mb=memory)
            fleet.wait_hosts_up(["big", "mid", "tiny"])
            yield fleet
        finally:
            fleet.close()


def used(fleet, host):
    return fleet.hosts()[host]["memory_mb_used"]


def test_a_resize_that_fits_is_done_in_place_and_confirmed(small_fleet):
    fleet = small_fleet
    [uuid] = boot(fleet, 1, force="big")
    fleet.wait_states([uuid], ("ACTIVE",))
    resized = fleet.cli("resize", uuid, "--flavor-ram", "2048", "--flavor-disk", "1", "--flavor-vcpus", "1")
    assert resized.returncode == 0, resized.stderr
    [shown] = fleet.wait_states([uuid], ("VERIFY_RESIZE",)).values()
    assert (shown["host"], shown["memory_mb"]) == ("big", 2048)
    confirmed = fleet.cli("resize", uuid, "--confirm")
    assert confirmed.returncode == 0, confirmed.stderr
    fleet.wait_states([uuid], ("ACTIVE",))
    fleet.wait(lambda: fleet.hosts()["big"]["memory_mb_used"] == 2048, 30, "big to hold the new size only")
    fleet.client.delete_instance({}, uuid)
    fleet.wait_states([uuid], ("DELETED",))


def test_a_resize_that_does_not_fit_moves_and_a_revert_brings_it_back(small_fleet):
    fleet = small_fleet
    [uuid] = boot(fleet, 1, flavor={"memory_mb": 4096, "root_gb": 1, "vcpus": 1}, force="mid")
    fleet.wait_states([uuid], ("ACTIVE",))
    resized = fleet.cli("resize", uuid, "--flavor-ram", "7168", "--flavor-disk", "1", "--flavor-vcpus", "1")
    assert resized.returncode == 0, resized.stderr
    [shown] = fleet.wait_states([uuid], ("VERIFY_RESIZE",)).values()
    assert (shown["host"], shown["move_host"], shown["memory_mb"]) == ("big", "mid", 7168)
    # both hold it until the user decides: mid its old size, big its new one
    fleet.wait(lambda: used(fleet, "big") == 7168 and used(fleet, "mid") == 4096, 30, "both hosts to hold it")
    refused = fleet.cli("migrate", uuid)
    assert refused.returncode == 1 and "confirm or revert the resize" in refused.stdout + refused.stderr
    reverted = fleet.cli("resize", uuid, "--revert")
    assert reverted.returncode == 0, reverted.stderr
    [back] = fleet.wait_states([uuid], ("ACTIVE",)).values()
    assert (back["host"], back["move_host"], back["memory_mb"]) == ("mid", None, 4096)
    fleet.wait(lambda: used(fleet, "big") == 0, 30, "big to let the new size go")
    history = fleet.cli("migrations", "--instance", uuid, "-f", "value", "-c", "status")
    assert history.stdout.split() == ["reverted"]
    fleet.client.delete_instance({}, uuid)
    fleet.wait_states([uuid], ("DELETED",))


def test_an_oslo_messaging_client_resizes_and_migrates(small_fleet):
    fleet = small_fleet
    [uuid] = boot(fleet, 1, force="mid")
    fleet.wait_states([uuid], ("ACTIVE",))
    oconf = cfg.ConfigOpts()
    oconf([])
    for module, attr, group in OSLO_OPTS:
        oconf.register_opts(getattr(importlib.import_module(module), attr), group=group)
    oconf.set_override("control_exchange", fleet.exchange)
    oconf.set_override("amqp_durable_queues", fleet.conf.oslo_messaging_rabbit.amqp_durable_queues,
                       group="oslo_messaging_rabbit")
    transport = oslo_messaging.get_rpc_transport(oconf, url=fleet.conf.transport_url)
    try:
        target = oslo_messaging.Target(topic="scheduler", version="1.1")
        client = oslo_messaging.get_rpc_client(transport, target, timeout=30)
        migration = client.call({}, "migrate_instance", instance_uuid=uuid, host="tiny", force=False,
                                live=True)
        assert (migration["kind"], migration["dest_host"]) == ("live-migration", "tiny")
        fleet.wait(lambda: fleet.instances([uuid])[uuid]["host"] == "tiny", 60, "the move to end")
        with pytest.raises(oslo_messaging.RemoteError) as refused:
            client.call({}, "resize_instance", instance_uuid=uuid,
                        flavor={"memory_mb": 9000, "root_gb": 1, "vcpus": 1})
        assert refused.value.exc_type == "MoveRefused"
        assert "RamFilter" in refused.value.value
        client.cast({}, "resize_instance", instance_uuid=uuid,
                    flavor={"memory_mb": 2048, "root_gb": 1, "vcpus": 1})
        fleet.wait_states([uuid], ("VERIFY_RESIZE",))
        client.call({}, "confirm_resize", instance_uuid=uuid)
        fleet.wait_states([uuid], ("ACTIVE",))
    finally:
        transport.cleanup()
    fleet.client.delete_instance({}, uuid)
    fleet.wait_states([uuid], ("DELETED",))


def test_evacuate_is_refused_for_a_live_host_and_rebuilds_a_dead_ones_instances(small_fleet):
    fleet = small_fleet
    uuids = boot(fleet, 2, force="tiny")
    fleet.wait_states(uuids, ("ACTIVE",))
    refused = fleet.cli("host", "evacuate", "tiny")
    assert refused.returncode == 1 and "Host tiny is up" in refused.stdout + refused.stderr
    fleet.stop("tiny", sig=signal.SIGKILL)
    fleet.wait(lambda: fleet.hosts()["tiny"]["state"] == "down", 30, "tiny to be down")
    evacuated = fleet.cli("host", "evacuate", "tiny")
    assert evacuated.returncode == 0, evacuated.stdout + evacuated.stderr
    final = fleet.wait_states(uuids, ("ACTIVE",))
    assert {i["host"] for i in final.values()} <= {"big", "mid"}
    assert all(i["move_host"] is None for i in final.values())
    kinds = {m["kind"] for u in uuids for m in fleet.client.list_migrations({}, instance_uuid=u)}
    assert kinds == {"evacuation"}
