"""A claim refused by an agent is rescheduled to another host, up to max_attempts.

The agent's claim is the authority. Schedulers claim hosts among themselves in
the database, but what an agent holds they learn from its reports and from the
instances they placed: an instance built on a host behind the scheduler's back
(cast straight to its agent) after the host's last report is known to neither,
so the scheduler sees room that is not there, and the agent refuses; the
request goes back to be rescheduled.
"""

import uuid as uuidlib

from compute_agent.client import ComputeClient
from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

FLAVOR = {"memory_mb": 6000, "root_gb": 10, "vcpus": 1}


def boot_through_a_scheduler_with_a_stale_view(tmp_path, url, transport_url, **overrides):
    fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                  compute_agent__reserved_host_memory_mb=0, **overrides)
    fleet.start_schedulers(["sched-1"])
    # Room for one such instance on "big", and no report after its first one.
    fleet.start_agent("big", fake_memory_mb=8192, report_interval=3600, report_on_change=False)
    fleet.start_agent("small", fake_memory_mb=6144)
    fleet.wait_hosts_up(["big", "small"])
    hidden = str(uuidlib.uuid4())
    ComputeClient(fleet.transport).run_instance({}, "big", {"uuid": hidden, "flavor": FLAVOR}, {}, {})
    fleet.wait(lambda: f"Claimed {hidden} on big" in fleet.log("big"), 30, "big to build it")
    [second] = fleet.boot(FLAVOR)
    return fleet, fleet.wait_states([second], ("ACTIVE", "ERROR"))[second]


def test_the_refused_instance_is_built_on_another_host(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet, instance = boot_through_a_scheduler_with_a_stale_view(tmp_path, url, transport_url)
        try:
            assert (instance["state"], instance["host"], instance["attempts"]) == ("ACTIVE", "small", 2)
            assert "Insufficient memory" in fleet.log("big")
        finally:
            fleet.close()


def test_past_max_attempts_the_instance_is_error_with_the_reason(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet, instance = boot_through_a_scheduler_with_a_stale_view(
            tmp_path, url, transport_url, scheduler__max_attempts=1)
        try:
            assert instance["state"] == "ERROR" and instance["host"] is None
            reason = instance["fault_reason"]
            assert "Exceeded maximum number of attempts (1)" in reason
            assert "big: Insufficient memory" in reason
        finally:
            fleet.close()


def test_a_send_back_delivered_twice_or_from_a_host_the_instance_left_changes_nothing(tmp_path):
    """Redelivery is the crash model: a send-back may come twice, or late from a
    host that no longer holds the instance. Neither may build it a second time."""
    from berth_contract import flavors
    from tests.functional import wire
    from tests.functional.test_faults import outcome

    agents = ("twice-a", "twice-b", "twice-c")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        publisher = None
        try:
            fleet.start_schedulers(["sched-1", "sched-2"])
            for host in agents:
                fleet.start_agent(host, fake_memory_mb=65536, fake_build_time=4)
            fleet.wait_hosts_up(agents)
            uuids = fleet.boot(requests=6)
            building = fleet.wait_states(uuids, ("BUILDING",), timeout=60)
            publisher = wire.RawPublisher(fleet)
            for uuid, instance in building.items():
                elsewhere = next(h for h in agents if h != instance["host"])
                request_spec, filter_properties = build_request(flavors.get("m1.tiny"), 1)
                request_spec["instance_uuids"] = [uuid]
                filter_properties["retry"] = {"num_attempts": 1, "hosts": [[elsewhere, elsewhere]],
                                              "exc_reason": f"{elsewhere}: refused"}
                body = wire.cast_body("run_instance", request_spec=request_spec,
                                      filter_properties=filter_properties)
                publisher.publish(body, "scheduler")
                publisher.publish(body, "scheduler")  # and once more, as a redelivery would
            instances, errors = outcome(fleet, uuids, agents)
            logs = fleet.log("sched-1") + fleet.log("sched-2")
        finally:
            if publisher is not None:
                publisher.close()
            fleet.close()
        assert errors == {}
        assert {u: (i["host"], i["attempts"]) for u, i in instances.items()} == {
            u: (i["host"], 1) for u, i in building.items()}
        assert logs.count("reschedule sent back by") == 12
