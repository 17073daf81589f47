"""Drains and rebalance plans as jobs of the schedulers, on real processes: RabbitMQ, PostgreSQL,
schedulers and agents whose fake driver takes a second or more per move.

A drain of 20 instances goes on after its ``berth host drain`` is SIGKILLed five moves in, and
ends with the host empty; a drain goes on through a RabbitMQ stopped for 10 s (a node of the
test's own) with moves under way; a rebalance plan goes on after the scheduler carrying it is
SIGKILLed with a step under way, and the other scheduler finishes it.
"""

import collections
import json
import signal
import subprocess
import sys
import time

import pytest

from tests.functional.fleet import Fleet, child_env, temporary_database, temporary_vhost
from tests.functional.test_moves import boot
from tests.functional_cluster.rabbit_cluster import private_node

pytestmark = pytest.mark.functional

ONE_GB = {"memory_mb": 1024, "root_gb": 1, "vcpus": 1}
TWO_GB = {"memory_mb": 2048, "root_gb": 1, "vcpus": 1}


def start_cli(fleet, *args):
    """``berth ARGS`` as its own process, its output in a file: (the process, the file's path)."""
    path = fleet.tmp / f"berth-{'-'.join(args[:2])}.out"
    out = open(path, "w")  # noqa: SIM115 (lives as long as the process)
    command = [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(fleet.conf_file), *args]
    proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=fleet.tmp, env=child_env())
    return proc, path


def statuses(fleet, host):
    return collections.Counter(m["status"] for m in fleet.client.list_migrations({}, host=host))


def test_a_drain_goes_on_when_its_command_is_killed_and_empties_the_host(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0, jobs__interval="0.5")
        try:
            fleet.start_schedulers(["sched-1"])
            hosts = ["src", "a", "b"]
            for host in hosts:
                fleet.start_agent(host, fake_memory_mb=32768, fake_migration_time_per_gb=1.0)
            fleet.wait_hosts_up(hosts)
            uuids = boot(fleet, 20, flavor=ONE_GB, force="src")
            fleet.wait_states(uuids, ("ACTIVE",))

            drain, output = start_cli(fleet, "host", "drain", "src", "--max-parallel", "2")
            fleet.wait(lambda: statuses(fleet, "src")["completed"] >= 5, 120, "5 moves to complete",
                       last_seen=lambda: dict(statuses(fleet, "src")))
            drain.send_signal(signal.SIGKILL)
            drain.wait(10)
            killed_at = statuses(fleet, "src")["completed"]
            told = output.read_text()
            assert "host src disabled: draining" in told, told
            assert killed_at < 20, "the drain ended before its command was killed: nothing was shown"

            final = fleet.wait(lambda: (found := fleet.instances(uuids)) and all(
                i["state"] == "ACTIVE" and i["host"] != "src" for i in found.values()) and found, 180,
                "the 20 instances to be ACTIVE elsewhere",
                last_seen=lambda: dict(collections.Counter((i["state"], i["host"])
                                                           for i in fleet.instances(uuids).values())))
            assert {i["host"] for i in final.values()} <= {"a", "b"}
            assert not [i for i in fleet.instances(include_deleted=False).values() if i["host"] == "src"]
            assert statuses(fleet, "src") == {"completed": 20}  # each moved once
            fleet.wait(lambda: fleet.hosts()["src"]["running_vms"] == 0, 30, "src's agent to hold nothing")
            def ended():
                [job] = fleet.client.admin_call({}, "list_jobs", kind="drain", host="src")
                return job["state"] in ("done", "stopped") and job

            job = fleet.wait(ended, 30, "the drain job to record the last moves")
            assert (job["state"], job["reason"]) == ("done", None)
            shown = fleet.client.admin_call({}, "show_job", job_id=job["id"])
            assert [s["status"] for s in shown["steps"]] == ["done"] * 20
            assert {s["migration_id"] for s in shown["steps"]} == {
                m["id"] for m in fleet.client.list_migrations({}, host="src")}
            again = fleet.cli("host", "drain", "src")  # the host stays disabled, and is empty
            assert (again.returncode, again.stdout) == (
                0, "host src disabled: draining\nhost src is empty\n"), again.stdout + again.stderr
            print(f"\njobs: drain command SIGKILLed after {killed_at} of 20 moves; the scheduler moved "
                  "the rest")
        finally:
            fleet.close()


