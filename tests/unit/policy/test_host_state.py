import numpy as np

from berth_contract.request_spec import Flavor
from tests.unit.policy.fakes import make_host

FLAVOR = Flavor(memory_mb=1024, root_gb=10, ephemeral_gb=5, vcpus=2)


def report(name="h", free_ram=8192, free_disk=100, vcpus_used=0, uuids=()):
    return {
        "host": name, "memory_mb": 8192, "free_ram_mb": free_ram, "local_gb": 100,
        "free_disk_gb": free_disk, "vcpus": 8, "vcpus_used": vcpus_used,
        "instance_uuids": list(uuids), "running_vms": len(uuids),
    }


def test_consume_takes_every_resource():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    assert (host.free_ram_mb, host.free_disk_gb, host.vcpus_used, host.num_instances) == (
        7168, 85, 2, 1,
    )


def test_a_report_without_the_placement_keeps_it_consumed():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    host.update_from_report(report())  # the agent has not claimed u1 yet
    assert host.free_ram_mb == 7168
    assert host.num_instances == 1


def test_a_report_with_the_placement_counts_it_once():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    host.update_from_report(report(free_ram=7168, free_disk=85, vcpus_used=2, uuids=["u1"]))
    assert (host.free_ram_mb, host.free_disk_gb, host.vcpus_used) == (7168, 85, 2)
    assert host.pending == {}
    host.update_from_report(report(free_ram=7168, free_disk=85, vcpus_used=2, uuids=["u1"]))
    assert host.free_ram_mb == 7168


def test_consuming_the_same_instance_twice_takes_once():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    host.consume("u1", FLAVOR)
    assert host.free_ram_mb == 7168


def test_a_placement_never_reported_expires():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    since = host.pending["u1"][1]
    host.update_from_report(report(), now=since + 61, pending_ttl=60)
    assert host.free_ram_mb == 8192
    assert host.pending == {}


def test_release_gives_back():
    host = make_host("h")
    host.consume("u1", FLAVOR)
    host.release("u1")
    host.release("u1")
    assert (host.free_ram_mb, host.free_disk_gb, host.vcpus_used, host.num_instances) == (
        8192, 100, 0, 0,
    )


def test_a_copy_of_the_table_moves_alone():
    from scheduler.policy.host_state import HostTable

    table = HostTable()
    make_host("h1", table=table)
    make_host("h2", table=table)
    copied = table.copy()
    copied.shift(copied.index["h1"], FLAVOR, +1)  # what a rebalance plan tries on its copy
    assert (list(copied.free_ram_mb), list(copied.vcpus_used)) == ([7168, 8192], [2, 0])
    assert (list(table.free_ram_mb), list(table.vcpus_used)) == ([8192, 8192], [0, 0])
    copied.add("h3")  # its rows grow apart too
    assert (len(copied), len(table)) == (3, 2)


def test_metrics_a_host_stops_reporting_are_unset_and_the_others_take_the_new_values():
    from scheduler.policy.host_state import HostTable

    table = HostTable()
    make_host("h1", table=table)
    make_host("h2", table=table)
    h1, h2 = table.index["h1"], table.index["h2"]
    table.update_from_report(h2, dict(report("h2"), metrics={"cpu.percent": 20.0}), now=1.0)
    table.update_from_report(h1, dict(report("h1"), metrics={"cpu.percent": 50.0, "mem.percent": 10.0}),
                             now=1.0)
    table.update_from_report(h1, dict(report("h1"), metrics={"cpu.percent": 60.0}), now=2.0)
    assert list(table.metric("cpu.percent")) == [60.0, 20.0]
    assert np.isnan(table.metric("mem.percent")).all()
    table.update_from_report(h1, report("h1"), now=3.0)
    assert np.isnan(table.metric("cpu.percent")[h1]) and table.metric("cpu.percent")[h2] == 20.0


def test_the_stats_index_follows_a_stat_whose_value_changes_and_keeps_one_that_does_not():
    from scheduler.policy.host_state import HostTable

    table = HostTable()
    make_host("h1", table=table)
    h1 = table.index["h1"]
    for stats in ({"num_instances": 2, "io_workload": 0}, {"num_instances": 2, "io_workload": 0},
                  {"num_instances": 3, "io_workload": 0}, {"num_instances": 3}):
        table.update_from_report(h1, dict(report("h1"), stats=stats), now=1.0)
        indexed = {name: holders[h1] for name, holders in table.stats_by_name.items()}
        assert indexed == {name: str(value) for name, value in stats.items()}
