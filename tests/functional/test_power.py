"""An instance's life as an operator lives it, on real processes (a scheduler, a fake agent) on the
real RabbitMQ and PostgreSQL, driven by the ``berth`` command: boot, stop (SHUTOFF, its claim still
counted by ``berth host list``), the refusals, start, reboot (soft and hard), the console's lines, an
agent restart keeping it off, and a delete of a SHUTOFF instance."""

import json

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

HOST = "power-agent"


def row(done):
    """(UUID, STATE) of the one instance a ``--wait`` command printed."""
    [line] = done.stdout.splitlines()[1:]
    return tuple(line.split()[:2])


def test_stop_start_reboot_console_log_and_delete_of_a_stopped_instance(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      compute_agent__fake_build_time=0.05, fake__power_time=0.2)
        try:
            fleet.start_schedulers(["power-sched"])
            fleet.start_agent(HOST)
            fleet.wait_hosts_up([HOST])

            def cli(*args, rc=0):
                done = fleet.cli(*args)
                assert done.returncode == rc, done.stderr + done.stdout
                return done

            def host_view():
                [view] = [h for h in json.loads(cli("hosts", "-f", "json").stdout) if h["HOST"] == HOST]
                return view

            def next_report():
                """berth host list once the agent reported after now."""
                before = fleet.hosts()[HOST]["reported_at"]
                fleet.wait(lambda: fleet.hosts()[HOST]["reported_at"] != before, 30, "a new report")
                return host_view()

            uuid, state = row(cli("boot", "--flavor", "m1.small", "--name", "web", "--wait",
                                  "--timeout", "60"))
            assert state == "ACTIVE"
            running = next_report()
            assert running["INSTANCES"] == 1

            assert row(cli("stop", "web", "--wait", "--timeout", "60")) == (uuid, "SHUTOFF")
            stopped = next_report()  # the agent's word since it powered the instance off
            keys = ("RAM USED/TOTAL MB", "DISK USED/TOTAL GB", "VCPUS USED/TOTAL", "INSTANCES")
            assert [stopped[k] for k in keys] == [running[k] for k in keys]  # its claim still counted

            refused = cli("stop", "web", rc=1)
            assert refused.stderr == (f"berth: Instance {uuid} cannot be stopped: it is SHUTOFF (stopped "
                                      "already); only an ACTIVE instance can be\n")
            refused = cli("reboot", uuid, rc=1)
            assert refused.stderr.startswith(f"berth: Instance {uuid} cannot be rebooted: it is SHUTOFF")
            assert cli("start", "nosuch", rc=1).stderr == "berth: No instance named nosuch\n"

            assert row(cli("start", "web", "--wait", "--timeout", "60")) == (uuid, "ACTIVE")
            refused = cli("start", "web", rc=1)
            assert "it is ACTIVE (running already); only a SHUTOFF instance can be" in refused.stderr
            assert row(cli("reboot", "web", "--wait", "--timeout", "60")) == (uuid, "ACTIVE")
            assert row(cli("reboot", "--hard", "web", "--wait", "--timeout", "60")) == (uuid, "ACTIVE")

            said = [f"berth fake console: {uuid} {what}" for what in (
                "booted", "powered off", "powered on", "booted", "rebooted", "booted", "rebooted (hard)",
                "booted")]
            assert cli("console-log", "web").stdout.splitlines() == said
            assert cli("console-log", uuid, "--lines", "2").stdout.splitlines() == said[-2:]

            # Stopped, then its agent restarted: still SHUTOFF, still held, still off.
            cli("stop", "web", "--wait", "--timeout", "60")
            fleet.stop(HOST)
            fleet.start_agent(HOST)
            fleet.wait_hosts_up([HOST])
            after = next_report()
            assert [after[k] for k in keys] == [running[k] for k in keys]
            assert fleet.instances([uuid])[uuid]["state"] == "SHUTOFF"
            assert cli("console-log", "web", "--lines", "1").stdout == (
                f"berth fake console: {uuid} powered off\n")

            assert row(cli("delete", "web", "--wait", "--timeout", "60")) == (uuid, "DELETED")
            assert next_report()["INSTANCES"] == 0
            assert cli("console-log", uuid, rc=1).stderr == (
                f"berth: instance {uuid} is DELETED on no host: it has no console\n")
        finally:
            fleet.close()
