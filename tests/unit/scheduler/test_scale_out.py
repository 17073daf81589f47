"""The scale-out benchmark's simulation (benchmarks/scale_out.py): its claim model answers as
ClaimQueries does, one simulated scheduler places what the selector places, and two that race
for one host meet a claim conflict."""

import json
import random
import uuid as uuidlib

import pytest

from benchmarks import scale_out
from benchmarks.claim_model import ClaimModel
from benchmarks.decisions import policy_conf
from benchmarks.sim_clock import SimClock
from berth_contract.host_report import HostReport
from scheduler import states
from scheduler.db import api as db_api
from scheduler.fleet.host_manager import HostManager
from scheduler.policy import filters, weighers
from scheduler.policy.selection import Selector

HOSTS = [f"h{i}" for i in range(6)]


@pytest.fixture
def database(tmp_path):
    database = db_api.Database(f"sqlite:///{tmp_path}/berth.sqlite", max_retries=2, retry_interval=0.0)
    database.sync()
    yield database
    database.dispose()


def test_the_claim_model_answers_as_claim_queries(database):
    model = ClaimModel(SimClock())
    session = model.session()
    rng = random.Random(5)
    for step in range(300):
        known = database.host_generations(HOSTS)
        expected = {host: rng.choice([known[host], known[host], 0, known[host] + 1, max(known[host] - 1, 0)])
                    for host in rng.sample(HOSTS, rng.randint(0, len(HOSTS)))}
        assert session.claim_hosts(expected) == database.claim_hosts(expected), step
        if step % 7 == 0:
            host = rng.choice(HOSTS)
            row = {"uuid": str(uuidlib.UUID(int=step + 1)), "host": host, "memory_mb": 512, "root_gb": 1,
                   "ephemeral_gb": 0, "vcpus": 1}
            database.create_instances([dict(row, state=states.SCHEDULED)])
            session.commit([row])
        else:
            session.commit()
        subset = rng.sample(HOSTS, 3)
        assert session.host_generations(subset) == database.host_generations(subset)
        assert session.host_generations() == database.host_generations()
        since = database.now()
        assert (sorted(r["uuid"] for r in session.instances_placed_since(subset, since))
                == sorted(r["uuid"] for r in database.instances_placed_since(subset, since)))


def test_a_claimed_host_is_held_for_the_others_until_its_scheduler_commits():
    model = ClaimModel(SimClock())
    first, second = model.session(), model.session()
    assert first.claim_hosts({"h0": 0, "h1": 0}) == ({"h0", "h1"}, set(), set())
    assert second.claim_hosts({"h0": 0, "h2": 0}) == ({"h2"}, set(), {"h0"})
    assert second.host_generations(["h0"]) == {"h0": 0}  # not committed yet
    first.commit()
    assert second.claim_hosts({"h0": 0}) == (set(), {"h0"}, set())
    assert second.claim_hosts({"h0": 1}) == ({"h0"}, set(), set())


def test_one_simulated_scheduler_places_what_the_selector_places():
    settings = scale_out.Settings(hosts=40, schedulers=1, requests=400, batch_size=16,
                                  decision_ms=0.1, seed=3)
    reports = scale_out.fleet_reports(settings.hosts, settings.seed)
    row_and_placements = scale_out.Simulation(settings, reports)
    row = row_and_placements.run()
    assert (row["placed"], row["refused"], row["conflicts"]) == (400, 0, 0)
    assert row["decisions_per_placement"] == 1.0

    conf = policy_conf({})
    hosts = HostManager(conf)
    for report in reports:
        hosts.update_from_report(HostReport.from_wire(report, report["host"]), now=0.0)
    selector = Selector(filters.enabled_filters(conf), weighers.enabled_weighers(conf),
                        conf.filter_scheduler.host_subset_size, random.Random(settings.seed * 7919))
    hosts.table.clock = lambda: 0.0
    alone = [(spec.instance_uuids[0], selector.select(hosts.table, spec)[0].host)
             for spec in scale_out.requests(settings.requests, settings.seed)]
    assert row_and_placements.placements == alone
    assert len({host for _, host in alone}) > 20  # spread over the fleet, not one host


def one_big_host(count):
    """Reports of ``count`` hosts: "big" far emptier than the others, every scheduler's first choice."""
    return [dict(report, host="big" if i == 0 else f"small-{i}", free_ram_mb=memory, memory_mb=memory)
            for i, (report, memory) in enumerate(zip(scale_out.fleet_reports(count),
                                                     [262144] + [65536] * (count - 1), strict=True))]


@pytest.mark.parametrize(("hosts", "owners", "conflicts"),
                         [(2, False, 1), (40, False, 1), (40, True, 0),
                          (2, True, 1)])  # two hosts: too few for each to prefer its own
def test_two_schedulers_racing_for_one_host_meet_a_conflict_unless_each_prefers_its_own(hosts, owners,
                                                                                       conflicts):
    # One request every 10 ms, one per batch: the second scheduler takes the second request
    # before any report tells it of the first placement.
    settings = scale_out.Settings(hosts=hosts, schedulers=2, requests=2, rate=100.0, batch_size=1,
                                  decision_ms=0.1, report_interval=1000.0, report_min_interval=None,
                                  owners=owners)
    simulation = scale_out.Simulation(settings, one_big_host(hosts))
    row = simulation.run()
    assert (row["placed"], row["overfilled_hosts"]) == (2, 0)
    chosen = [host for _, host in simulation.placements]
    if conflicts:
        # Both chose "big"; the second's claim conflicted, it read the first's placement and
        # decided again.
        assert (row["conflicts"], row["decisions_per_placement"]) == (1, 1.5)
        assert chosen == ["big", "big"]
    else:
        # The owner of "big" takes it, the other the heaviest of its own hosts: no conflict.
        assert (row["conflicts"], row["decisions_per_placement"]) == (0, 1.0)
        assert "big" in chosen and len(set(chosen)) == 2


def test_the_section_prints_a_row_per_fleet_and_scheduler_count(capsys):
    from benchmarks.__main__ import main

    assert main(["--skip", "decision,reference,traits,ingestion,memory,reports,scaling,moves,make_room,"
                 "balance,rebalance_goals,e2e",
                 "--scale-out-hosts", "30", "--scale-out-schedulers", "1,2", "--scale-out-requests", "60",
                 "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["bench"], r["n_hosts"], r["schedulers"], r["placed"] + r["refused"]) for r in rows] == [
        ("scale-out", 30, 1, 60), ("scale-out", 30, 2, 60)]
    assert rows[0]["free_ram_std_vs_one"] == 1.0 and rows[1]["free_ram_std_vs_one"] > 0
    assert all(r["placements_per_s"] > 0 and r["decisions_per_placement"] >= 1 for r in rows)
