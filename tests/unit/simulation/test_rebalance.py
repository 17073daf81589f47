"""berth simulate --rebalance: the spec checked, and a periodic goal's migrations made in the
simulated fleet, against the same run without it."""

import io
import json

import pytest

from scheduler.cmd import cli
from scheduler.cmd.simulate_command import policy_conf
from scheduler.simulation import engine
from scheduler.simulation.inputs import Arrival, InputError, SimHost
from scheduler.simulation.rebalance import RebalanceSpec, parse

PACK = "[filter_scheduler]\nweighers = RAMWeigher\nram_weight_multiplier = -1.0\nram_allocation_ratio = 1.0\n"
#: The options a spec carries with none given: every option of the goal, with its default.
BALANCE = {"time_limit": 1.0, "max_migrations": 10, "target_skew": 1.15}
CONSOLIDATE = {"time_limit": 1.0, "max_migrations": 10, "headroom": 0.0}
THREE = [SimHost(f"h{i}", 4096, 4, 100) for i in range(3)]
#: Three busy instances of 1 vCPU: packed, all on one host (loads 3, 0, 0: skew 3).
BUSY = [Arrival(at, 1024, 1, 10, None, busy=1.0) for at in (0.0, 1.0, 2.0)]


@pytest.mark.parametrize(("text", "spec"), [
    ("every=1h,goal=balance,max=10", RebalanceSpec(3600.0, "balance", BALANCE)),
    ("goal=balance,every=90", RebalanceSpec(90.0, "balance", BALANCE)),
    ("every=30m,goal=balance,target=1.1", RebalanceSpec(1800.0, "balance", {**BALANCE, "target_skew": 1.1})),
    ("every=1d, goal=consolidate, max=3, headroom=0.2",
     RebalanceSpec(86400.0, "consolidate", {**CONSOLIDATE, "max_migrations": 3, "headroom": 0.2})),
    ("every=45s,goal=consolidate", RebalanceSpec(45.0, "consolidate", CONSOLIDATE)),
])
def test_a_rebalance_spec_says_how_often_which_goal_and_how_many_migrations(text, spec):
    assert parse(text) == spec


@pytest.mark.parametrize(("text", "message"), [
    ("every=1h,goal=spread", "goal must be one of balance, consolidate, got 'spread'"),
    ("goal=balance", "every= is required (e.g. every=1h,goal=balance,max=10)"),
    ("every=1h", "goal= is required"),
    ("every=1w,goal=balance", "every must be a duration above 0 such as 90, 90s, 30m, 1h or 1d, got '1w'"),
    ("every=0,goal=balance", "every must be a duration above 0"),
    ("every=1h,goal=balance,max=0", "max is the most migrations per rebalance, a whole number of at least 1, "
                                    "got '0'"),
    ("every=1h,goal=balance,max=2.5", "got '2.5'"),
    ("every=1h,goal=balance,max=1001", "max must be a whole number from 1 to 1000, got '1001'"),
    ("every=1h,goal=make_room", "goal must be one of balance, consolidate, got 'make_room'"),
    ("every=1h,goal=balance,target=0.5", "target must be a skew of at least 1.0, got '0.5'"),
    ("every=1h,goal=consolidate,headroom=1", "headroom must be a share from 0 to below 1, got '1'"),
    ("every=1h,goal=consolidate,target=1.2",
     "target= is the skew the balance goal stops at; goal is consolidate"),
    ("every=1h,goal=balance,headroom=0.1", "headroom= is kept free by the consolidate goal; goal is balance"),
    ("every=1h,goal=balance,often=2", "unknown key 'often'; known: every, goal, max, target, headroom"),
    ("every=1h,every=2h,goal=balance", "every given twice"),
    ("every=1h,balance", "'balance' is not key=value"),
])
def test_a_bad_rebalance_spec_is_refused_saying_why(text, message):
    with pytest.raises(InputError) as caught:
        parse(text)
    assert str(caught.value).startswith("--rebalance: ") and message in str(caught.value)


@pytest.fixture
def pack(tmp_path):
    path = tmp_path / "pack.conf"
    path.write_text(PACK)
    return path


