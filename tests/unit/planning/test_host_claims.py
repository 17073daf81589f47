"""The claim protocol (scheduler.planning.claims) alone, against a fake database whose other schedulers
the test plays: where instances go when generations conflict, hosts are held, or keep changing."""

import datetime
import logging
import uuid as uuidlib

import pytest

from berth_contract.host_report import HostReport
from berth_contract.request_spec import RequestSpec
from scheduler.conf import opts
from scheduler.exception import NoValidHost
from scheduler.fleet.host_manager import HostManager
from scheduler.planning import claims as claims_mod
from scheduler.planning.claims import HostClaims
from scheduler.planning.plan import Placement
from scheduler.policy.filters import enabled_filters
from scheduler.policy.selection import Selector
from scheduler.policy.weighers import enabled_weighers

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)


class FakeDatabase:
    """Host generations and the instances other schedulers placed, as the database keeps them."""

    def __init__(self):
        self.generations = {}
        self.placed = []  # rows of instances other schedulers placed
        self.held = set()  # hosts another scheduler's transaction holds right now
        self.always_conflict = False
        self.claims = []  # (expected, wait) of each claim_hosts call

    def now(self):
        return NOW

    def claim_hosts(self, expected, wait=False):
        self.claims.append((dict(expected), wait))
        claimed, conflicts, held = set(), set(), set()
        for host, generation in expected.items():
            if host in self.held and not wait:
                held.add(host)
            elif self.always_conflict or self.generations.get(host, 0) != generation:
                conflicts.add(host)
                if self.always_conflict:
                    self.generations[host] = self.generations.get(host, 0) + 1
            else:
                self.generations[host] = generation + 1
                claimed.add(host)
        return claimed, conflicts, held

    def host_generations(self, hosts=None):
        """As the real one: 0 for a host asked for and never claimed."""
        if hosts is None:
            return dict(self.generations)
        return {h: self.generations.get(h, 0) for h in hosts}

    def instances_placed_since(self, hosts, since):
        return [i for i in self.placed
                if (hosts is None or i["host"] in hosts) and i["scheduled_at"] >= since]

    def another_scheduler_places(self, host, memory_mb):
        self.generations[host] = self.generations.get(host, 0) + 1
        self.placed.append({"uuid": str(uuidlib.uuid4()), "host": host, "memory_mb": memory_mb, "root_gb": 1,
                            "ephemeral_gb": 0, "vcpus": 1, "scheduled_at": NOW})


