"""The balanced policy on CloudStack's churning, overcommitted fleet (scheduler.simulation.cloudstack)."""

import pytest

from scheduler.simulation import cloudstack as real_load_skew


@pytest.mark.parametrize("seed", real_load_skew.SEEDS)
def test_balanced_spreads_the_real_load_better_than_allocation_alone(seed):
    balanced = real_load_skew.run("balanced", seed)
    allocation = real_load_skew.run("allocation", seed)
    print(
        f"seed {seed}: real-load max/mean: allocation only {allocation['skew']:.3f}, "
        f"balanced {balanced['skew']:.3f} (worst round {balanced['worst']:.2f})"
    )
    assert balanced["failed"] == allocation["failed"] == 0
    assert balanced["skew"] < 1.5
    assert balanced["skew"] < allocation["skew"]


def test_every_policy_sees_the_same_workload():
    assert real_load_skew.workload(3) == real_load_skew.workload(3)
    assert real_load_skew.workload(3) != real_load_skew.workload(4)
    vms = real_load_skew.workload(0)
    assert len(vms) == real_load_skew.BATCHES * real_load_skew.BATCH_SIZE
    assert 0.3 < sum(vm.busy for vm in vms) / len(vms) < 0.4
    assert {vm.lifetime / real_load_skew.BATCH_SECONDS for vm in vms} == set(range(10, 60))


def test_the_simulation_is_deterministic():
    assert real_load_skew.run("balanced", 1, batches=80) == real_load_skew.run("balanced", 1, batches=80)

