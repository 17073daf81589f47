"""The balanced policy on CloudStack's churning, overcommitted fleet (benchmarks.simulation)."""

import pytest

from benchmarks import simulation


@pytest.mark.parametrize("seed", simulation.SEEDS)
def test_balanced_spreads_the_real_load_better_than_allocation_alone(seed):
    balanced = simulation.run("balanced", seed)
    allocation = simulation.run("allocation", seed)
    print(
        f"seed {seed}: real-load max/mean: allocation only {allocation['skew']:.3f}, "
        f"balanced {balanced['skew']:.3f} (worst batch {balanced['worst']:.2f})"
    )
    assert balanced["failed"] == allocation["failed"] == 0
    assert balanced["skew"] < 1.5
    assert balanced["skew"] < allocation["skew"]


def test_every_policy_sees_the_same_workload():
    assert simulation.workload(3) == simulation.workload(3)
    assert simulation.workload(3) != simulation.workload(4)
    vms = [vm for batch in simulation.workload(0) for vm in batch]
    assert len(vms) == simulation.BATCHES * simulation.BATCH_SIZE
    assert 0.3 < sum(vm.busy for vm in vms) / len(vms) < 0.4
    assert {vm.lifetime for vm in vms} == set(range(10, 60))


def test_the_simulation_is_deterministic():
    assert simulation.run("balanced", 1, batches=80) == simulation.run("balanced", 1, batches=80)


def test_the_table_prints(capsys):
    simulation.main(["0"])
    out = capsys.readouterr().out
    assert "allocation" in out and "balanced" in out
