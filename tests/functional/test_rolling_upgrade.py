"""A rolling upgrade: schedulers of this release beside agents of earlier ones.

The previous release's agents serve version 1.2 of the compute API (a move's destination takes
it alone); this release's agents serve 2.0 beside it (moves between two agents, step by step).
With ``[upgrade_levels] compute = 1.2`` on the schedulers, an agent of each release move
instances between them; once every agent is upgraded and the cap removed, moves go by steps.
The release before served 1.0: capped at 1.0 every boot and delete works while such agents are
upgraded one by one; capped above it, the old agents refuse the newer terminates
(UnsupportedVersion, dead-lettered) and the instances stay DELETING until the schedulers are
capped and restarted.
"""

import importlib
import pathlib
import re
import time

import oslo_messaging
import pytest
from oslo_config import cfg

from scheduler import api_versions
from scheduler.cmd.instance_commands import build_request
from scheduler.manager import DELETED_BY_CLIENT
from scheduler.rpc import deadletter
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost, write_conf
from tests.functional.test_faults import burst
from tests.functional.test_messaging_oslo import OSLO_OPTS

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # where "tests" is importable from
PREVIOUS = {"module": "tests.functional.previous_agent", "env": {"PYTHONPATH": ROOT}}
#: An agent of the release that served the compute API 1.0.
RELEASE_1_0 = {"module": "tests.functional.previous_agent",
               "env": {"PYTHONPATH": ROOT, "BERTH_AGENT_RELEASE": "1.0"}}
SIZE = {"fake_memory_mb": 65536, "fake_local_gb": 4000, "fake_vcpus": 64}
TERMINATED = re.compile(r"Terminated ([0-9a-f-]{36})(?: \((.*)\))?$", re.M)


def start_scheduler(fleet, name, compute=""):
    """A scheduler whose [upgrade_levels] compute is ``compute`` (empty: no cap)."""
    conf_file = write_conf(fleet.tmp / f"{name}.conf",
                           {"DEFAULT": {"host": name}, "upgrade_levels": {"compute": compute}})
    fleet._spawn(name, "scheduler.cmd.scheduler", "--config-file", str(conf_file))
    fleet.wait(lambda: fleet.scheduler_client(name).call({}, "list_hosts") is not None, 60,
               f"{name} to answer")


def terminated(fleet, host):
    """{uuid: reason or None} of what the agent of ``host`` logged terminating."""
    return {uuid: reason for uuid, reason in TERMINATED.findall(fleet.log(host))}


def delete(fleet, uuids):
    for uuid in uuids:
        fleet.client.delete_instance({}, uuid)


