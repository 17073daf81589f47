"""A host that stops, cleanly or for good, with real processes on RabbitMQ and PostgreSQL.

- An agent stopped cleanly (SIGTERM) says so in a last report: its host is down at once on
  every scheduler, takes no placement, and can be evacuated; when the agent starts again it
  lets go of what was evacuated.
- A build cast to a host whose agent never comes back is placed again within
  service_down_time, not build_timeout; an agent of that name that starts later finds the
  casts in its queue and builds none of them (it asks the scheduler first: start_build).
- An instance deleted while its host is down is DELETED at once (Nova's local delete), the
  host can then be deleted; an agent that comes back terminates what it still holds of it.

service_down_time is long in these tests (600 s, unless said): a host down within the tests'
waits is down by what the agents and the schedulers did, not by the clock.
"""

import json
import signal
import time

from compute_agent.instance_store import InstanceStore
from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

SIZE = {"fake_memory_mb": 65536, "fake_local_gb": 4000, "fake_vcpus": 64}
LONG = {"scheduler__service_down_time": 600, "scheduler__build_timeout": 1200, "DEFAULT__debug": "false"}


def boot(fleet, count, force=None):
    request_spec, filter_properties = build_request({"memory_mb": 512, "root_gb": 1, "vcpus": 1}, count)
    if force:
        filter_properties["force_hosts"] = [force]
    fleet.client.run_instance({}, request_spec, filter_properties)
    return request_spec["instance_uuids"]


def held(fleet, host):
    return set(InstanceStore(str(fleet.tmp / "state"), host).load())


def cli_hosts(fleet):
    done = fleet.cli("hosts", "-f", "json")
    assert done.returncode == 0, done.stderr
    return {h["HOST"]: h["STATE"] for h in json.loads(done.stdout)}


def states_on(fleet, scheduler):
    """{host: state} as one scheduler process lists them."""
    return {h["host"]: h["state"] for h in fleet.scheduler_client(scheduler).call({}, "list_hosts")}


def test_an_agent_stopped_cleanly_is_down_at_once_takes_nothing_and_is_evacuated(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, **LONG)
        try:
            fleet.start_schedulers(["sched-1", "sched-2"])
            for host in ("stays", "leaves"):
                fleet.start_agent(host, **SIZE)
            fleet.wait_hosts_up(["stays", "leaves"])
            on_leaves = boot(fleet, 3, force="leaves")
            fleet.wait_states(on_leaves, ("ACTIVE",), timeout=60)

            stopped_at = time.monotonic()
            assert fleet.stop("leaves") == 0  # SIGTERM: a clean stop
            for name in ("sched-1", "sched-2"):
                fleet.wait(lambda n=name: states_on(fleet, n)["leaves"] == "down", 30,
                           f"{name} to say leaves is down")
            down_after = time.monotonic() - stopped_at
            assert cli_hosts(fleet) == {"stays": "up", "leaves": "down"}
            assert "Told the schedulers that leaves stops" in fleet.log("leaves")

            # Nothing is placed there, by either scheduler (the queue spreads the requests).
            later = [u for _ in range(6) for u in boot(fleet, 1)]
            placed = fleet.wait_states(later, ("ACTIVE",), timeout=60)
            assert {i["host"] for i in placed.values()} == {"stays"}

            evacuated = fleet.cli("host", "evacuate", "leaves")
            assert evacuated.returncode == 0, evacuated.stdout + evacuated.stderr
            moved = fleet.wait_states(on_leaves, ("ACTIVE",), timeout=60)
            assert {(i["host"], i["move_host"]) for i in moved.values()} == {("stays", None)}

            # Its agent starts again: the host is up, and lets go of what was evacuated.
            fleet.start_agent("leaves", **SIZE)
            fleet.wait_hosts_up(["leaves"])
            fleet.wait(lambda: not held(fleet, "leaves"), 60, "leaves to let the evacuated instances go")
            assert "Host leaves is down: its agent stopped" in fleet.log("sched-1")
        finally:
            fleet.close()
    print(f"\nclean stop: leaves down on both schedulers {down_after:.1f} s after SIGTERM "
          f"(service_down_time 600 s); 6 later boots all on stays; 3 evacuated to stays")


