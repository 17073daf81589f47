"""A claim refused by an agent is rescheduled to another host, up to max_attempts.

Two schedulers that have not heard from each other both place an instance on
the one host with room for a single one: the agent's claim, which is the
authority, refuses the second, and the request goes back to be rescheduled.
"""

from scheduler.cmd.cli import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

FLAVOR = {"memory_mb": 6000, "root_gb": 10, "vcpus": 1}
SCHEDULERS = ("sched-1", "sched-2")


def race_two_schedulers(tmp_path, url, transport_url, **overrides):
    fleet = Fleet(
        tmp_path,
        url,
        transport_url,
        filter_scheduler__ram_allocation_ratio=1.0,
        compute_agent__reserved_host_memory_mb=0,
        **overrides,
    )
    for name in SCHEDULERS:
        fleet.start_scheduler(name)
    for name in SCHEDULERS:
        fleet.wait(
            lambda n=name: fleet.scheduler_client(n).call({}, "list_hosts") == [], 60, f"{name} to answer"
        )
    # Room for one such instance on "big", and no report after its first one.
    fleet.start_agent("big", fake_memory_mb=8192, report_interval=3600, report_on_change=False)
    fleet.start_agent("small", fake_memory_mb=6144)
    for name in SCHEDULERS:
        fleet.wait(
            lambda n=name: (
                {h["host"] for h in fleet.scheduler_client(n).call({}, "list_hosts")} == {"big", "small"}
            ),
            60,
            f"{name} to see both agents",
        )
    uuids = []
    for name in SCHEDULERS:
        request_spec, filter_properties = build_request(FLAVOR, 1)
        fleet.scheduler_client(name).cast(
            {}, "run_instance", request_spec=request_spec, filter_properties=filter_properties
        )
        uuids += request_spec["instance_uuids"]
    return fleet, fleet.wait_states(uuids, ("ACTIVE", "ERROR"))


def test_the_refused_instance_is_built_on_another_host(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet, instances = race_two_schedulers(tmp_path, url, transport_url)
        try:
            assert {i["state"] for i in instances.values()} == {"ACTIVE"}
            attempts = {i["host"]: i["attempts"] for i in instances.values()}
            assert attempts == {"big": 1, "small": 2}
            assert "Insufficient memory" in fleet.log("big")
        finally:
            fleet.close()


def test_past_max_attempts_the_instance_is_error_with_the_reason(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet, instances = race_two_schedulers(tmp_path, url, transport_url, scheduler__max_attempts=1)
        try:
            by_state = {i["state"]: i for i in instances.values()}
            assert set(by_state) == {"ACTIVE", "ERROR"}
            assert by_state["ACTIVE"]["host"] == "big"
            reason = by_state["ERROR"]["fault_reason"]
            assert "Exceeded maximum number of attempts (1)" in reason
            assert "big: Insufficient memory" in reason
        finally:
            fleet.close()
