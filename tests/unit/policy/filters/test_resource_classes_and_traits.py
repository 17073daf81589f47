"""Resource classes and traits in the host table and the filters that read them:
ResourceClassFilter, TraitsFilter, IsolatedAggregateFilter, and the classic filters
reading the flavor's amounts."""

import time

import numpy as np
import pytest

from berth_contract.request_spec import RequestSpec
from scheduler.admin import grouping as admin
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.policy import filters
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector

CLASSES = ("VGPU", "CUSTOM_FPGA", "PCPU")
TRAITS = ("HW_CPU_X86_AVX2", "CUSTOM_GOLD", "STORAGE_DISK_SSD", "CUSTOM_RACK_A")


def inventory(total, reserved=0, min_unit=1, max_unit=None, step_size=1, ratio=1.0):
    return {"total": total, "reserved": reserved, "min_unit": min_unit,
            "max_unit": total if max_unit is None else max_unit, "step_size": step_size,
            "allocation_ratio": ratio}


def report(host, inventories=None, usages=None, traits=None, uuids=(), vcpus=8, vcpus_used=0,
           free_disk=100):
    wire = {"host": host, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100,
            "free_disk_gb": free_disk, "vcpus": vcpus, "vcpus_used": vcpus_used,
            "instance_uuids": list(uuids), "running_vms": len(uuids)}
    if inventories is not None:
        wire["inventories"] = inventories
        wire["usages"] = usages or {}
    if traits is not None:
        wire["traits"] = list(traits)
    return wire


def fleet(*reports):
    table = HostTable()
    for wire in reports:
        table.update_from_report(table.add(wire["host"]), wire, now=time.monotonic())
    return table


def spec(extra_specs=None, image_properties=None, count=1, vcpus=2, root_gb=10):
    return RequestSpec.from_wire(
        {"num_instances": count,
         "instance_type": {"memory_mb": 1024, "root_gb": root_gb, "vcpus": vcpus,
                           "extra_specs": extra_specs or {}},
         "image": {"properties": image_properties or {}}},
        {})


def build(policy_conf, name):
    return filters.all_filters()[name](policy_conf)


def passing(host_filter, table, request):
    """The hosts ``host_filter`` keeps, host by host, after checking its vector form agrees
    over every row and over every other row."""
    rows = np.arange(len(table))
    expected = [table.names[r] for r in rows if host_filter.host_passes(table.view(int(r)), request)]
    for subset in (rows, rows[::2], slice(None)):
        numbers = table.row_numbers(subset)
        mask = np.broadcast_to(np.asarray(host_filter.filter_vector(table, subset, request), dtype=bool),
                               (len(numbers),))
        assert [table.names[r] for r in numbers[mask]] == [h for h in expected
                                                          if table.index[h] in set(numbers)]
    return expected


