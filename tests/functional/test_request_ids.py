"""One ``berth server create``, one request id: in the log of the command line, of the scheduler and of
the agent, each a process of its own logging into ``[DEFAULT] log_dir``, with debug on."""

import re

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

REQUEST_ID = r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def test_one_boot_is_one_request_id_in_the_logs_of_the_three_processes(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__log_dir=logs)
        try:
            fleet.start_schedulers(["sched-1"])
            fleet.start_agent("agent-1")
            fleet.wait_hosts_up(["agent-1"])
            booted = fleet.cli("boot", "--flavor", "m1.tiny", "--wait")
            assert booted.returncode == 0, booted.stderr
            [header, row] = booted.stdout.splitlines()
            assert header.split()[:3] == ["UUID", "STATE", "HOST"]
            uuid, state, host = row.split()[:3]
            assert (state, host) == ("ACTIVE", "agent-1")
            # The command line's log went to its file: stderr has only the wait's progress (no terminal).
            assert booted.stderr == f"{uuid} ACTIVE on agent-1\n"

            cli_log = (logs / "berth.log").read_text()
            [request_id] = set(re.findall(rf"Booting {uuid} as request ({REQUEST_ID})", cli_log))
            for name, said in [("berth-scheduler", f"Placed instance {uuid} on host agent-1 (1 host "
                                                   "considered, 1 passed the filters)"),
                               ("berth-compute-agent", f"Instance {uuid} is ACTIVE on agent-1")]:
                about_it = [line for line in (logs / f"{name}.log").read_text().splitlines() if uuid in line]
                assert any(said in line for line in about_it), (name, about_it)
                assert all(re.findall(REQUEST_ID, line) == [request_id] for line in about_it), about_it
        finally:
            fleet.close()
