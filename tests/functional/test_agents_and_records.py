"""What an agent holds, and what the database records, agree.

- A second agent for a host that has one does not start: on another machine
  RabbitMQ refuses it the host's queue (it is consumed exclusively), on the
  same one the agent's lock on its records says which process has them.
- An agent that cannot remove an instance's record does not report it
  DELETED: the instance stays DELETING, held, and is terminated for good once
  the records can be written again.
- An agent that holds an instance the database deleted is told to let it go.
"""

import os
import pathlib
import signal
import time

from compute_agent.instance_store import InstanceStore
from scheduler.db.api import Database
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_faults import burst

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # where "tests" is importable from
SIZE = {"fake_memory_mb": 65536, "fake_local_gb": 4000, "fake_vcpus": 64}


def boot(fleet, count):
    return burst(fleet, count, per_request=1)


def held(fleet, host):
    return set(InstanceStore(str(fleet.tmp / "state"), host).load())


def test_a_second_agent_for_a_host_does_not_start_and_the_first_keeps_every_instance(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["sched"])
            fleet.start_agent("twin", **SIZE)
            fleet.wait_hosts_up(["twin"])
            elsewhere = fleet.start_agent("twin", name="twin-elsewhere",
                                          default={"state_path": tmp_path / "other-machine"}, **SIZE)
            here = fleet.start_agent("twin", name="twin-here", **SIZE)
            assert elsewhere.wait(30) != 0 and here.wait(30) != 0
            del fleet.processes["twin-elsewhere"], fleet.processes["twin-here"]
            uuids = boot(fleet, 20)
            fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            for uuid in uuids:
                fleet.client.delete_instance({}, uuid)
            fleet.wait_states(uuids, ("DELETED",), timeout=60)
            left = held(fleet, "twin")
        finally:
            fleet.close()
        print(f"\ntwo more agents for host twin refused; 20 instances booted and deleted, {len(left)} left")
        refused = "another agent serves host twin: compute.twin is consumed by another process"
        assert refused in fleet.log("twin-elsewhere")
        assert "host twin is served already by the agent with pid" in fleet.log("twin-here")
        assert left == set()


def test_a_delete_the_agent_cannot_record_stays_deleting_and_ends_once_it_can(tmp_path):
    flag = tmp_path / "read-only"
    env = {"PYTHONPATH": ROOT, "BERTH_TEST_READ_ONLY": str(flag)}
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__service_down_time=5)
        try:
            fleet.start_schedulers(["sched"])
            fleet.start_agent("ro", module="tests.functional.faulty_agent", env=env, **SIZE)
            fleet.wait_hosts_up(["ro"])
            uuids = boot(fleet, 6)
            fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            flag.touch()
            for uuid in uuids:
                fleet.client.delete_instance({}, uuid)
            fleet.wait(lambda: fleet.log("ro").count("Cannot remove") >= 6, 30, "the six failed removals")
            time.sleep(3)
            while_read_only = {i["state"] for i in fleet.instances(uuids).values()}
            still_held = held(fleet, "ro")
            assert fleet.stop("ro") == 0
            os.unlink(flag)
            fleet.start_agent("ro", module="tests.functional.faulty_agent", env=env, **SIZE)
            fleet.wait_states(uuids, ("DELETED",), timeout=60)
            fleet.wait(lambda: not held(fleet, "ro"), 30, "the agent to let them go")
            log = fleet.log("sched")
        finally:
            fleet.close()
        print(f"\n6 deletes on read-only records: {while_read_only}, {len(still_held)} still held; "
              "after a restart with writable records: all DELETED, none held")
        assert while_read_only == {"DELETING"}
        assert still_held == set(uuids)
        assert log.count("DELETING since") >= 6


def test_an_agent_holding_an_instance_the_database_deleted_is_told_to_let_it_go(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__service_down_time=5)
        database = Database(url)
        try:
            fleet.start_schedulers(["sched"])
            fleet.start_agent("keeper", **SIZE)
            fleet.wait_hosts_up(["keeper"])
            uuids = boot(fleet, 3)
            fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            fleet.stop("keeper", signal.SIGKILL)
            database.update_instance(uuids[0], {"state": "DELETED"})  # as if its terminate was lost
            fleet.start_agent("keeper", **SIZE)
            fleet.wait(lambda: held(fleet, "keeper") == set(uuids[1:]), 60, "the deleted one to go")
            log = fleet.log("sched")
        finally:
            database.dispose()
            fleet.close()
        assert f"keeper holds {uuids[0]}, which was deleted: telling keeper to terminate it" in log
