"""A rolling upgrade: schedulers of this release beside agents of the previous one.

The previous release's agents serve version 1.0 of the compute API; this release's
schedulers send 1.1 (a terminate says why). With ``[upgrade_levels] compute = 1.0`` on
the schedulers every boot and delete works while the agents are upgraded one by one;
without it, the old agents refuse the newer terminates (UnsupportedVersion, dead-lettered)
and the instances stay DELETING until the schedulers are capped and restarted.
"""

import importlib
import pathlib
import re
import time

import oslo_messaging
import pytest
from oslo_config import cfg

from scheduler.manager import DELETED_BY_CLIENT
from scheduler.rpc import deadletter
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost, write_conf
from tests.functional.test_faults import burst
from tests.functional.test_messaging_oslo import OSLO_OPTS

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # where "tests" is importable from
PREVIOUS = {"module": "tests.functional.previous_agent", "env": {"PYTHONPATH": ROOT}}
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
                fleet.start_agent(host, **PREVIOUS, **SIZE)
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
          f"of the previous release and deleted, one agent upgraded in between; {len(second)} more booted, "
          f"deleted once both were upgraded and the cap removed; {len(letters)} dead letters")
    assert states == {"ACTIVE"}
    assert "[upgrade_levels] compute = 1.0: this service sends the compute API at version 1.0" in capped_log
    assert letters == []
    assert {u: logged.get(u) for u in first} == dict.fromkeys(first, "")  # 1.0: no reason given
    assert {u: logged.get(u) for u in second} == dict.fromkeys(second, DELETED_BY_CLIENT)


def test_uncapped_the_old_agent_refuses_the_newer_terminates_until_the_schedulers_are_capped(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__service_down_time=5)
        try:
            start_scheduler(fleet, "sched")
            fleet.start_agent("old", **PREVIOUS, **SIZE)
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
    print(f"\nuncapped: {len(letters)} terminates dead-lettered by the agent of the previous release, the "
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


def test_an_oslo_messaging_client_of_a_newer_api_gets_unsupported_version_from_the_scheduler(tmp_path):
    """A newer client against an older scheduler API: oslo.messaging's own client asks for
    scheduler API 1.5, which this scheduler does not serve."""
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
                client.prepare(version="1.5").call({}, "list_hosts")
        finally:
            transport.cleanup()
            fleet.close()
    print(f"\noslo.messaging client asking scheduler API 1.5: {info.value.exc_type}: {info.value.value}")
    assert info.value.exc_type == "UnsupportedVersion"
    assert info.value.value.startswith(
        "Endpoint does not support RPC version 1.5. Attempted method: list_hosts; it serves the scheduler "
        "API up to 1.4")