def test_a_delete_on_a_down_host_is_done_at_once_and_the_agent_terminates_it_when_it_returns(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        # The host goes away killed (no last report): down by service_down_time, short here.
        fleet = Fleet(tmp_path, url, transport_url, scheduler__service_down_time=6, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["sched-1"])
            for host in ("gone", "other"):
                fleet.start_agent(host, **SIZE)
            fleet.wait_hosts_up(["gone", "other"])
            uuids = boot(fleet, 3, force="gone")
            fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            assert fleet.stop("gone", signal.SIGKILL) == -signal.SIGKILL
            fleet.wait(lambda: cli_hosts(fleet)["gone"] == "down", 30, "gone to be down")

            for uuid in uuids:
                done = fleet.cli("delete", uuid)
                assert done.returncode == 0, done.stderr
            asked = time.monotonic()
            deleted = fleet.wait_states(uuids, ("DELETED",), timeout=20)
            took = time.monotonic() - asked
            assert all(i["deleted_at"] for i in deleted.values())
            assert held(fleet, "gone") == set(uuids)  # nothing reached the agent: it is not there
            assert "deleted while its host gone is down" in fleet.log("sched-1")

            # Nothing holds the host now: it can be deleted.
            done = fleet.cli("host", "delete", "gone")
            assert (done.returncode, done.stdout) == (0, "host gone deleted\n"), done.stderr

            # Its agent comes back after all: the scheduler tells it to terminate what was deleted.
            fleet.start_agent("gone", **SIZE)
            fleet.wait_hosts_up(["gone"])
            fleet.wait(lambda: not held(fleet, "gone"), 60, "gone to terminate the deleted instances")
            log = fleet.log("gone")
            assert all(f"Terminated {u} (gone holds {u}, which was deleted)" in log for u in uuids)
        finally:
            fleet.close()
    print(f"\nlocal delete: 3 instances of a killed, down host DELETED {took:.1f} s after the last "
          "delete was asked; the host deleted; its agent, back, terminated all 3")


def test_builds_cast_to_a_killed_host_are_placed_again_within_service_down_time_and_built_once(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, scheduler__service_down_time=8,
                      scheduler__build_timeout=600, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["sched-1"])
            # victim has the most free RAM: every boot goes there while it is up.
            fleet.start_agent("victim", fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256)
            fleet.start_agent("spare", **SIZE)
            fleet.wait_hosts_up(["victim", "spare"])
            assert fleet.stop("victim", signal.SIGKILL) == -signal.SIGKILL  # right after it reported
            killed_at = time.monotonic()
            uuids = [u for _ in range(9) for u in boot(fleet, 1)]
            first = fleet.wait(lambda: (found := fleet.instances(uuids)) and len(found) == 9 and found, 30,
                               "the 9 to be placed")
            assert {i["host"] for i in first.values()} == {"victim"}  # up still, for service_down_time

            # Placed again (not after build_timeout, 600 s): once each, on the host that is up.
            placed = fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            moved_after = time.monotonic() - killed_at
            assert {(i["host"], i["attempts"]) for i in placed.values()} == {("spare", 2)}
            assert held(fleet, "spare") >= set(uuids)

            # An agent named victim starts again: the 9 build casts waited in its queue. It asks
            # before building each, and builds none. A claim it reports while it asks may be found
            # by the scheduler's reconciler first (held on victim, ACTIVE on spare): then victim is
            # told to terminate it, and drops it so.
            fleet.start_agent("victim", fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256)
            fleet.wait_hosts_up(["victim"])

            def dropped():
                log = fleet.log("victim")
                return [u for u in uuids if f"Not building {u}" in log or f"Terminated {u}" in log]

            fleet.wait(lambda: len(dropped()) == 9, 30, "victim to drop the 9 casts that waited for it",
                       last_seen=lambda: f"{len(dropped())} dropped")
            log = fleet.log("victim")
            assert not any(f"Instance {u} is ACTIVE on victim" in log for u in uuids)
            assert held(fleet, "victim") == set()
            after = fleet.instances(uuids)
            assert {(i["state"], i["host"]) for i in after.values()} == {("ACTIVE", "spare")}
            assert "its host is down (no report for more than service_down_time, 8 s)" in fleet.log("sched-1")
        finally:
            fleet.close()
    print(f"\nkilled host: 9 builds cast to victim after its agent was SIGKILLed all ACTIVE on spare "
          f"{moved_after:.1f} s after the kill (service_down_time 8 s, build_timeout 600 s); the agent "
          "started again dropped all 9 queued casts unbuilt")