def test_a_periodic_balance_spreads_the_load_a_packing_policy_piled_up(pack):
    spec = parse("every=30s,goal=balance,max=2,target=1.0")
    alone = engine.run("pack", policy_conf(str(pack)), THREE, BUSY, 60.0)
    balanced = engine.run("pack", policy_conf(str(pack)), THREE, BUSY, 60.0, rebalance=spec)
    assert alone.skews[1:] == [3.0] and alone.rebalance is None
    # at 30 s two instances move off the packed host; at 60 s the load is even: nothing to move
    assert balanced.skews[1:] == [1.0]
    done = balanced.rebalance
    assert (done.runs, done.plans, done.migrations, done.times) == (2, 1, 2, [30.0, 60.0])
    assert (done.skew_before, done.skew_after) == ([3.0, 1.0], [1.0, 1.0])
    assert balanced.final_ram_use == [0.25, 0.25, 0.25]
    assert balanced.placed == alone.placed == 3


def test_a_rebalance_never_moves_more_than_its_max(pack):
    spec = parse("every=30s,goal=balance,max=1,target=1.0")
    balanced = engine.run("pack", policy_conf(str(pack)), THREE, BUSY, 60.0, rebalance=spec)
    done = balanced.rebalance
    assert (done.runs, done.migrations) == (2, 2)  # one at 30 s, one at 60 s
    assert done.skew_after == [2.0, 1.0]


def test_a_consolidation_empties_hosts_a_spreading_policy_used(tmp_path):
    spread = tmp_path / "spread.conf"
    spread.write_text("[filter_scheduler]\nweighers = RAMWeigher\nram_allocation_ratio = 1.0\n")
    spec = parse("every=30s,goal=consolidate,max=5")
    alone = engine.run("spread", policy_conf(str(spread)), THREE, BUSY, 60.0)
    result = engine.run("spread", policy_conf(str(spread)), THREE, BUSY, 60.0, rebalance=spec)
    assert (alone.hosts_used, result.hosts_used) == (3, 1)  # at the report of 60 s
    assert sorted(result.final_ram_use) == [0.0, 0.0, 0.75]
    assert (result.skews[1:], result.rebalance.skew_before) == ([3.0], [1.0, 3.0])
    assert result.rebalance.migrations == 2
    assert result.rebalance.no_plan == {"1 host holds instances: there is no host to empty into another": 1}


def test_the_command_runs_each_policy_without_and_with_the_rebalance(pack, tmp_path):
    workload = tmp_path / "trace.csv"
    workload.write_text("at,lifetime,memory_mb,vcpus,disk_gb,busy\n0,,1024,1,10,1\n1,,1024,1,10,1\n"
                        "2,,1024,1,10,1\n")
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("name,memory_mb,vcpus,disk_gb\n" + "".join(f"h{i},4096,4,100\n" for i in range(3)))
    args = ["simulate", "--fleet", str(fleet), "--workload", str(workload), "--policy", str(pack),
            "--rebalance", "every=30s,goal=balance,max=2,target=1.0"]
    out = io.StringIO()
    assert cli.main([*args, "--json"], out=out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["policy"], r["skew_mean"], r.get("rebalance", {}).get("migrations")) for r in rows] == [
        ("pack", 3.0, None), ("pack + balance", 1.0, 2)]
    out = io.StringIO()
    assert cli.main(args, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[2].split()[:2] == ["pack", "3"] and lines[3].split()[:4] == ["pack", "+", "balance", "3"]
    header = lines[4]
    assert header.split()[:6] == ["policy", "rebalance", "runs", "plans", "migrations", "moved"]
    assert lines[5].split() == ["pack", "+", "balance", "balance", "every", "30s,", "max", "2", "2", "1", "2",
                                "66.7%", "2.000", "->", "1.000", "-"]


def test_the_command_refuses_a_bad_rebalance_spec_with_status_2(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["simulate", "--count", "10", "--rebalance", "every=1h,goal=spread"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --rebalance: goal must be one of balance, consolidate, got 'spread'" in err