def random_table(seed, n=200):
    rng = np.random.default_rng(seed)
    reports = []
    for i in range(n):
        inventories, usages = {}, {}
        for name in CLASSES:
            if rng.random() < 0.6:
                total = int(rng.choice([1, 2, 4, 8]))
                inventories[name] = inventory(total, int(rng.integers(0, 2)), int(rng.choice([1, 2])),
                                              int(rng.choice([total, max(total // 2, 1)])),
                                              int(rng.choice([1, 2])), float(rng.choice([1.0, 1.5])))
                usages[name] = int(rng.integers(0, total + 1))
                if rng.random() < 0.1:  # inventories Placement takes that hold nothing
                    inventories[name].update(rng.choice([{"min_unit": total + 1}, {"allocation_ratio": 0.0},
                                                         {"reserved": total + 1, "allocation_ratio": -0.5}]))
        traits = [t for t in TRAITS if rng.random() < 0.5]
        reports.append(report(f"h{i:03d}", inventories if rng.random() < 0.9 else None, usages,
                              traits if rng.random() < 0.9 else None))
    table = fleet(*reports)
    for i in range(0, n, 7):  # pending placements on top of the reports
        table.consume(i, f"pending-{i}", spec({"resources:VGPU": "1"}).flavor)
    aggregates = []
    for a in range(4):
        members = [f"h{i:03d}" for i in range(n) if rng.random() < 0.3]
        metadata = {f"trait:{t}": "required" for t in TRAITS if rng.random() < 0.3}
        aggregates.append({"name": f"agg{a}", "hosts": members, "metadata": metadata})
    aggregates.append({"name": "malformed", "hosts": ["h000", "h001"],
                       "metadata": {"trait:CUSTOM_GOLD": "forbidden"}})
    table.set_aggregates(aggregates)
    return table


def random_request(seed):
    rng = np.random.default_rng(seed + 1000)
    extra = {f"resources:{c}": str(int(rng.choice([1, 2, 3]))) for c in ("VGPU", "CUSTOM_FPGA")
             if rng.random() < 0.5}
    if rng.random() < 0.3:
        extra["hw:cpu_policy"] = "dedicated"
    picked = rng.permutation(TRAITS)
    cut = int(rng.integers(0, 3))
    extra.update({f"trait:{t}": "required" for t in picked[:cut]})
    extra.update({f"trait:{t}": "forbidden" for t in picked[cut:cut + int(rng.integers(0, 2))]})
    image = {f"trait:{picked[0]}": "required"} if cut and rng.random() < 0.5 else {}
    return spec(extra, image)


@pytest.mark.parametrize("name", ["ResourceClassFilter", "TraitsFilter", "IsolatedAggregateFilter"])
@pytest.mark.parametrize("seed", range(6))
def test_vector_form_agrees_with_host_by_host_on_random_tables(policy_conf, name, seed):
    table = random_table(seed)
    host_filter = build(policy_conf, name)
    kept = [passing(host_filter, table, random_request(seed * 10 + i)) for i in range(10)]
    assert any(0 < len(k) < len(table) for k in kept)  # the cases tell hosts apart


# -- the table -----------------------------------------------------------------------------

def test_a_placed_gpu_stays_taken_until_reported_and_a_released_one_is_given_back():
    table = fleet(report("h", {"VGPU": inventory(2)}, {"VGPU": 1}))
    gpu = spec({"resources:VGPU": "1"}).flavor
    table.consume(0, "i1", gpu)
    assert table.resource("VGPU").used[0] == 2
    # A report from before the placement does not give the GPU back.
    table.update_from_report(0, report("h", {"VGPU": inventory(2)}, {"VGPU": 1}), now=1.0)
    assert table.resource("VGPU").used[0] == 2
    # Once the agent reports the instance, its usage counts it, once.
    table.update_from_report(0, report("h", {"VGPU": inventory(2)}, {"VGPU": 2}, uuids=["i1"]), now=2.0)
    assert table.resource("VGPU").used[0] == 2 and not table.pending
    table.consume(0, "i2", gpu)
    assert table.resource("VGPU").used[0] == 3
    table.release(0, "i2")
    assert table.resource("VGPU").used[0] == 2


def test_a_class_the_host_stops_reporting_has_no_capacity_left():
    table = fleet(report("h", {"VGPU": inventory(4, reserved=1, ratio=2.0)}))
    assert table.resource("VGPU").capacity[0] == 6  # (total - reserved) * ratio
    table.update_from_report(0, report("h", {}), now=1.0)
    assert table.resource("VGPU").capacity[0] == 0
    assert table.view(0).inventories == {}


def test_host_state_shows_inventories_traits_and_usage():
    table = fleet(report("h", {"VCPU": inventory(8), "CUSTOM_FPGA": inventory(2)}, {"CUSTOM_FPGA": 1},
                         traits=["CUSTOM_GOLD"]), report("old"))
    host, old = table.view(0), table.view(1)
    assert host.inventories["CUSTOM_FPGA"].capacity == 2 and host.inventories["VCPU"].total == 8
    assert host.used("CUSTOM_FPGA") == 1 and host.used("VGPU") == 0
    assert host.traits == {"CUSTOM_GOLD"} and old.traits == frozenset() and old.inventories == {}
    table.update_from_report(0, report("h", traits=[]), now=1.0)
    assert table.trait_column("CUSTOM_GOLD").tolist() == [False, False]


def test_dedicated_cpus_are_taken_as_pcpu_not_vcpus():
    table = fleet(report("h", {"PCPU": inventory(4)}, vcpus=4, vcpus_used=0))
    table.consume(0, "i", spec({"hw:cpu_policy": "dedicated"}, vcpus=2).flavor)
    assert table.vcpus_used[0] == 0 and table.resource("PCPU").used[0] == 2


# -- the filters ---------------------------------------------------------------------------

def test_resource_class_filter_follows_the_inventory_rules(policy_conf):
    table = fleet(report("roomy", {"VGPU": inventory(8)}),
                  report("full", {"VGPU": inventory(8)}, {"VGPU": 7}),
                  report("two_at_least", {"VGPU": inventory(8, min_unit=2)}),
                  report("one_at_most", {"VGPU": inventory(8, max_unit=1)}),
                  report("pairs_only", {"VGPU": inventory(8, step_size=2)}),
                  report("reserved", {"VGPU": inventory(8, reserved=7)}),
                  report("overcommitted", {"VGPU": inventory(4, ratio=2.0)}, {"VGPU": 6}),
                  report("no_gpu", {"CUSTOM_FPGA": inventory(8)}),
                  report("old_agent"))
    host_filter = build(policy_conf, "ResourceClassFilter")
    assert passing(host_filter, table, spec({"resources:VGPU": "2"})) == [
        "roomy", "two_at_least", "pairs_only", "overcommitted"]
    assert passing(host_filter, table, spec({"resources:VGPU": "1"})) == [
        "roomy", "full", "one_at_most", "reserved", "overcommitted"]
    assert len(passing(host_filter, table, spec())) == len(table)  # nothing asked
    # A new report changes what the host takes, whatever was asked of it before.
    table.update_from_report(table.index["two_at_least"], report("two_at_least", {"VGPU": inventory(8)}),
                             now=time.monotonic())
    table.update_from_report(table.index["roomy"], report("roomy", {"VGPU": inventory(8, step_size=2)}),
                             now=time.monotonic())
    assert passing(host_filter, table, spec({"resources:VGPU": "1"})) == [
        "full", "two_at_least", "one_at_most", "reserved", "overcommitted"]


def test_traits_filter_requires_and_forbids(policy_conf):
    table = fleet(report("gold_ssd", traits=["CUSTOM_GOLD", "STORAGE_DISK_SSD"]),
                  report("gold", traits=["CUSTOM_GOLD"]), report("ssd", traits=["STORAGE_DISK_SSD"]),
                  report("old_agent"))
    host_filter = build(policy_conf, "TraitsFilter")
    assert passing(host_filter, table, spec({"trait:CUSTOM_GOLD": "required"})) == ["gold_ssd", "gold"]
    assert passing(host_filter, table, spec({"trait:CUSTOM_GOLD": "forbidden"})) == ["ssd", "old_agent"]
    assert passing(host_filter, table, spec({"trait:CUSTOM_GOLD": "required"},
                                            {"trait:STORAGE_DISK_SSD": "required"})) == ["gold_ssd"]
    assert passing(host_filter, table, spec({"trait:HW_CPU_X86_AVX2": "required"})) == []
    assert passing(host_filter, table, spec({"trait:HW_CPU_X86_AVX2": "forbidden"})) == [
        "gold_ssd", "gold", "ssd", "old_agent"]


def test_isolated_aggregates_take_only_requests_requiring_their_traits(policy_conf):
    table = fleet(*(report(h) for h in ("free", "gold", "gold_ssd", "bad")))
    table.set_aggregates([
        {"name": "g", "hosts": ["gold", "gold_ssd"], "metadata": {"trait:CUSTOM_GOLD": "required"}},
        {"name": "s", "hosts": ["gold_ssd"], "metadata": {"trait:STORAGE_DISK_SSD": "required"}},
        {"name": "set_before_it_was_refused", "hosts": ["bad"], "metadata": {"trait:gold": "required"}},
    ])
    host_filter = build(policy_conf, "IsolatedAggregateFilter")
    assert passing(host_filter, table, spec()) == ["free"]
    assert passing(host_filter, table, spec({"trait:CUSTOM_GOLD": "required"})) == ["free", "gold"]
    assert passing(host_filter, table, spec({"trait:CUSTOM_GOLD": "required"},
                                            {"trait:STORAGE_DISK_SSD": "required"})) == [
        "free", "gold", "gold_ssd"]


def test_classic_filters_ask_nothing_of_what_the_flavor_takes_elsewhere(policy_conf):
    table = fleet(report("cpus_full", {"PCPU": inventory(4)}, vcpus=4, vcpus_used=16),
                  report("only_dedicated", {"PCPU": inventory(4)}, vcpus=0),
                  report("shared_only", vcpus=8), report("disk_full", free_disk=0))
    core, disk = build(policy_conf, "CoreFilter"), build(policy_conf, "DiskFilter")
    dedicated = spec({"hw:cpu_policy": "dedicated"})
    assert passing(core, table, dedicated) == ["cpus_full", "only_dedicated", "shared_only", "disk_full"]
    assert passing(core, table, spec()) == ["shared_only", "disk_full"]
    assert passing(core, table, spec({"resources:VCPU": "0"})) == [
        "cpus_full", "only_dedicated", "shared_only", "disk_full"]
    assert "disk_full" in passing(disk, table, spec({"resources:DISK_GB": "0"}))
    assert "disk_full" not in passing(disk, table, spec())
    # The PCPUs are checked by ResourceClassFilter instead.
    assert passing(build(policy_conf, "ResourceClassFilter"), table, dedicated) == [
        "cpus_full", "only_dedicated"]


def test_default_filters_place_dedicated_and_gpu_requests_and_say_why_not(policy_conf):
    enabled = policy_conf.filter_scheduler.enabled_filters
    assert "ResourceClassFilter" in enabled and "TraitsFilter" in enabled
    assert "IsolatedAggregateFilter" not in enabled
    table = fleet(report("plain"), report("gpu", {"VGPU": inventory(1)}, traits=["CUSTOM_GOLD"]))
    selector = Selector(filters.enabled_filters(policy_conf), [])
    gpu = spec({"resources:VGPU": "1", "trait:CUSTOM_GOLD": "required"})
    [chosen] = selector.select(table, gpu)
    assert chosen.host == "gpu"
    with pytest.raises(NoValidHost) as refused:
        selector.select(table, spec({"resources:VGPU": "1"}))
    assert "ResourceClassFilter removed 2" in str(refused.value)
    with pytest.raises(NoValidHost) as refused:
        selector.select(table, spec({"resources:CUSTOM_NPU": "1"}))
    assert str(refused.value).endswith(
        "ResourceClassFilter removed 2 (no host has an inventory of CUSTOM_NPU); none left")
    table.release(chosen.row, gpu.instance_uuids[0])
    [again] = selector.select(table, spec({"resources:VGPU": "1"}))
    assert again.host == "gpu"


@pytest.mark.parametrize("vectorized", [True, False])
@pytest.mark.parametrize(("extra_specs", "why"), [
    ({"trait:CUSTOM_GOLD": "required"}, "required trait CUSTOM_GOLD is on no host"),
    ({"trait:CUSTOM_RACK_A": "forbidden"}, "forbidden trait CUSTOM_RACK_A is on every host"),
    ({"trait:STORAGE_DISK_SSD": "required", "trait:HW_CPU_X86_AVX2": "required"},
     "required trait HW_CPU_X86_AVX2 is missing on 1 of 2 hosts; "
     "required trait STORAGE_DISK_SSD is missing on 1 of 2 hosts"),
])
def test_the_reason_names_the_traits_that_left_no_host(policy_conf, extra_specs, why, vectorized):
    table = fleet(report("a", traits=["CUSTOM_RACK_A", "STORAGE_DISK_SSD"]),
                  report("b", traits=["CUSTOM_RACK_A", "HW_CPU_X86_AVX2"]))
    with pytest.raises(NoValidHost) as refused:
        Selector(filters.enabled_filters(policy_conf), [], vectorized=vectorized).select(
            table, spec(extra_specs))
    assert str(refused.value).endswith(f"TraitsFilter removed 2 ({why}); none left")


# -- aggregate metadata --------------------------------------------------------------------

def test_set_metadata_takes_required_traits_only():
    assert admin.check_metadata({"trait:CUSTOM_GOLD": "required"}) == {"trait:CUSTOM_GOLD": "required"}
    assert admin.check_metadata({"trait:CUSTOM_GOLD": None}) == {"trait:CUSTOM_GOLD": None}
    with pytest.raises(InvalidRequest, match="trait:CUSTOM_GOLD.*forbidden.*give trait:CUSTOM_GOLD=required"):
        admin.check_metadata({"trait:CUSTOM_GOLD": "forbidden"})
    with pytest.raises(InvalidRequest, match="trait:gold.*is not a trait"):
        admin.check_metadata({"trait:gold": "required"})


@pytest.mark.parametrize(("gpu", "why"), [
    (inventory(4, min_unit=3, max_unit=2), "its min_unit 3 is above its max_unit 2"),
    (inventory(4, ratio=0.0), "its capacity, (total 4 - reserved 0) * allocation_ratio 0 = 0, is below its "
                              "smallest allocation, 1"),
    (inventory(4, step_size=8), "no multiple of its step_size 8 lies from its min_unit 1 to its max_unit 4"),
])
def test_an_inventory_that_holds_nothing_refuses_only_the_requests_for_its_class(policy_conf, gpu, why):
    table = fleet(report("odd", {"VGPU": gpu, "CUSTOM_FPGA": inventory(2)}))
    selector = Selector(filters.enabled_filters(policy_conf), [])
    [chosen] = selector.select(table, spec())
    assert chosen.host == "odd"
    [chosen] = selector.select(table, spec({"resources:CUSTOM_FPGA": "1"}))
    assert chosen.host == "odd"
    for vectorized in (True, False):
        with pytest.raises(NoValidHost) as refused:
            Selector(filters.enabled_filters(policy_conf), [], vectorized=vectorized).select(
                table, spec({"resources:VGPU": "1"}))
        assert str(refused.value).endswith(
            f"ResourceClassFilter removed 1 (the inventory of VGPU holds nothing on 1 host, odd: {why}); "
            "none left")


def test_the_reason_names_a_few_of_the_hosts_whose_inventory_holds_nothing(policy_conf):
    table = fleet(*(report(f"h{i}", {"VGPU": inventory(4, ratio=0.0)}) for i in range(5)),
                  report("full", {"VGPU": inventory(1)}, {"VGPU": 1}))
    with pytest.raises(NoValidHost) as refused:
        Selector(filters.enabled_filters(policy_conf), []).select(table, spec({"resources:VGPU": "1"}))
    assert "ResourceClassFilter removed 6 (the inventory of VGPU holds nothing on 5 hosts, h0: its " in str(
        refused.value)
    assert "; h2: its capacity" in str(refused.value) and "; and 2 more); none left" in str(refused.value)
