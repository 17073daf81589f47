"""The fragmentation hint's policy: what it says of a refused request, and only what it found or proved."""

import itertools
import time

import pytest

from berth_contract.host_report import HostReport
from berth_contract.request_spec import Flavor, RequestSpec
from berth_contract.resource_classes import DISK_GB, MEMORY_MB, VCPU
from scheduler.moves.rebalance import Resident, Snapshot
from scheduler.moves.rebalance import hint as hint_module
from scheduler.moves.rebalance.hint import Hint, NoHint, fragmentation
from scheduler.moves.rebalance.judge import request_for
from scheduler.policy.host_state import HostTable

GB = 1024


def flavor(memory_mb, name=None):
    return Flavor(memory_mb=memory_mb, root_gb=10, ephemeral_gb=0, vcpus=1, name=name)


def fleet(hosts):
    """(an empty Snapshot of ``hosts`` {name: [memory of each instance]}, 16 GB each, and the
    residents_of that reads their instances, recording the hosts asked for)."""
    table = HostTable()
    now = time.monotonic()
    residents = {}
    counter = itertools.count()
    for host, sizes in hosts.items():
        row = table.add(host)
        table.update_from_report(row, HostReport.trusted({
            "host": host, "memory_mb": 16 * GB, "free_ram_mb": 16 * GB - sum(sizes), "local_gb": 500,
            "free_disk_gb": 500 - 10 * len(sizes), "vcpus": 16, "vcpus_used": len(sizes), "running_vms": 0,
            "instance_uuids": []}), now)
        residents[host] = []
        for size in sizes:
            uuid = f"00000000-0000-4000-8000-{next(counter):012d}"
            spec = RequestSpec(instance_uuids=[uuid], flavor=flavor(size))
            residents[host].append(Resident(uuid, host, spec, load=size / (4 * GB)))
    asked = []

    def residents_of(names):
        asked.extend(names)
        return [r for name in names for r in residents[name]]

    return Snapshot(table, [], {VCPU: 4.0, MEMORY_MB: 1.0, DISK_GB: 1.0}), residents_of, asked


def hint(snapshot, residents_of, enabled, memory_mb, time_limit=10.0, clock=time.monotonic):
    spec = request_for(flavor(memory_mb, "big"), 1)
    return fragmentation(snapshot, spec, enabled, residents_of, time_limit, clock)


def test_every_host_freed_is_counted_and_the_fewest_proven(enabled):
    snapshot, residents_of, _ = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB],
                                       "h3": [8 * GB, 4 * GB]})
    found = hint(snapshot, residents_of, enabled, 8 * GB)
    assert found == Hint(hosts=3, all_counted=True, examined=3, possible=3, migrations=1, memory_mb=2 * GB,
                         fewest=True, fewest_migrations=True)
    assert found.text(flavor(8 * GB, "big")) == (
        "fragmentation: 3 hosts would have room after moving instances off them (fewest: 1 migration, 2 GB); "
        "`berth rebalance plan --make-room big`")
    # the table is as it was
    assert list(snapshot.table.free_ram_mb) == [4 * GB, 6 * GB, 4 * GB]


def test_two_migrations_proven_the_fewest_when_every_host_needs_two(enabled):
    # 4 GB free on each; 9 GB asked: each host must lose two instances
    snapshot, residents_of, _ = fleet({"h1": [3 * GB] * 4, "h2": [3 * GB] * 4,
                                       "h3": [4 * GB, 4 * GB, 4 * GB]})
    found = hint(snapshot, residents_of, enabled, 9 * GB)
    assert (found.migrations, found.memory_mb, found.fewest) == (2, 6 * GB, True)
    assert "(fewest: 2 migrations, 6 GB)" in found.text(flavor(9 * GB, "big"))


def test_when_the_time_runs_out_it_says_at_least_and_how_many_hosts_were_examined(enabled):
    snapshot, residents_of, asked = fleet({f"h{i}": [6 * GB, 6 * GB] for i in range(12)}
                                          | {"h12": [6 * GB, 2 * GB, 2 * GB]})
    ticks = itertools.count()
    found = hint(snapshot, residents_of, enabled, 8 * GB, time_limit=2, clock=lambda: float(next(ticks)))
    assert isinstance(found, Hint) and found.examined < found.possible == 13
    # the host closest to fitting (h12: 6 GB free) is examined first
    assert asked[0] == "h12" and len(asked) == hint_module.CHUNK
    assert found.text(flavor(8 * GB, "big")) == (
        "fragmentation: at least 1 host would have room after moving instances off it (fewest: 1 migration, "
        "at most 2 GB; 1 of 13 hosts examined within the time limit); `berth rebalance plan --make-room big`")


def test_a_time_limit_of_0_examines_nothing(enabled):
    snapshot, residents_of, asked = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]})
    found = hint(snapshot, residents_of, enabled, 8 * GB, time_limit=0)
    assert found == NoHint(
        "the time limit ran out after 0 of 2 hosts, none found that migrations free for it", timed_out=True)
    assert asked == []


@pytest.mark.parametrize(("memory_mb", "reason"), [
    (20 * GB, "no host it may use is large enough even empty"),
    (12 * GB, "the hosts it may use have 10240 MEMORY_MB free in total, less than its 12288: migrations move "
              "room, they make none"),
])
def test_no_hint_when_room_is_lacking_whatever_moves(enabled, memory_mb, reason):
    snapshot, residents_of, asked = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]})
    assert hint(snapshot, residents_of, enabled, memory_mb) == NoHint(reason)
    assert asked == []  # decided on the table's figures: no instance read


def test_no_hint_when_another_filter_refuses_every_host(enabled):
    snapshot, residents_of, _ = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]})
    spec = request_for(flavor(8 * GB, "big"), 1)
    spec.group = {"uuid": "g", "policy": "anti-affinity", "rules": {}, "members": ["m1", "m2"],
                  "placed": ["m1", "m2"], "hosts": {"h1": 1, "h2": 1}}
    found = fragmentation(snapshot, spec, enabled, residents_of, 10.0)
    assert isinstance(found, NoHint) and "ServerGroupAntiAffinityFilter removed 2" in found.reason


def test_a_request_of_several_instances_gets_no_hint(enabled):
    snapshot, residents_of, _ = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]})
    found = fragmentation(snapshot, request_for(flavor(8 * GB), 2), enabled, residents_of, 10.0)
    assert found == NoHint("a request of several instances (the hint is for one)")


def test_residents_added_later_count_as_those_given_at_first():
    at_first, residents_of, _ = fleet({"h1": [6 * GB, 6 * GB], "h2": [6 * GB, 2 * GB, 2 * GB]})
    every = residents_of(["h1", "h2"])
    whole = Snapshot(at_first.table, every, at_first.ratios)
    at_first.add(every[:2])
    at_first.add(every[2:])
    assert list(at_first.load) == list(whole.load) and at_first.load.any()
    assert {row: [r.uuid for r in rs] for row, rs in at_first.on_host.items()} == {
        row: [r.uuid for r in rs] for row, rs in whole.on_host.items()}
    with pytest.raises(ValueError, match="is held already"):
        at_first.add(every[:1])
