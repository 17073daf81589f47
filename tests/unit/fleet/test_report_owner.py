"""One writer per host report: rendezvous ownership over the live schedulers."""

import datetime

import pytest

from scheduler.fleet.report_owner import ReportOwners, live_schedulers, owner

HOSTS = [f"compute-{i:05d}" for i in range(10_000)]
THREE = ("sched-a", "sched-b", "sched-c")


def owners(schedulers):
    return {host: owner(host, schedulers) for host in HOSTS}


def test_three_schedulers_each_own_about_a_third_of_the_hosts():
    counts = {s: 0 for s in THREE}
    for found in owners(THREE).values():
        counts[found] += 1
    assert all(3000 <= n <= 3700 for n in counts.values()), counts


def test_a_scheduler_leaving_moves_only_its_own_hosts_spread_over_the_others():
    before, after = owners(THREE), owners(("sched-a", "sched-c"))
    moved = {h for h in HOSTS if before[h] != after[h]}
    assert moved == {h for h in HOSTS if before[h] == "sched-b"}
    taken = {s: sum(after[h] == s for h in moved) for s in ("sched-a", "sched-c")}
    assert all(n >= len(moved) * 0.4 for n in taken.values()), taken


def test_a_scheduler_joining_takes_about_a_quarter_and_moves_nothing_else():
    before, after = owners(THREE), owners((*THREE, "sched-d"))
    moved = {h for h in HOSTS if before[h] != after[h]}
    assert all(after[h] == "sched-d" for h in moved)
    assert 2200 <= len(moved) <= 2800


def test_the_owner_does_not_depend_on_the_order_schedulers_are_listed_in():
    assert owners(THREE) == owners(tuple(reversed(THREE)))


def test_no_scheduler_is_a_clear_error():
    with pytest.raises(ValueError, match="no scheduler to own host 'h1'"):
        owner("h1", [])


def test_live_schedulers_are_those_seen_within_the_down_time_and_always_oneself():
    now = datetime.datetime(2026, 1, 1, 12, 0, 0)
    seen = {"a": now - datetime.timedelta(seconds=60), "b": now - datetime.timedelta(seconds=61), "c": None}
    assert live_schedulers(seen, now, 60, "me") == {"a", "me"}
    assert live_schedulers(seen, now, 60, "b") == {"a", "b"}


def test_report_owners_follow_the_live_schedulers():
    mine = ReportOwners("sched-b")
    assert all(mine.owns(h) for h in HOSTS[:100])  # alone until told of others
    mine.set_live(THREE)
    assert [h for h in HOSTS if mine.owns(h)] == [h for h, s in owners(THREE).items() if s == "sched-b"]
    mine.set_live(("sched-a", "sched-c"))  # never without itself
    assert mine.live == set(THREE)