@pytest.fixture
def private_rabbitmq(tmp_path_factory):
    """A RabbitMQ node of this test's own (port 5741, node berth-jobs1@localhost): stopping it
    disturbs no other test, nor test_committed_moves' node."""
    with private_node(tmp_path_factory.mktemp("rabbit-node"), 5741, "berth-jobs") as node:
        yield node


def moves_of(fleet, uuids):
    """{instance: the statuses of its migrations}."""
    found = collections.defaultdict(list)
    for migration in fleet.client.list_migrations({}, host="src"):
        found[migration["instance_uuid"]].append(migration["status"])
    return {u: found.get(u, []) for u in uuids}


def test_a_drain_goes_on_through_a_broker_stopped_with_moves_under_way(tmp_path, private_rabbitmq):
    """10 instances of 1 GB leave src two at a time, each move taking 3 s; RabbitMQ stops for 10 s
    between a move's end and the job's next look, and comes back: the drain ends done, each
    instance moved once, what the scheduler counts on each host what runs there."""
    [node] = private_rabbitmq.nodes
    with temporary_database() as url, private_rabbitmq.temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0, jobs__interval="2",
                      oslo_messaging_rabbit__rabbit_retry_interval=0.5,
                      oslo_messaging_rabbit__rabbit_retry_backoff=1.0,
                      oslo_messaging_rabbit__rabbit_interval_max=2)
        try:
            schedulers, hosts = ["sched-1", "sched-2"], ["src", "a", "b"]
            fleet.start_schedulers(schedulers)
            for host in hosts:
                fleet.start_agent(host, fake_memory_mb=32768, fake_migration_time_per_gb=3.0)
            fleet.wait_hosts_up(hosts)
            uuids = boot(fleet, 10, flavor=ONE_GB, force="src")
            fleet.wait_states(uuids, ("ACTIVE",))

            job = fleet.client.admin_call({}, "start_drain", host="src", max_parallel=2)
            assert job["started"], job

            def between_moves():
                """A move completed that the job has not recorded yet: its next start comes while
                RabbitMQ is away (the job looks every 2 s). Failing that, from the sixth move on,
                whenever."""
                completed = statuses(fleet, "src")["completed"]
                shown = fleet.client.admin_call({}, "show_job", job_id=job["id"])
                counts = collections.Counter(s["status"] for s in shown["steps"])
                return (completed >= 2 and completed > counts["done"] or completed >= 6) and counts

            at_stop = fleet.wait(between_moves, 120, "a move to complete", interval=0.05)
            private_rabbitmq.stop_app(node)
            stopped = time.monotonic()
            try:
                time.sleep(10)
            finally:
                private_rabbitmq.start_app(node)
            back = time.monotonic()
            outage = back - stopped

            def ended():
                shown = fleet.client.admin_call({}, "show_job", job_id=job["id"])
                return shown["state"] in ("done", "stopped") and shown

            shown = fleet.wait(ended, 240, "the drain job to end", last_seen=lambda: dict(collections.Counter(
                s["status"] for s in fleet.client.admin_call({}, "show_job", job_id=job["id"])["steps"])))
            took = time.monotonic() - back
            assert (shown["state"], shown["reason"]) == ("done", None), shown
            assert [s["status"] for s in shown["steps"]] == ["done"] * 10, shown["steps"]
            assert moves_of(fleet, uuids) == {u: ["completed"] for u in uuids}  # each moved once
            final = fleet.wait_states(uuids, ("ACTIVE",), timeout=60)
            assert {i["host"] for i in final.values()} <= {"a", "b"}
            assert {u: i["host"] for u, i in final.items()} == {
                s["instance_uuid"]: s["dest_host"] for s in shown["steps"]}

            # what the scheduler counts on each host is what runs there: nothing claimed twice or left
            where = collections.Counter(i["host"] for i in final.values())
            wanted = {h: (where[h], where[h] * 1024, 0) for h in hosts}
            figures = fleet.wait(
                lambda: (found := {h: (v["running_vms"], v["memory_mb_used"], v["pending"])
                                   for h, v in fleet.hosts().items()}) == wanted and found,
                60, "the hosts' figures to count the instances where they are",
                last_seen=lambda: {h: (v["running_vms"], v["memory_mb_used"], v["pending"])
                                   for h, v in fleet.hosts().items()})
            reconnected = [n for n in (*schedulers, *hosts) if "reconnected to" in fleet.log(n)]
            assert sorted(reconnected) == sorted((*schedulers, *hosts))
            fleet.check_alive()
            print(f"\njobs: drain of 10 instances, RabbitMQ stopped {outage:.1f} s with {dict(at_stop)} "
                  f"steps; the job was done {took:.1f} s after the broker was back: {figures}")
        finally:
            fleet.close()


