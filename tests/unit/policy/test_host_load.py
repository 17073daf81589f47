"""Measured load and reservation figures in the HostTable (scheduler.policy.host_load)."""

import math

import numpy as np
import pytest

from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor
from scheduler.exception import InvalidRequest
from scheduler.fleet.host_manager import HostManager
from scheduler.policy import host_load
from scheduler.policy.host_state import HostTable


def report(cpu=None, in_use=None, stamp=None, memory=1000, **extra):
    resources = {
        "host": "h",
        "memory_mb": memory,
        "free_ram_mb": memory,
        "local_gb": 100,
        "free_disk_gb": 100,
        "vcpus": 10,
        "vcpus_used": 0,
        "instance_uuids": [],
    }
    if cpu is not None:
        resources["cpu_utilization"] = cpu
    if in_use is not None:
        resources["memory_mb_in_use"] = in_use
    if stamp is not None:
        resources["utilization_sampled_at"] = stamp
    resources.update(extra)
    return resources


@pytest.fixture
def load_table():
    table = HostTable()
    table.add("h")
    return table


def test_first_sample_is_taken_as_is(load_table):
    load_table.update_from_report(0, report(0.8, 250, "t0"), now=100.0)
    assert load_table.cpu_util[0] == 0.8
    assert load_table.mem_util[0] == 0.25
    assert load_table.util_measured[0] and load_table.util_at[0] == 100.0


def test_after_one_half_life_the_average_is_half_way(load_table):
    load_table.update_from_report(0, report(0.0, 0, "t0"), now=0.0)
    load_table.update_from_report(0, report(1.0, 1000, "t1"), now=300.0)
    assert load_table.cpu_util[0] == pytest.approx(0.5)
    assert load_table.mem_util[0] == pytest.approx(0.5)


def test_a_single_spike_does_not_dominate(load_table):
    load_table.update_from_report(0, report(0.1, 100, "t0"), now=0.0)
    load_table.update_from_report(0, report(1.0, 100, "t1"), now=10.0)
    assert load_table.cpu_util[0] < 0.13


def test_a_missed_poll_decays_by_elapsed_time_not_by_sample_count():
    one, two = HostTable(), HostTable()
    for table in (one, two):
        table.add("h")
        table.update_from_report(0, report(0.0, 0, "t0"), now=0.0)
    one.update_from_report(0, report(1.0, 0, "a"), now=200.0)
    one.update_from_report(0, report(1.0, 0, "b"), now=400.0)
    two.update_from_report(0, report(1.0, 0, "b"), now=400.0)
    assert one.cpu_util[0] == pytest.approx(two.cpu_util[0])
    assert two.cpu_util[0] == pytest.approx(1 - 2 ** (-400 / 300))


def test_the_average_converges(load_table):
    for i in range(50):
        load_table.update_from_report(0, report(0.6, 600, f"t{i}"), now=60.0 * i)
    assert load_table.cpu_util[0] == pytest.approx(0.6)


def test_an_unchanged_reading_is_not_folded_twice(load_table):
    load_table.update_from_report(0, report(0.0, 0, "t0"), now=0.0)
    load_table.update_from_report(0, report(1.0, 0, "t1"), now=300.0)
    load_table.update_from_report(0, report(1.0, 0, "t1"), now=600.0)  # the agent re-sent it
    assert load_table.cpu_util[0] == pytest.approx(0.5)
    assert load_table.util_at[0] == 300.0


def test_a_host_repeating_one_reading_goes_stale(load_table):
    load_table.update_from_report(0, report(0.3, 0), now=0.0)
    for now in (300.0, 600.0, 900.0):
        load_table.update_from_report(0, report(0.3, 0), now=now)
    measured = host_load.measured(load_table.util_measured, load_table.util_at, 900.0, 600.0)
    assert not measured[0]


def test_a_sample_after_staleness_is_folded_in(load_table):
    load_table.update_from_report(0, report(0.9, 0, "t0"), now=0.0)
    load_table.update_from_report(0, report(0.1, 0, "t1"), now=5000.0)
    # The old average keeps 2 ** (-5000 / 300) of its weight: folded in, not dropped.
    assert load_table.cpu_util[0] == pytest.approx(0.1 + 0.8 * 2 ** (-5000 / 300), rel=0, abs=1e-12)
    assert load_table.cpu_util[0] != 0.1


def test_missing_metrics_leave_the_host_unmeasured(load_table):
    load_table.update_from_report(0, report(cpu=0.5), now=0.0)  # no memory in use
    load_table.update_from_report(0, report(), now=1.0)
    assert not load_table.util_measured[0]


def test_time_is_passed_in_and_the_half_life_is_the_tables():
    table = HostTable()
    table.add("h")
    table.load_half_life = 60.0
    table.update_from_report(0, report(0.0, 0, "a"), now=0.0)
    table.update_from_report(0, report(1.0, 0, "b"), now=60.0)
    assert table.cpu_util[0] == pytest.approx(0.5)


