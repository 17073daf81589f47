"""A batch is one transaction: nothing one message does may abort it for the others.

select_destinations used to add the request's instances to their server group
without a savepoint, as if it wrote nothing; with two schedulers racing to add
the same member, the unique violation aborted the shared transaction,
PostgreSQL rolled the whole batch back at commit without a word, and its
messages were acknowledged all the same. Here 240 boots into one server group
race with select_destinations calls naming the same instances, on both
schedulers: every boot ends ACTIVE, recorded as the agents hold it, and
nothing is dead-lettered.
"""

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_faults import outcome

SCHEDULERS = ("group-s1", "group-s2")
AGENTS = ("group-a", "group-b", "group-c")
BOOTS = 240


def test_boots_into_a_group_racing_with_select_destinations_all_commit(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(SCHEDULERS)
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256)
            fleet.wait_hosts_up(AGENTS)
            group = fleet.client.admin_call({}, "create_server_group", name="web",
                                            policy="soft-anti-affinity")["uuid"]
            clients = [fleet.scheduler_client(name) for name in SCHEDULERS]
            uuids = []
            for _ in range(BOOTS):
                spec, props = build_request(flavors.get("m1.tiny"), 1)
                props["scheduler_hints"] = {"group": group}
                for client in clients:  # both schedulers at once, on the same instance
                    client.cast({}, "select_destinations", request_spec=spec, filter_properties=props)
                fleet.client.run_instance({}, spec, props)
                uuids += spec["instance_uuids"]
            instances, errors = outcome(fleet, uuids, AGENTS)
            members = fleet.client.admin_call({}, "show_server_group", group_uuid=group)["members"]
            dead = wire.dead_letter_count(fleet)
        finally:
            fleet.close()
        print(f"\n{BOOTS} boots into one group, each racing two select_destinations: "
              f"{sum(i['state'] == 'ACTIVE' for i in instances.values())} ACTIVE, {dead} dead letters, "
              f"{len(members)} members")
        assert errors == {}
        assert dead == 0
        assert sorted(members) == sorted(uuids)
