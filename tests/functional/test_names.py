"""Instance names end to end: a scheduler and an agent as real processes, on the real
RabbitMQ and PostgreSQL, driven by the ``berth`` command."""

import json

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost


def test_named_instances_boot_list_and_delete_by_name(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      compute_agent__fake_build_time=0.05)
        try:
            fleet.start_schedulers(["names-sched"])
            fleet.start_agent("names-agent")
            fleet.wait_hosts_up(["names-agent"])

            booted = fleet.cli("boot", "--flavor", "m1.tiny", "--name", "web-%d", "--count", "2", "--wait",
                               "--timeout", "60")
            assert booted.returncode == 0, booted.stderr + booted.stdout
            listed = fleet.cli("instances", "-f", "json")
            assert listed.returncode == 0, listed.stderr
            rows = {row["NAME"]: row for row in json.loads(listed.stdout)}
            assert sorted(rows) == ["web-1", "web-2"]
            assert {(row["STATE"], row["HOST"], row["FLAVOR"]) for row in rows.values()} == {
                ("ACTIVE", "names-agent", "m1.tiny")}

            deleted = fleet.cli("delete", "web-1", "--wait", "--timeout", "60")
            assert deleted.returncode == 0, deleted.stderr
            [line] = deleted.stdout.splitlines()[1:]
            assert line.split()[:2] == [rows["web-1"]["UUID"], "DELETED"]
            assert fleet.instances([rows["web-2"]["UUID"]])[rows["web-2"]["UUID"]]["state"] == "ACTIVE"

            gone = fleet.cli("show", "web-1")
            assert (gone.returncode, gone.stdout, gone.stderr) == (1, "", "berth: No instance named web-1\n")
        finally:
            fleet.close()