def test_a_plan_goes_on_on_the_other_scheduler_when_the_one_carrying_it_is_killed(tmp_path):
    """Three 8 GB hosts each hold three 2 GB instances: room for 6 GB takes two live migrations off
    one host, a step at a time, each taking 4 s."""
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0, jobs__interval="0.5", jobs__lease_time="4")
        try:
            fleet.start_schedulers(["sched-1", "sched-2"])
            hosts = ("a", "b", "c")
            for host in hosts:
                fleet.start_agent(host, fake_memory_mb=8192, fake_migration_time_per_gb=2.0)
            fleet.wait_hosts_up(hosts)
            residents = [u for host in hosts for u in boot(fleet, 3, flavor=TWO_GB, force=host)]
            fleet.wait_states(residents, ("ACTIVE",))
            fleet.wait(lambda: all(h["memory_mb_used"] == 6144 for h in fleet.hosts().values()), 30,
                       "the hosts to report their instances")
            created = fleet.cli("flavor", "create", "big", "--ram", "6144", "--disk", "1", "--vcpus", "1")
            assert created.returncode == 0, created.stderr
            planned = fleet.cli("rebalance", "plan", "--make-room", "big", "-f", "json")
            assert planned.returncode == 0, planned.stdout + planned.stderr
            plan = json.loads(planned.stdout)
            assert len(plan["steps"]) == 2, plan

            apply, output = start_cli(fleet, "rebalance", "apply", str(plan["id"]), "--max-parallel", "1")

            def carried():
                jobs = fleet.client.admin_call({}, "list_jobs", kind="rebalance", plan_id=plan["id"])
                shown = fleet.client.admin_call({}, "show_rebalance_plan", plan_id=plan["id"])
                running = [s for s in shown["steps"] if s["status"] == "running"]
                return jobs and jobs[0]["lease_owner"] and running and (jobs[0], running[0])

            job, running = fleet.wait(carried, 30, "a step of the plan under way")
            owner = job["lease_owner"].split(":")[0]
            other = ({"sched-1", "sched-2"} - {owner}).pop()
            fleet.stop(owner, sig=signal.SIGKILL)
            shown = fleet.client.admin_call({}, "show_rebalance_plan", plan_id=plan["id"])
            assert shown["state"] == "applying", shown  # killed with the plan unfinished

            apply.wait(60)
            told = output.read_text()
            assert apply.returncode == 0, told
            assert told.splitlines()[-1] == f"rebalance plan {plan['id']} done: 2 done", told
            shown = fleet.client.admin_call({}, "show_rebalance_plan", plan_id=plan["id"])
            assert (shown["state"], [s["status"] for s in shown["steps"]]) == ("done", ["done", "done"])
            final = fleet.instances([s["instance"] for s in plan["steps"]])
            planned = {s["instance"]: s["dest"] for s in plan["steps"]}
            assert {u: i["host"] for u, i in final.items()} == planned
            job = fleet.client.admin_call({}, "show_job", job_id=job["id"])
            assert job["state"] == "done"
            # each step moved once, the second started by the scheduler that took the job over
            moves = [m for uuid in planned for m in fleet.client.list_migrations({}, instance_uuid=uuid)]
            assert sorted(m["status"] for m in moves) == ["completed", "completed"]
            assert f"Rebalance job {job['id']} of plan {plan['id']}: step 2 moving" in fleet.log(other)
            print(f"\njobs: {owner} SIGKILLed with step {running['position']} of plan {plan['id']} under "
                  f"way; {other} finished it")
        finally:
            fleet.close()