def test_host_manager_takes_half_life_and_staleness_from_the_options(policy_conf):
    policy_conf.set_override("load_half_life", 30.0, "filter_scheduler")
    policy_conf.set_override("load_stale_after", 45.0, "filter_scheduler")
    manager = HostManager(policy_conf)
    assert (manager.table.load_half_life, manager.table.load_stale_after) == (30.0, 45.0)


def test_reservation_figures_are_nan_until_reported_and_follow_placements(load_table):
    load_table.update_from_report(0, report(), now=0.0)
    assert np.isnan(load_table.cpu_reserved[0]) and np.isnan(load_table.memory_burst_mb[0])
    load_table.update_from_report(
        0,
        report(cpu_reserved=4, memory_reserved_mb=512.0, cpu_burst=2, memory_undeployed_reservation_mb=64),
        now=1.0,
    )
    assert load_table.cpu_reserved[0] == 4 and load_table.memory_undeployed_mb[0] == 64
    flavor = Flavor(memory_mb=128, root_gb=1, ephemeral_gb=0, vcpus=2)
    load_table.consume(0, "u1", flavor, now=2.0)
    assert load_table.cpu_reserved[0] == 6 and load_table.memory_reserved_mb[0] == 640
    view = load_table.view(0)
    assert view.cpu_burst == 2 and math.isnan(view.cpu_undeployed)
    load_table.release(0, "u1")
    assert load_table.cpu_reserved[0] == 4


def test_recent_starts_count_placements_within_the_window(load_table):
    load_table.update_from_report(0, report(), now=0.0)
    flavor = Flavor(memory_mb=1, root_gb=0, ephemeral_gb=0, vcpus=1)
    load_table.clock = lambda: 1000.0
    load_table.consume(0, "old", flavor, now=100.0)
    load_table.consume(0, "new", flavor)  # at the table's clock
    load_table.consume(0, "gone", flavor, now=990.0)
    load_table.release(0, "gone")  # rolled back: not a start
    assert host_load.recent_starts(load_table, np.array([0]), 300.0, 1000.0)[0] == 1
    assert load_table.view(0).recent_starts(1000.0, 1000.0) == 2


def test_old_starts_are_forgotten(load_table):
    flavor = Flavor(memory_mb=1, root_gb=0, ephemeral_gb=0, vcpus=1)
    load_table.consume(0, "a", flavor, now=0.0)
    load_table.consume(0, "b", flavor, now=host_load.STARTS_HORIZON + 10)
    assert list(load_table.starts[0]) == ["b"]


def test_the_starts_past_the_horizon_go_and_the_rest_stay_however_many(load_table):
    flavor = Flavor(memory_mb=1, root_gb=0, ephemeral_gb=0, vcpus=1)
    for i in range(500):
        load_table.consume(0, f"u{i}", flavor, now=float(i))
    load_table.consume(0, "late", flavor, now=host_load.STARTS_HORIZON + 249.5)
    assert list(load_table.starts[0]) == [f"u{i}" for i in range(250, 500)] + ["late"]
    assert host_load.recent_starts(load_table, np.array([0]), 2 * host_load.STARTS_HORIZON,
                                   host_load.STARTS_HORIZON + 249.5)[0] == 251


def test_a_start_a_stepped_back_clock_put_behind_a_later_one_goes_once_it_is_first(load_table):
    flavor = Flavor(memory_mb=1, root_gb=0, ephemeral_gb=0, vcpus=1)
    load_table.consume(0, "a", flavor, now=100.0)
    load_table.consume(0, "b", flavor, now=50.0)  # the clock stepped back
    load_table.consume(0, "c", flavor, now=host_load.STARTS_HORIZON + 75.0)
    assert list(load_table.starts[0]) == ["a", "b", "c"]  # b is past the horizon, behind a
    load_table.consume(0, "d", flavor, now=host_load.STARTS_HORIZON + 110.0)
    assert list(load_table.starts[0]) == ["c", "d"]
    assert host_load.recent_starts(load_table, np.array([0]), 2 * host_load.STARTS_HORIZON,
                                   host_load.STARTS_HORIZON + 110.0)[0] == 2


@pytest.mark.parametrize(
    "key",
    ["cpu_utilization", "memory_mb_in_use", "cpu_reserved", "memory_burst_mb", "cpu_undeployed_reservation"],
)
@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "0.5"])
def test_bad_load_figures_are_refused(key, bad):
    with pytest.raises(InvalidRequest, match=key):
        HostReport.from_wire(report(**{key: bad}), "h")


def test_a_good_load_report_is_accepted():
    HostReport.from_wire(report(0.5, 100, "2026-01-01T00:00:00Z", cpu_reserved=1, cpu_burst=0.5), "h")


def test_reservation_figures_a_host_stops_reporting_are_forgotten(load_table):
    load_table.update_from_report(0, HostReport.from_wire(report(cpu_reserved=2.0), "h"), now=0.0)
    assert load_table.cpu_reserved[0] == 2.0
    load_table.update_from_report(0, HostReport.from_wire(report(), "h"), now=1.0)
    assert math.isnan(load_table.cpu_reserved[0])