@pytest.fixture
def fleet(conf):
    opts.register_plugin_opts(conf)
    conf.set_override("enabled_filters", ["RamFilter"], "filter_scheduler")
    conf.set_override("weighers", ["RAMWeigher"], "filter_scheduler")
    conf.set_override("ram_allocation_ratio", 1.0, "filter_scheduler")
    hosts = HostManager(conf)
    for host, ram in {"big": 8192, "small": 6144}.items():
        hosts.update_from_report(HostReport.from_wire(
            {"host": host, "memory_mb": ram, "free_ram_mb": ram, "local_gb": 100, "free_disk_gb": 100,
             "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0}, host))
    selector = Selector(enabled_filters(conf), enabled_weighers(conf))
    database = FakeDatabase()
    sleeps = []
    claims = HostClaims(database, hosts, conf.scheduler.service_down_time, sleep=sleeps.append)

    def select(spec):
        return [Placement(uuid, h.host, h.nodename, dict(h.limits))
                for h, uuid in zip(selector.select(hosts.table, spec), spec.instance_uuids, strict=True)]

    return claims, database, hosts, select, sleeps


def spec(memory_mb):
    uuid = str(uuidlib.uuid4())
    return RequestSpec.from_wire({"instance_uuids": [uuid], "num_instances": 1,
                                  "instance_type": {"memory_mb": memory_mb, "root_gb": 1, "vcpus": 1}}, {})


def hosts_of(outcomes):
    return [o if isinstance(o, NoValidHost) else [p.host for p in o] for o in outcomes]


def test_a_host_never_claimed_is_read_first_then_claimed(fleet):
    claims, database, hosts, select, sleeps = fleet
    outcomes = claims.place([spec(1000)], select)
    assert hosts_of(outcomes) == [["big"]]
    # Unknown: nothing to compare with, so read first; then claimed at the generation read.
    assert [expected for expected, _ in database.claims] == [{}, {"big": 0}]
    assert database.generations == {"big": 1} and claims.generations["big"] == 1
    assert sleeps == []


def test_a_conflict_gives_the_room_back_and_counts_what_the_other_placed(fleet):
    claims, database, hosts, select, sleeps = fleet
    claims.learn()
    database.another_scheduler_places("big", 6000)  # this scheduler has not seen it
    outcomes = claims.place([spec(6000)], select)
    assert hosts_of(outcomes) == [["small"]]
    assert hosts.get("big").free_ram_mb == 8192 - 6000  # the other's instance only
    assert hosts.get("small").free_ram_mb == 6144 - 6000
    assert database.generations == {"big": 1, "small": 1}
    assert sleeps == []  # a conflict alone is placed again at once


def test_a_conflict_that_leaves_no_room_is_no_valid_host(fleet):
    claims, database, hosts, select, _ = fleet
    claims.learn()
    database.another_scheduler_places("big", 6000)
    database.another_scheduler_places("small", 6000)
    [outcome] = claims.place([spec(6000)], select)
    assert isinstance(outcome, NoValidHost) and "RamFilter removed 2" in str(outcome)
    assert hosts.get("big").free_ram_mb == 8192 - 6000 and hosts.get("small").free_ram_mb == 6144 - 6000


def test_a_host_another_scheduler_holds_is_skipped_then_waited_for(fleet):
    claims, database, hosts, select, sleeps = fleet
    claims.learn()
    database.held = {"big"}
    [outcome] = claims.place([spec(7000)], select)  # only "big" has room
    assert [p.host for p in outcome] == ["big"]
    waits = [wait for _, wait in database.claims]
    assert waits[-1] is True and not any(waits[:-1])  # skipped while it could, waited for at last
    assert len(waits) == claims_mod.WAIT_AFTER + 1
    assert sleeps and all(s > 0 for s in sleeps)
    assert hosts.get("big").free_ram_mb == 8192 - 7000


def test_a_request_that_fits_elsewhere_does_not_wait_for_a_held_host(fleet):
    claims, database, hosts, select, sleeps = fleet
    claims.learn()
    database.held = {"big"}
    [outcome] = claims.place([spec(1000)], select)
    assert [p.host for p in outcome] == ["small"]
    assert hosts.get("big").free_ram_mb == 8192  # nothing left consumed where it was held
    assert sleeps == []


def test_hosts_that_keep_changing_are_placed_without_a_claim_and_it_is_logged(fleet, caplog):
    claims, database, hosts, select, _ = fleet
    claims.learn()
    database.always_conflict = True
    request = spec(1000)
    with caplog.at_level(logging.WARNING, "scheduler.planning.claims"):
        [outcome] = claims.place([request], select)
    assert len(outcome) == 1
    assert len(database.claims) == claims_mod.CLAIM_ATTEMPTS
    assert "placing them without a claim" in caplog.text and request.instance_uuids[0] in caplog.text
    consumed = 8192 + 6144 - hosts.get("big").free_ram_mb - hosts.get("small").free_ram_mb
    assert consumed == 1000  # placed once, every failed attempt given back


def test_several_requests_are_claimed_together_and_only_the_conflicting_one_moves(fleet):
    claims, database, hosts, select, _ = fleet
    claims.learn()
    first, second = spec(3000), spec(3000)
    database.another_scheduler_places("big", 4000)
    outcomes = claims.place([first, second], select)
    # Both chose "big" (most free RAM as this scheduler saw it); after the conflict it knows
    # big has 4192 MB left: one of them goes there, the other to "small".
    assert sorted(h for hs in hosts_of(outcomes) for h in hs) == ["big", "small"]
    assert hosts.get("big").free_ram_mb + hosts.get("small").free_ram_mb == 8192 + 6144 - 4000 - 6000
