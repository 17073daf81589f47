"""RamFilter, DiskFilter, CoreFilter and their Aggregate forms count as Placement does: a host's
instances get ``(total - reserved) * allocation_ratio``; the reserve is never overcommitted.
The agents' used figures count their reserve, and limits() gives the agent the same limit."""

import pytest

from berth_contract.request_spec import Flavor, RequestSpec
from scheduler.policy.filters.aggregate import AggregateCoreFilter, AggregateDiskFilter, AggregateRamFilter
from scheduler.policy.filters.resources import CoreFilter, DiskFilter, RamFilter
from tests.unit.policy.fakes import make_host


def spec(memory_mb=1, root_gb=0, vcpus=1, **extra_specs):
    flavor = Flavor(memory_mb=memory_mb, root_gb=root_gb, ephemeral_gb=0, vcpus=vcpus,
                    extra_specs=extra_specs)
    return RequestSpec(instance_uuids=["00000000-0000-4000-8000-000000000001"], flavor=flavor)


@pytest.mark.parametrize("cls", [CoreFilter, AggregateCoreFilter])
def test_every_vcpu_reserved_leaves_no_room_whatever_the_ratio(policy_conf, cls):
    # the smallest case: 32 vCPUs, all 32 reserved, ratio 1.25. Placement: (32 - 32) * 1.25 = 0
    # for instances; the arithmetic of Nova's filters before Placement gave 32 * 1.25 - 32 = 8
    policy_conf.set_override("cpu_allocation_ratio", 1.25, "filter_scheduler")
    host = make_host("h", vcpus=32, vcpus_used=32, reserved_host_cpus=32)
    assert not cls(policy_conf).host_passes(host, spec(vcpus=1))
    assert cls(policy_conf).limits(host) == {"vcpu": 32.0}  # what the agent's used figure may reach


@pytest.mark.parametrize("cls", [RamFilter, AggregateRamFilter])
def test_the_memory_reserve_is_kept_out_before_the_ratio(policy_conf, cls):
    # 8192 MB, 512 reserved, ratio 1.5: instances get (8192 - 512) * 1.5 = 11520 MB
    policy_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    host = make_host("h", ram=8192, free_ram=8192 - 512 - 11000, reserved_host_memory_mb=512)
    ram = cls(policy_conf)
    assert ram.host_passes(host, spec(memory_mb=520))
    assert not ram.host_passes(host, spec(memory_mb=521))  # 12288 - 11512 = 776 by the old arithmetic
    assert ram.limits(host) == {"memory_mb": 11520 + 512}


@pytest.mark.parametrize("cls", [DiskFilter, AggregateDiskFilter])
def test_the_disk_reserve_is_whole_gb_to_placement_and_mb_in_the_agents_figure(policy_conf, cls):
    # 100 GB, 1536 MB reserved: Placement keeps 2 GB back (Nova rounds up); the agent's used
    # figure counts 1.5. Ratio 2: instances get 196 GB
    policy_conf.set_override("disk_allocation_ratio", 2.0, "filter_scheduler")
    host = make_host("h", disk=100, free_disk=100 - 1.5 - 190, reserved_host_disk_mb=1536)
    disk = cls(policy_conf)
    assert disk.host_passes(host, spec(root_gb=6))
    assert not disk.host_passes(host, spec(root_gb=7))
    assert disk.limits(host) == {"disk_gb": 196 + 1.5}


def test_without_a_reserve_the_arithmetic_is_the_same_as_before(policy_conf):
    policy_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    host = make_host("h", ram=8192, free_ram=0)
    assert RamFilter(policy_conf).host_passes(host, spec(memory_mb=4096))
    assert not RamFilter(policy_conf).host_passes(host, spec(memory_mb=4097))


def test_the_aggregate_filters_read_the_flavors_amounts(policy_conf):
    full = make_host("h", ram=4096, free_ram=0, disk=10, free_disk=0, vcpus=4, vcpus_used=64)
    # booted from a volume: no local disk asked, whatever root_gb says
    assert AggregateDiskFilter(policy_conf).host_passes(full, spec(root_gb=20, **{"resources:DISK_GB": "0"}))
    assert not AggregateDiskFilter(policy_conf).host_passes(full, spec(root_gb=20))
    # dedicated vCPUs are PCPU, not VCPU: nothing to ask of the shared ones
    assert AggregateCoreFilter(policy_conf).host_passes(full, spec(vcpus=2, **{"hw:cpu_policy": "dedicated"}))
    assert not AggregateCoreFilter(policy_conf).host_passes(full, spec(vcpus=2))
    # memory as the extra specs say it
    roomy = make_host("r", ram=4096)
    eight_gb = spec(memory_mb=1, **{"resources:MEMORY_MB": "8192"})
    assert not AggregateRamFilter(policy_conf).host_passes(roomy, eight_gb)
    assert not AggregateRamFilter(policy_conf).filter_vector(roomy.table, [roomy.row], eight_gb)[0]


def test_aggregate_core_filter_refuses_a_host_with_no_vcpus_as_core_filter_does(policy_conf):
    none = make_host("h", vcpus=0)
    for cls in (CoreFilter, AggregateCoreFilter):
        assert not cls(policy_conf).host_passes(none, spec(vcpus=1))
        assert not cls(policy_conf).filter_vector(none.table, [none.row], spec(vcpus=1))[0]


def test_a_reserve_changed_by_a_later_report_is_counted_at_once(policy_conf):
    import numpy as np

    from scheduler.policy.host_state import HostTable

    policy_conf.set_override("ram_allocation_ratio", 2.0, "filter_scheduler")
    table = HostTable()
    host = make_host("h", ram=8192, free_ram=0, table=table)  # no reserve: 8192 more fit
    ram, rows, big = RamFilter(policy_conf), np.arange(1), spec(memory_mb=8192)
    assert ram.filter_vector(table, rows, big).tolist() == [True]
    # the agent now keeps 1024 back (counted in its used figure): Placement gives its instances
    # (8192 - 1024) * 2 = 14336, of which 8192 - 1024 are used
    host.update_from_report({"host": "h", "memory_mb": 8192, "free_ram_mb": 0, "local_gb": 100,
                             "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0,
                             "reserved_host_memory_mb": 1024})
    assert ram.filter_vector(table, rows, big).tolist() == [False]
    assert ram.filter_vector(table, rows, spec(memory_mb=7168)).tolist() == [True]
