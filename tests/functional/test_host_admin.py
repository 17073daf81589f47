"""berth host disable|enable|delete and berth service list with real processes: two schedulers,
two agents, RabbitMQ and PostgreSQL. A change made through one scheduler holds on the other."""

import json

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost


def cli_json(fleet, *args):
    done = fleet.cli(*args, "-f", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_disable_enable_delete_and_the_service_list(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url)
        try:
            fleet.start_schedulers(["sched-1", "sched-2"])
            fleet.start_agent("a1")
            fleet.start_agent("a2")
            fleet.wait_hosts_up(["a1", "a2"])

            done = fleet.cli("host", "disable", "a1", "--reason", "firmware update")
            assert (done.returncode, done.stdout) == (0, "host a1 disabled: firmware update\n"), done.stderr
            hosts = {h["HOST"]: h for h in cli_json(fleet, "hosts")}
            assert (hosts["a1"]["STATE"], hosts["a1"]["DISABLED REASON"]) == ("disabled", "firmware update")

            # Six requests, spread over both schedulers by the queue: none lands on a1.
            booted = []
            for _ in range(6):
                done = fleet.cli("boot", "--flavor", "m1.tiny")
                assert done.returncode == 0, done.stderr
                booted.append(done.stdout.split()[0])
            placed = fleet.wait_states(booted, ("ACTIVE",))
            assert {i["host"] for i in placed.values()} == {"a2"}

            services = {(s["BINARY"], s["HOST"]): s for s in cli_json(fleet, "service", "list")}
            assert {("berth-scheduler", "sched-1"), ("berth-scheduler", "sched-2"),
                    ("berth-compute-agent", "a1"), ("berth-compute-agent", "a2")} <= set(services)
            assert services["berth-compute-agent", "a1"]["STATUS"] == "disabled"
            assert all(s["STATE"] == "up" for s in services.values())

            done = fleet.cli("host", "delete", "a2")
            assert done.returncode == 1 and "host a2 holds 6 instance(s) that are not DELETED" in done.stderr

            assert fleet.cli("host", "enable", "a1").returncode == 0
            done = fleet.cli("boot", "--flavor", "m1.tiny", "--wait")
            assert done.returncode == 0 and done.stdout.splitlines()[1].split()[2] == "a1", done.stdout

            # a1 goes away for good: its instance deleted, its agent stopped, the host deleted.
            fleet.cli("delete", "--wait", done.stdout.splitlines()[1].split()[0])
            fleet.stop("a1")
            done = fleet.cli("host", "delete", "a1")
            assert (done.returncode, done.stdout) == (0, "host a1 deleted\n"), done.stderr
            for scheduler in ("sched-1", "sched-2"):
                fleet.wait(lambda s=scheduler: "a1" not in {
                    h["host"] for h in fleet.scheduler_client(s).call({}, "list_hosts")},
                    30, f"{scheduler} to forget a1")

            # Its agent starts again: the host is back, and the log says so.
            fleet.start_agent("a1")
            fleet.wait_hosts_up(["a1"])
            fleet.wait(lambda: "Host a1 was deleted by an operator and reports again" in
                       fleet.log("sched-1") + fleet.log("sched-2"), 30, "a scheduler to say a1 is back")
        finally:
            fleet.close()
