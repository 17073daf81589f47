"""Three scheduler workers filling a fleet to 95% at once: no host is ever overfilled,
and their claims in the database leave the agents almost nothing to refuse."""

import collections

from compute_agent.instance_store import InstanceStore
from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

SCHEDULERS = ("sched-1", "sched-2", "sched-3")
AGENTS = [f"fill-{i}" for i in range(8)]
HOST_MB = 16384
FLAVOR = {"memory_mb": 1024, "root_gb": 10, "vcpus": 1}
INSTANCES = int(len(AGENTS) * HOST_MB / FLAVOR["memory_mb"] * 0.95)  # 121 of 128 slots


def test_three_workers_fill_the_fleet_without_overfilling_a_host(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      filter_scheduler__ram_allocation_ratio=1.0,
                      filter_scheduler__host_subset_size=2,
                      compute_agent__reserved_host_memory_mb=0)
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=HOST_MB, fake_local_gb=4096, fake_vcpus=64)
            for name in SCHEDULERS:
                fleet.wait(lambda n=name: len(fleet.scheduler_client(n).call({}, "list_hosts"))
                           == len(AGENTS), 60, f"{name} to see every agent")

            uuids = []
            clients = [fleet.scheduler_client(name) for name in SCHEDULERS]
            for i in range(INSTANCES):
                request_spec, filter_properties = build_request(FLAVOR, 1)
                clients[i % len(clients)].cast({}, "run_instance", request_spec=request_spec,
                                               filter_properties=filter_properties)
                uuids += request_spec["instance_uuids"]
            instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=180)
        finally:
            fleet.close()

        states = collections.Counter(i["state"] for i in instances.values())
        refused = sum(i["attempts"] - 1 for i in instances.values())
        refusal_lines = sum(fleet.log(h).count("Insufficient memory") for h in AGENTS)
        held = {h: InstanceStore(str(tmp_path / "state"), h).load() for h in AGENTS}
        used = {h: sum(r["instance"]["flavor"]["memory_mb"] for r in records.values())
                for h, records in held.items()}
        print(f"\n{INSTANCES} instances by {len(SCHEDULERS)} workers on {len(AGENTS)} hosts: "
              f"{dict(states)}; agent refusals {refusal_lines} ({refused} reschedules); "
              f"RAM used per host {sorted(used.values())} of {HOST_MB}")

        assert states == {"ACTIVE": INSTANCES}
        assert all(mb <= HOST_MB for mb in used.values())
        assert sum(used.values()) == INSTANCES * FLAVOR["memory_mb"]
        # Without claims, three workers with a stale view refuse by the dozen here.
        assert refusal_lines <= INSTANCES // 20
