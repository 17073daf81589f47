"""Three schedulers fill a fleet to the last slot: 1,000 requests for 1,000 slots.

Every placement is claimed in the database, and every worker learns what the
others placed; an instance its host has reported already is never counted twice
(once in the report, once as a placement the report does not show yet). So
while room exists no request ends in NoValidHost, and no host is overfilled.
"""

import collections

from compute_agent.instance_store import InstanceStore
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

SCHEDULERS = ("brim-s1", "brim-s2", "brim-s3")
AGENTS = [f"brim-{i}" for i in range(10)]
FLAVOR = {"memory_mb": 512, "root_gb": 1, "vcpus": 1}
HOST_MB = 100 * FLAVOR["memory_mb"]
REQUESTS = len(AGENTS) * 100


def test_three_schedulers_fill_every_slot_and_refuse_none_while_room_exists(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0)
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=HOST_MB, fake_local_gb=4096, fake_vcpus=1024)
            for name in SCHEDULERS:
                fleet.wait(lambda n=name: len(fleet.scheduler_client(n).call({}, "list_hosts"))
                           == len(AGENTS), 60, f"{name} to see every agent")
            # Through the shared queue, where the agents' updates wait behind the burst.
            uuids = fleet.boot(FLAVOR, requests=REQUESTS)
            instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=240)
        finally:
            fleet.close()
        states = collections.Counter(i["state"] for i in instances.values())
        reasons = collections.Counter((i["fault_reason"] or "")[:60] for i in instances.values()
                                      if i["state"] == "ERROR")
        attempts = collections.Counter(i["attempts"] for i in instances.values())
        held = {h: InstanceStore(str(tmp_path / "state"), h).load() for h in AGENTS}
        per_host = sorted(len(records) for records in held.values())
        print(f"\n{REQUESTS} requests for {REQUESTS} slots, {len(SCHEDULERS)} schedulers: {dict(states)}; "
              f"attempts {dict(sorted(attempts.items()))}; per host {per_host}; errors {dict(reasons)}")
        assert states == {"ACTIVE": REQUESTS}
        assert per_host == [100] * len(AGENTS)
