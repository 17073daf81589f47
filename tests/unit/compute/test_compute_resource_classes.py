"""The agent's report of every resource class (inventories, usages) and its traits, and claims
that count every class of a flavor's amounts: a GPU or a dedicated CPU is never given twice."""

import pytest

from berth_contract.host_report import HostReport
from compute_agent import driver as drivers
from compute_agent.client import ComputeClient
from compute_agent.resource_tracker import ClaimFailed, ResourceTracker
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for
from tests.unit.compute.test_compute_inventory import new_conf
from tests.unit.compute.test_moves import boot, migration_of, move, outcome

GPU = {"resources:VGPU": "1"}
DEDICATED = {"hw:cpu_policy": "dedicated"}


def flavor(vcpus=1, memory_mb=1024, root_gb=10, **extra_specs):
    return {"name": "f", "memory_mb": memory_mb, "root_gb": root_gb, "ephemeral_gb": 0, "vcpus": vcpus,
            "extra_specs": extra_specs}


def tracker(**options):
    options = {"fake_vcpus": 8, "fake_memory_mb": 16384, "fake_local_gb": 100, "resources": {"VGPU": "2"},
               "cpu_dedicated_set": "4-7", "traits": ["CUSTOM_SSD"], **options}
    conf = new_conf(**options)
    return ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf))


def test_the_report_has_every_class_its_usage_and_the_traits():
    rt = tracker(reserved_host_cpus=1, reserved_host_disk_mb=1536)
    rt.claim("a", flavor(vcpus=2, memory_mb=2048, **GPU))
    rt.claim("b", flavor(vcpus=3, **DEDICATED))
    report = rt.report()
    assert report["vcpus"] == 4  # the shared CPUs 0-3
    assert report["vcpus_used"] == 1 + 2  # the dedicated instance's vCPUs are PCPU
    assert report["inventories"] == {
        "VCPU": {"total": 4, "reserved": 1, "min_unit": 1, "max_unit": 4, "step_size": 1,
                 "allocation_ratio": 1.0},
        "MEMORY_MB": {"total": 16384, "reserved": 512, "min_unit": 1, "max_unit": 16384, "step_size": 1,
                      "allocation_ratio": 1.0},
        "DISK_GB": {"total": 100, "reserved": 2, "min_unit": 1, "max_unit": 100, "step_size": 1,
                    "allocation_ratio": 1.0},
        "PCPU": {"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4, "step_size": 1,
                 "allocation_ratio": 1.0},
        "VGPU": {"total": 2, "reserved": 0, "min_unit": 1, "max_unit": 2, "step_size": 1,
                 "allocation_ratio": 1.0},
    }
    assert report["usages"] == {"VCPU": 2, "MEMORY_MB": 3072, "DISK_GB": 20, "PCPU": 3, "VGPU": 1}
    assert "CUSTOM_SSD" in report["traits"] and "HW_CPU_X86_AVX2" in report["traits"]
    assert report["traits"] == sorted(report["traits"])
    report["instance_uuids"] = []  # "a" and "b" are no UUIDs
    assert HostReport.from_wire(report, "h1").usages == report["usages"]  # the scheduler takes it


def test_a_host_of_only_dedicated_cpus_has_no_vcpu_class():
    report = tracker(cpu_dedicated_set="0-7").report()
    assert report["vcpus"] == 0
    assert "VCPU" not in report["inventories"] and "VCPU" not in report["usages"]
    assert report["inventories"]["PCPU"]["total"] == 8