def test_capped_at_compute_1_0_boots_and_deletes_work_while_the_agents_are_upgraded(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            start_scheduler(fleet, "sched", compute="1.0")
            for host in ("old-a", "old-b"):
                fleet.start_agent(host, **RELEASE_1_0, **SIZE)
            fleet.wait_hosts_up(["old-a", "old-b"])
            first = burst(fleet, 8, per_request=1)
            placed = fleet.wait_states(first, ("ACTIVE", "ERROR"), timeout=60)
            delete(fleet, first[:4])
            fleet.wait_states(first[:4], ("DELETED",), timeout=60)

            # One agent upgraded (its instances stay), the other not yet: still capped.
            assert fleet.stop("old-b") == 0
            fleet.start_agent("old-b", name="new-b", **SIZE)
            fleet.wait(lambda: "Compute agent old-b (node old-b, fake driver) starting with" in
                       fleet.log("new-b"), 60, "the upgraded agent to start")
            second = burst(fleet, 4, per_request=1)
            fleet.wait_states(second, ("ACTIVE", "ERROR"), timeout=60)
            delete(fleet, first[4:])
            fleet.wait_states(first[4:], ("DELETED",), timeout=60)

            # Every agent upgraded: the scheduler restarted without the cap says why it terminates.
            assert fleet.stop("old-a") == 0
            fleet.start_agent("old-a", name="new-a", **SIZE)
            assert fleet.stop("sched") == 0
            start_scheduler(fleet, "sched-uncapped")
            fleet.wait_hosts_up(["old-a", "old-b"])
            delete(fleet, second)
            fleet.wait_states(second, ("DELETED",), timeout=60)
            letters = wire.dead_letters(fleet, 10)
            capped_log = fleet.log("sched")
            logged = {}
            for process in ("old-a", "old-b", "new-a", "new-b"):
                logged.update(terminated(fleet, process))
        finally:
            fleet.close()
    states = {i["state"] for i in placed.values()}
    print(f"\nrolling upgrade capped at compute 1.0: {len(first)} booted ({', '.join(states)}) on two agents "
          f"of release 1.0 and deleted, one agent upgraded in between; {len(second)} more booted, "
          f"deleted once both were upgraded and the cap removed; {len(letters)} dead letters")
    assert states == {"ACTIVE"}
    assert "[upgrade_levels] compute = 1.0: this service sends the compute API at version 1.0" in capped_log
    assert letters == []
    assert {u: logged.get(u) for u in first} == dict.fromkeys(first, "")  # 1.0: no reason given
    assert {u: logged.get(u) for u in second} == dict.fromkeys(second, DELETED_BY_CLIENT)


def test_capped_too_high_the_old_agent_refuses_the_newer_terminates_until_the_schedulers_are_capped(
        tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__service_down_time=5)
        try:
            start_scheduler(fleet, "sched", compute="1.1")
            fleet.start_agent("old", **RELEASE_1_0, **SIZE)
            fleet.wait_hosts_up(["old"])
            uuids = burst(fleet, 3, per_request=1)
            fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            delete(fleet, uuids)
            fleet.wait(lambda: wire.dead_letter_count(fleet) >= 3, 30, "the refused terminates")
            time.sleep(2)
            while_uncapped = {i["state"] for i in fleet.instances(uuids).values()}
            letters = wire.dead_letters(fleet, 10)
            agent_log = fleet.log("old")

            # What the operator does: cap the schedulers at the agents' version, restart them.
            assert fleet.stop("sched") == 0
            restarted = time.monotonic()
            start_scheduler(fleet, "sched-capped", compute="1.0")
            fleet.wait_states(uuids, ("DELETED",), timeout=90)
            recovered_s = time.monotonic() - restarted
            held = fleet.log("sched-capped").count("DELETING since")
        finally:
            fleet.close()
    reasons = {m.headers[deadletter.REASON] for m in letters}
    print(f"\ncapped at 1.1: {len(letters)} terminates dead-lettered by the agent of release 1.0, the "
          f"instances {', '.join(while_uncapped)}; capped and restarted: all DELETED {recovered_s:.1f} s "
          f"after the restart ({held} terminates sent again)\n  {', '.join(reasons)}")
    assert while_uncapped == {"DELETING"}
    assert len(letters) >= 3  # and again, should the reconciler have sent them again meanwhile
    assert {m.headers[deadletter.METHOD] for m in letters} == {"terminate_instance"}
    assert reasons == {
        "UnsupportedVersion: Endpoint does not support RPC version 1.1. Attempted method: "
        "terminate_instance; it serves the compute API up to 1.0: set [upgrade_levels] compute = 1.0 where "
        "it is sent from, until this is upgraded"}
    assert "Dead-lettered a cast of terminate_instance on compute.old" in agent_log
    assert held >= 3


def test_capped_at_1_2_agents_of_the_previous_release_and_this_one_move_instances_between_them(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            start_scheduler(fleet, "sched", compute="1.2")
            fleet.start_agent("old", **PREVIOUS, **SIZE, fake_migration_time_per_gb=0.5)
            fleet.start_agent("new", **SIZE, fake_migration_time_per_gb=0.5)
            fleet.wait_hosts_up(["old", "new"])
            on_old = moved_from(fleet, "old", "new")
            on_new = moved_from(fleet, "new", "old")
            capped = fleet.client.list_migrations({})

            # The old agent upgraded, the scheduler restarted without the cap: moves go by steps.
            assert fleet.stop("old") == 0
            fleet.start_agent("old", name="old-upgraded", **SIZE, fake_migration_time_per_gb=0.5)
            assert fleet.stop("sched") == 0
            start_scheduler(fleet, "sched-uncapped")
            fleet.wait_hosts_up(["old", "new"])
            again = moved_from(fleet, "new", "old")
            uncapped = [m for m in fleet.client.list_migrations({}) if m["instance_uuid"] in again]
            letters = wire.dead_letters(fleet, 10)
        finally:
            fleet.close()
    print(f"\ncapped at compute 1.2: {len(on_old)} instance(s) moved from an agent of the previous release "
          f"to one of this release and {len(on_new)} back (migrate and live-migrate), each taken in by its "
          f"destination alone; uncapped after the upgrade, {len(again)} moved by steps")
    assert {(m["status"], m["step"]) for m in capped} == {("completed", None)} and len(capped) == 4
    assert {(m["status"], m["step"]) for m in uncapped} == {("completed", "finish")} and len(uncapped) == 2
    assert letters == []


def moved_from(fleet, source, dest):
    """Boot two instances on ``source``, migrate one and live-migrate the other to ``dest``; wait for
    both to be ACTIVE there and ``source`` to hold neither; their uuids."""
    request_spec, filter_properties = build_request({"memory_mb": 1024, "root_gb": 1, "vcpus": 1}, 2)
    filter_properties["force_hosts"] = [source]
    held = fleet.hosts()[source]["running_vms"] + 2
    fleet.client.run_instance({}, request_spec, filter_properties)
    uuids = request_spec["instance_uuids"]
    fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
    fleet.wait(lambda: fleet.hosts()[source]["running_vms"] == held, 30, f"{source} to report them")
    for uuid, live in zip(uuids, (False, True), strict=True):
        fleet.client.migrate_instance({}, uuid, host=dest, live=live)
    ended = fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
    assert {ended[u]["host"] for u in uuids} == {dest}
    fleet.wait(lambda: fleet.hosts()[source]["running_vms"] == held - 2, 30, f"{source} to let them go")
    return uuids


def test_an_oslo_messaging_client_of_a_newer_api_gets_unsupported_version_from_the_scheduler(tmp_path):
    """A newer client against an older scheduler API: oslo.messaging's own client asks for the
    scheduler API's next minor version, which this scheduler does not serve."""
    served = api_versions.SCHEDULER.version
    newer = f"{served.split('.')[0]}.{int(served.split('.')[1]) + 1}"
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        oconf = cfg.ConfigOpts()
        oconf([])
        for module, attr, group in OSLO_OPTS:
            oconf.register_opts(getattr(importlib.import_module(module), attr), group=group)
        oconf.set_override("control_exchange", fleet.exchange)
        oconf.set_override("amqp_durable_queues", True, group="oslo_messaging_rabbit")
        transport = oslo_messaging.get_rpc_transport(oconf, url=transport_url)
        try:
            start_scheduler(fleet, "sched")
            client = oslo_messaging.get_rpc_client(
                transport, oslo_messaging.Target(topic="scheduler", version="1.0"), timeout=30)
            assert client.call({}, "list_hosts") == []
            with pytest.raises(oslo_messaging.RemoteError) as info:
                client.prepare(version=newer).call({}, "list_hosts")
        finally:
            transport.cleanup()
            fleet.close()
    print(f"\noslo.messaging client asking scheduler API {newer}: {info.value.exc_type}: {info.value.value}")
    assert info.value.exc_type == "UnsupportedVersion"
    assert info.value.value.startswith(
        f"Endpoint does not support RPC version {newer}. Attempted method: list_hosts; it serves the "
        f"scheduler API up to {served}")
