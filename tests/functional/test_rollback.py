"""A step that rolls back gives back at once what it consumed in memory.

Two requests whose rows the database refuses (a fault injected in the
scheduler: see faulty_scheduler) each take half of the only host before their
step rolls back. The 24 small requests that follow fit only if that room came
back: they all end ACTIVE, and the two are dead-lettered.
"""

import pathlib

from scheduler.cmd.instance_commands import build_request
from tests.functional import wire
from tests.functional.faulty_scheduler import POISON
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost


def test_two_rolled_back_requests_leave_the_fleet_its_room(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      filter_scheduler__ram_allocation_ratio=1.0, compute_agent__reserved_host_memory_mb=0)
        try:
            root = str(pathlib.Path(__file__).resolve().parents[2])  # where "tests" is importable from
            fleet.start_schedulers(["sched"], module="tests.functional.faulty_scheduler",
                                   env={"PYTHONPATH": root})
            fleet.start_agent("only", fake_memory_mb=8192, fake_local_gb=1000, fake_vcpus=64)
            fleet.wait_hosts_up(["only"])
            for _ in range(2):
                spec, props = build_request({"memory_mb": 4096, "root_gb": 1, "vcpus": 1}, 1)
                spec["instance_properties"] = {"project_id": POISON}
                fleet.client.run_instance({}, spec, props)
            fleet.wait(lambda: wire.dead_letter_count(fleet) == 2, 30, "the two to be dead-lettered")
            uuids = fleet.boot({"memory_mb": 256, "root_gb": 1, "vcpus": 1}, requests=24)
            instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=60)
        finally:
            fleet.close()
        states = sorted({i["state"] for i in instances.values()})
        print(f"\n2 requests rolled back after taking the host's 8192 MB; then 24 of 256 MB: {states}")
        assert states == ["ACTIVE"]