def test_without_the_new_options_the_classic_figures_are_as_before():
    rt = tracker(resources={}, cpu_dedicated_set=None, traits=[])
    rt.claim("a", flavor(vcpus=2))
    report = rt.report()
    assert (report["vcpus"], report["vcpus_used"]) == (8, 2)
    assert set(report["inventories"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}


def test_a_gpu_is_never_given_twice():
    rt = tracker(resources={"VGPU": "1"})
    assert rt.claim("a", flavor(**GPU))
    with pytest.raises(ClaimFailed, match=r"^Insufficient VGPU: requested 1, 0 of 1 free$") as refused:
        rt.claim("b", flavor(**GPU), limits={"memory_mb": 10**6, "disk_gb": 10**6, "vcpu": 100})
    assert refused.value.resource == "VGPU"
    assert "b" not in rt and rt.report()["usages"]["VGPU"] == 1
    rt.free("a")
    assert rt.claim("b", flavor(**GPU))


def test_a_class_the_host_does_not_have_is_refused_without_limits():
    rt = tracker()
    with pytest.raises(ClaimFailed, match=r"^Insufficient CUSTOM_FPGA: requested 1, this host has none$"):
        rt.claim("a", flavor(**{"resources:CUSTOM_FPGA": "1"}))


@pytest.mark.parametrize("options, extra_specs, why", [
    ({"resource_max_unit": {"VGPU": "1"}}, {"resources:VGPU": "2"}, "requested 2, at most 1 per instance"),
    ({"resource_min_unit": {"VGPU": "2"}}, {"resources:VGPU": "1"}, "requested 1, at least 2 per instance"),
    ({"resources": {"VGPU": "4"}, "resource_step_size": {"VGPU": "2"}}, {"resources:VGPU": "3"},
     "requested 3, in steps of 2"),
    ({"resource_reserved": {"VGPU": "1"}}, {"resources:VGPU": "2"}, "requested 2, 1 of 1 free"),
])
def test_a_claim_is_refused_as_placement_would(options, extra_specs, why):
    with pytest.raises(ClaimFailed) as refused:
        tracker(**options).claim("a", flavor(**extra_specs))
    assert str(refused.value) == f"Insufficient VGPU: {why}"


def test_an_allocation_ratio_lets_a_class_be_overcommitted():
    rt = tracker(resource_allocation_ratio={"VGPU": "2.0"})
    for uuid in "abcd":
        rt.claim(uuid, flavor(**GPU))
    with pytest.raises(ClaimFailed, match="0 of 4 free"):
        rt.claim("e", flavor(**GPU))


def test_dedicated_cpus_are_claimed_as_pcpu():
    rt = tracker(cpu_dedicated_set="4-7", resource_reserved={"PCPU": "1"})
    assert rt.claim("a", flavor(vcpus=2, **DEDICATED), limits={"vcpu": 4})
    with pytest.raises(ClaimFailed, match=r"^Insufficient PCPU: requested 2, 1 of 3 free$"):
        rt.claim("b", flavor(vcpus=2, **DEDICATED), limits={"vcpu": 4})
    assert rt.claim("c", flavor(vcpus=1, **DEDICATED))
    assert rt.usage()[2] == 0  # no shared vCPU taken
    assert rt.report()["usages"]["PCPU"] == 3


def test_a_dedicated_flavor_on_a_host_without_dedicated_cpus_is_refused():
    with pytest.raises(ClaimFailed, match="Insufficient PCPU: requested 2, this host has none"):
        tracker(cpu_dedicated_set=None).claim("a", flavor(vcpus=2, **DEDICATED))


def test_the_classic_limits_are_still_checked_first():
    with pytest.raises(ClaimFailed, match="Insufficient memory"):
        tracker().claim("a", flavor(memory_mb=4096, **GPU), limits={"memory_mb": 2048})


def test_a_resize_to_more_gpus_than_free_is_refused_and_changes_nothing():
    rt = tracker(resources={"VGPU": "3"})
    rt.claim("a", flavor(**GPU))
    rt.claim("b", flavor(**GPU))
    with pytest.raises(ClaimFailed, match=r"^Insufficient VGPU: requested 3, 2 of 3 free$"):
        rt.resize("a", flavor(**{"resources:VGPU": "3"}))
    assert rt.report()["usages"]["VGPU"] == 2
    rt.resize("a", flavor(**{"resources:VGPU": "2"}))
    assert rt.report()["usages"]["VGPU"] == 3


def test_a_resize_holds_the_larger_of_each_class_until_it_settles():
    rt = tracker(resources={"VGPU": "2", "CUSTOM_FPGA": "1"})
    old, new = flavor(**GPU), flavor(**{"resources:CUSTOM_FPGA": "1"})
    rt.claim("a", old)
    rt.resize("a", new)
    assert rt.report()["usages"] == {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10, "PCPU": 0, "VGPU": 1,
                                     "CUSTOM_FPGA": 1}
    with pytest.raises(ClaimFailed, match="Insufficient CUSTOM_FPGA"):
        rt.claim("b", new)
    rt.settle_resize("a", new)  # confirmed: the GPU is given back
    assert rt.report()["usages"]["VGPU"] == 0
    assert rt.claim("b", flavor(**{"resources:VGPU": "2"}))


def test_a_shrinking_resize_asks_for_nothing_more():
    rt = tracker(resources={"VGPU": "2"})
    rt.claim("a", flavor(**{"resources:VGPU": "2"}))
    rt.resize("a", flavor(**GPU))
    assert rt.report()["usages"]["VGPU"] == 2


def test_a_resize_to_dedicated_cpus_claims_pcpu():
    rt = tracker(cpu_dedicated_set="6-7")
    rt.claim("a", flavor(vcpus=2))
    with pytest.raises(ClaimFailed, match=r"^Insufficient PCPU: requested 4, at most 2 per instance$"):
        rt.resize("a", flavor(vcpus=4, **DEDICATED))
    rt.resize("a", flavor(vcpus=2, **DEDICATED))
    assert rt.report()["usages"]["PCPU"] == 2 and rt.report()["usages"]["VCPU"] == 2


# -- through the agent: what the scheduler hears ----------------------------------------------


def gpu_host(conf, **options):
    for name, value in {"resources": {"VGPU": "1"}, "report_interval": 3600, **options}.items():
        conf.set_override(name, value, "compute_agent")


def gpu_instance():
    instance = make_instance()
    instance["flavor"]["extra_specs"] = dict(GPU)
    return instance


def test_a_second_gpu_instance_goes_back_to_the_scheduler_naming_the_class(conf, transport, scheduler,
                                                                             agents):
    gpu_host(conf)
    manager = agents()
    first, second = gpu_instance(), gpu_instance()
    boot(transport, scheduler, first)
    ComputeClient(transport).run_instance({}, HOST, second, *request_for(second))
    wait_for(lambda: scheduler.reschedules, "the reschedule")
    [(_, props)] = scheduler.reschedules
    assert props["retry"]["exc_reason"] == f"{HOST}: Insufficient VGPU: requested 1, 0 of 1 free"
    assert second["uuid"] not in manager.tracker
    report = wait_for(lambda: (r := scheduler.last_report()) and r["usages"].get("VGPU") == 1 and r,
                      "a report of the GPU held")
    assert report["inventories"]["VGPU"]["total"] == 1


def test_a_move_in_needing_a_gpu_the_host_has_given_fails_with_the_reason(conf, transport, scheduler, agents):
    gpu_host(conf)
    manager = agents()
    boot(transport, scheduler, gpu_instance())
    moving = gpu_instance()
    move(transport, moving, migration_of(21))
    assert outcome(scheduler, moving["uuid"]) == [
        (21, "failed", {"reason": f"{HOST}: Insufficient VGPU: requested 1, 0 of 1 free"})]
    assert moving["uuid"] not in manager.tracker


def test_a_resize_in_place_to_a_gpu_the_host_has_given_fails_with_the_reason(conf, transport, scheduler,
                                                                             agents):
    gpu_host(conf)
    manager = agents()
    boot(transport, scheduler, gpu_instance())
    plain = make_instance()
    boot(transport, scheduler, plain)
    resized = dict(plain, flavor=gpu_instance()["flavor"])
    move(transport, resized, migration_of(22, kind="resize", source=HOST, old_flavor=plain["flavor"]))
    assert outcome(scheduler, plain["uuid"]) == [
        (22, "failed", {"reason": f"{HOST}: Insufficient VGPU: requested 1, 0 of 1 free"})]
    assert manager.tracker.report()["usages"]["VGPU"] == 1


def test_the_gpus_held_are_held_again_after_a_restart_even_under_resize(conf, transport, scheduler, agents):
    gpu_host(conf, resources={"VGPU": "2"})
    manager = agents()
    plain = make_instance()
    boot(transport, scheduler, plain)
    resized = dict(plain, flavor=gpu_instance()["flavor"])
    move(transport, resized, migration_of(23, kind="resize", source=HOST, old_flavor=plain["flavor"]))
    assert outcome(scheduler, plain["uuid"]) == [(23, "done", None)]
    boot(transport, scheduler, gpu_instance())
    manager.stop()
    again = agents()
    assert again.tracker.report()["usages"]["VGPU"] == 2
    with pytest.raises(ClaimFailed, match="Insufficient VGPU"):
        again.tracker.claim("x", gpu_instance()["flavor"])
