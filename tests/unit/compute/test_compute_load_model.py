"""The fake driver's simulated load and reservation figures, and their trip to the scheduler."""

import uuid

import pytest

from berth_contract.host_report import HostReport
from compute_agent import driver as drivers
from compute_agent import load_model
from compute_agent.resource_tracker import ResourceTracker
from scheduler.policy.host_state import HostTable

VM = {"memory_mb": 1000, "root_gb": 0, "ephemeral_gb": 0, "vcpus": 4}


def instances(n, seed=0):
    return {str(uuid.UUID(int=seed * 100_000 + i)): dict(VM) for i in range(n)}


def test_an_idle_host_measures_only_its_hidden_load():
    figures = load_model.simulated_load({}, 16, 8000, hidden_cpu_load=4, reserved_memory_mb=500)
    assert figures["load"].cpu_utilization == 0.25
    assert figures["load"].memory_mb_in_use == 500
    assert figures["load"].cpu_reserved == 0 and figures["load"].cpu_burst == 0


def test_busy_and_idle_instances():
    vms = instances(200)
    figures = load_model.simulated_load(
        vms, 10_000, 10**7, busy_fraction=0.35, idle_cpu_load=0.0, idle_memory_fraction=0.5
    )
    busy_cores = figures["load"].cpu_utilization * 10_000
    busy = busy_cores / 4
    assert 50 <= busy <= 90  # about 35% of 200
    assert figures["load"].memory_mb_in_use == busy * 1000 + (200 - busy) * 500


def test_the_load_is_deterministic_per_seed_and_uuid():
    vms = instances(50)
    same = [load_model.simulated_load(vms, 10_000, 10**6, busy_fraction=0.5, seed=7) for _ in range(2)]
    other = load_model.simulated_load(vms, 10_000, 10**6, busy_fraction=0.5, seed=8)
    assert same[0]["load"].cpu_utilization == same[1]["load"].cpu_utilization
    assert other["load"].cpu_utilization != same[0]["load"].cpu_utilization


def test_utilisation_is_capped_at_the_real_cores():
    figures = load_model.simulated_load(instances(10), 4, 10**6, busy_fraction=1.0)
    assert figures["load"].cpu_utilization == 1.0


def test_reservations_bursts_and_undeployed_reservations():
    vms = instances(40)
    figures = load_model.simulated_load(
        vms, 64, 10**6, reservation_fraction=0.25, powered_off_fraction=0.5, reserved_cpus=2
    )
    off = figures["load"].cpu_undeployed_reservation / (4 * 0.25)
    on = 40 - off
    assert 0 < off < 40
    assert figures["load"].cpu_reserved == pytest.approx(2 + on * 4 * 0.25)
    assert figures["load"].cpu_burst == pytest.approx(on * 4 * 0.75)
    assert figures["load"].memory_undeployed_reservation_mb == pytest.approx(off * 1000 * 0.25)


def test_the_fake_agents_report_carries_the_figures_and_the_scheduler_takes_them(conf):
    conf.set_override("busy_fraction", 1.0, "fake")
    conf.set_override("hidden_cpu_load", 4.0, "fake")
    conf.set_override("reservation_fraction", 0.5, "fake")
    driver = drivers.load_driver(conf)
    tracker = ResourceTracker.from_conf(conf, "h1", "h1", driver)
    tracker.claim("00000000-0000-4000-8000-0000000000a1", VM)
    report = tracker.report()
    assert report["cpu_utilization"] == (4 + 4) / 16
    assert report["cpu_reserved"] == 2 and report["cpu_burst"] == 2
    assert report["memory_mb_in_use"] == 512 + 1000
    assert report["utilization_sampled_at"]
    table = HostTable()
    row = table.add("h1")
    table.update_from_report(row, HostReport.from_wire(report, "h1"), now=0.0)
    assert table.cpu_util[row] == 0.5 and table.util_measured[row]
    assert table.memory_reserved_mb[row] == 512 + 500


def test_drivers_without_a_load_model_report_none(conf):
    tracker = ResourceTracker("h1", {"memory_mb": 1, "local_gb": 1, "vcpus": 1})
    assert "cpu_utilization" not in tracker.report()
    assert not hasattr(drivers.load_driver(conf, "host"), "measure")
