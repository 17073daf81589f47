"""python -m benchmarks prints the figures it promises."""

import json
import re
from pathlib import Path

import pytest

from benchmarks import moves
from benchmarks.__main__ import main
from scheduler.moves.api import MoveEndpoint

ONLY_MOVES = ["--skip", "decision,reference,traits,ingestion,memory,reports,scaling,scale-out,e2e,make_room,"
              "balance,rebalance_goals",
              "--moves-hosts", "10",
              "--moves-instances", "5", "--moves-repeats", "1"]


def test_json_rows_carry_the_documented_keys(capsys):
    assert main(["--hosts", "50,200", "--decisions", "5", "--reference-hosts", "50",
                 "--ingest-hosts", "100", "--traits-hosts", "300",
                 "--skip", "e2e,reports,scaling,moves,scale-out,make_room,balance,rebalance_goals",
                 "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    decisions = [r for r in rows if r["bench"] == "decision"]
    assert {(r["n_hosts"], r["policy"]) for r in decisions} >= {
        (50, "default"), (200, "default"), (50, "all"), (50, "default (per-host reference)")}
    for row in decisions:
        assert row["median_ms"] > 0 and row["p99_ms"] >= row["median_ms"]
        assert row["decisions_per_s"] > 0
    [ingestion] = [r for r in rows if r["bench"] == "ingestion"]
    assert ingestion["reports_per_s"] > 0
    [memory] = [r for r in rows if r["bench"] == "memory"]
    assert memory["n_hosts"] == 200 and 0 < memory["bytes_per_host"] < 100_000
    [traits] = [r for r in rows if r["bench"] == "traits"]
    assert traits["n_hosts"] == 300 and traits["decisions"] == 5
    assert 0 < traits["decision_ms_q1"] <= traits["median_ms"] <= traits["decision_ms_q3"]
    assert 0 < traits["new_filters_ms_q1"] <= traits["new_filters_ms_median"] <= traits["new_filters_ms_q3"]


def test_table_output_has_a_header_and_a_row_per_figure(capsys):
    assert main(["--hosts", "30", "--decisions", "3", "--policies", "default",
                 "--skip", "e2e,reference,traits,ingestion,memory,reports,scaling,moves,scale-out,"
                 "make_room,balance,rebalance_goals"]) == 0
    lines = capsys.readouterr().out.splitlines()
    speed = re.search(r"; reference loop ([0-9.]+) us \(sum\(range\(1000\)\), best of 5\)$", lines[0])
    assert speed and float(speed.group(1)) > 0, lines[0]
    assert lines[1].split()[:3] == ["bench", "hosts", "policy"]
    assert lines[2].split()[:3] == ["decision", "30", "default"]


@pytest.mark.parametrize(("args", "message"), [
    (["--hosts", "ten"], "comma-separated list of host counts"),
    (["--hosts", "0"], "host counts must be positive"),
    (["--policies", "fastest"], "unknown policy fastest"),
    (["--moves-hosts", "1"], "a drain needs at least 2 hosts"),
    (["--moves-instances", "0"], "--moves-instances"),
    (["--make-room-seeds", "0"], "--make-room-seeds"),
    (["--reports-backends", "sqlite,oracle"],
     "backends are a comma-separated list of sqlite, postgresql, got 'sqlite,oracle'"),
])
def test_bad_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit):
        main(args)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("parallel", [1, 3])
def test_a_drain_prints_its_decision_call_and_rate_figures(capsys, parallel):
    assert main([*ONLY_MOVES, "--moves-parallel", str(parallel), "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["bench"], row["n_hosts"], row["instances"], row["moves"], row["parallel"]) == (
        "moves", 10, 5, 5, parallel)
    assert row["policy"] == ("default, drain one by one" if parallel == 1 else "default, drain 3 at a time")
    assert 0 < row["decision_ms_q1"] <= row["decision_ms_median"] <= row["decision_ms_q3"]
    assert 0 < row["migrate_ms_q1"] <= row["migrate_ms_median"] <= row["migrate_ms_q3"]
    # each migrate_instance call holds its decision
    assert row["migrate_ms_median"] > row["decision_ms_median"]
    assert row["median_ms"] == row["migrate_ms_median"] <= row["p99_ms"]
    assert 0 < row["migrate_cpu_ms_median"]
    assert 0 < row["moves_per_s_min"] == row["moves_per_s_median"] == row["moves_per_s_max"]


def test_a_drain_in_the_table_says_its_figures_and_their_spread(capsys):
    assert main(ONLY_MOVES) == 0
    [line] = capsys.readouterr().out.splitlines()[2:]
    assert line.split()[:5] == ["moves", "10", "default,", "drain", "one"]
    assert "5 moves: decision " in line and "migrate_instance " in line
    assert "(IQR " in line and "; CPU " in line
    assert " moves/s (" in line and line.endswith("median of 1 drains")


def test_a_drain_that_leaves_instances_on_the_source_prints_no_figures(capsys, monkeypatch):
    monkeypatch.setattr(MoveEndpoint, "move_update", lambda *args, **kwargs: None)  # no move ends
    with pytest.raises(RuntimeError, match="the drain left 5 instance\\(s\\) on bench-0000"):
        main([*ONLY_MOVES, "--json"])
    assert capsys.readouterr().out == ""


def test_a_destination_over_its_limits_fails_the_check(tmp_path):
    fleet = moves.Fleet(str(tmp_path), 10, 5)
    try:
        drained = moves.drain(fleet)
        moves.check(fleet, drained["migrations"])  # as drained: within the limits
        dest = drained["migrations"][0]["dest_host"]
        size, _ = fleet.hosts[dest]
        fleet.hosts[dest] = (size, 1.0)  # had its report said it was full, the moves overfill it
        with pytest.raises(RuntimeError, match=f"{dest} holds .* after the drain, over its limit"):
            moves.check(fleet, drained["migrations"])
    finally:
        fleet.close()


def test_the_reports_of_a_fleet_on_one_of_three_schedulers_print_their_cpu(capsys):
    assert main(["--skip", "decision,reference,traits,ingestion,memory,scaling,moves,scale-out,make_room,"
                 "balance,rebalance_goals,e2e",
                 "--reports-hosts", "300", "--reports-periods", "2", "--reports-backends", "sqlite",
                 "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["bench"] == "reports" and row["n_hosts"] == 300 and row["schedulers"] == 3
    assert row["reports_per_s"] == 30 and row["reports_per_period"] == 150  # 5 s of reports
    # About a third of the hosts' reports are this scheduler's to write, once every host has a row.
    assert 20 <= row["rows_written_per_period"] <= 80
    assert len(row["cpu_ms_per_s"]) == 2 and all(v > 0 for v in row["cpu_ms_per_s"])
    assert row["total_cpu_ms_per_s"] == row["cpu_ms_per_s"] and row["server_ms_per_period"] is None
    assert row["first_round_cpu_s"] > 0 and row["ingestion_us_per_report"] > 0
    main(["--skip", "decision,reference,traits,ingestion,memory,scaling,moves,scale-out,make_room,balance,"
          "rebalance_goals,e2e",
          "--reports-hosts", "300", "--reports-periods", "1", "--reports-backends", "sqlite"])
    assert "ms CPU per s of reports" in capsys.readouterr().out


def test_making_room_prints_how_often_and_how_fast_plans_are_found(capsys):
    assert main(["--skip", "decision,reference,traits,ingestion,memory,reports,scaling,moves,scale-out,"
                 "balance,rebalance_goals,e2e",
                 "--make-room-hosts", "60", "--make-room-seeds", "3", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["bench"], row["n_hosts"], row["seeds"]) == ("make_room", 60, 3)
    # the large flavor fits nowhere on these fleets, and some migrations make room for it
    assert row["plans_exist"] == row["auto_found"] == 3
    assert row["greedy_found"] <= row["plans_exist"] and row["greedy_within_1"] <= row["greedy_found"]
    for method in ("auto", "greedy", "exact"):
        assert 0 < row[f"{method}_ms_min"] <= row[f"{method}_ms_median"] <= row[f"{method}_ms_p95"]


def test_balancing_prints_berth_beside_watcher_on_the_same_fleets(capsys):
    assert main(["--skip", "decision,reference,traits,ingestion,memory,reports,scaling,moves,scale-out,"
                 "make_room,rebalance_goals,e2e", "--balance-hosts", "30", "--balance-seeds", "1",
                 "--balance-policies", "balanced", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["fleet"], r["n_hosts"], r["planner"]) for r in rows] == [
        (fleet, n, planner) for fleet, n in (("cloudstack/balanced", 9), ("generated", 30))
        for planner in ("berth balance", "watcher, threshold 25 %", "watcher, threshold at the mean")]
    for row in rows:
        assert row["samples"] >= 1 and 0 <= row["moved_pct_median"] <= row["moved_pct_max"] <= 5.0
        assert 0 < row["plan_ms_q1"] <= row["median_ms"] <= row["plan_ms_q3"] <= row["p99_ms"]
    # the same samples for every planner; Berth's plan never leaves the skew higher than it found it
    for berth, watcher in zip(rows[::3], rows[1::3], strict=True):
        assert berth["skew_before_median"] == watcher["skew_before_median"] > 1.0
        assert berth["skew_after_median"] < berth["skew_before_median"]


@pytest.mark.parametrize(("args", "message"), [
    (["--balance-policies", "fastest"],
     "policies are a comma-separated list of allocation, allocation+spread, balanced, got 'fastest'"),
    (["--balance-seeds", "0"], "--balance-seeds"),
])
def test_bad_balance_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit):
        main(args)
    assert message in capsys.readouterr().err


def test_the_fragmentation_hint_benchmark_prints_its_cost_and_what_it_found(capsys):
    from benchmarks import fragmentation_hint

    assert fragmentation_hint.main(["--hosts", "60", "--seeds", "1", "--time-limit", "5", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["bench"], row["n_hosts"], row["seeds"]) == ("fragmentation_hint", 60, 1)
    # within 5 s every host is examined: the count is exact, and some host is freed
    assert row["examined_median"] == 60 and row["exact_counts"] == 1 and row["found_median"] >= 1
    assert 0 < row["refusal_ms_median"] and 0 < row["hint_wall_ms_min"] <= row["hint_wall_ms_max"]
    assert 1 <= row["burst_distinct_hinted_median"] <= 1000


def test_a_report_row_reads_median_then_range_and_how_many_rounds():
    from benchmarks import report_e2e

    row = {"scheduler": "sched-0", "tree": None, "idle_cpu_ms_per_s": 1.2, "first_round_us_per_report": 286.4,
           "us_per_report": [174.2, 155.0, 1184.6], "round_s": [8.1, 12.3], "rounds_saying_down": 1}
    assert report_e2e.describe(row) == (
        "sched-0 (this tree): 174 (155-1,185, 3 rounds) us CPU per report after the first round, first "
        "round 286 us (less its idle 1 ms CPU per s); rounds of 10 (8-12, 2 rounds) s, 1 of them past "
        "service_down_time (hosts said down)")


def test_a_baseline_scheduler_runs_the_baseline_trees_code_whatever_the_directory_it_is_started_from(
        tmp_path, monkeypatch):
    import subprocess
    import sys

    from benchmarks import report_e2e

    baseline = tmp_path / "baseline"
    (baseline / "scheduler").mkdir(parents=True)
    (baseline / "scheduler" / "__init__.py").write_text("")
    (baseline / "scheduler" / "where.py").write_text("print(__file__)\n")
    monkeypatch.chdir(Path(report_e2e.__file__).parents[1])  # a checkout, as when run from its top
    for tree, expected in ((str(baseline), baseline / "scheduler" / "where.py"), (None, None)):
        cwd, env = report_e2e.code_of(tree)
        done = subprocess.run([sys.executable, "-m", "scheduler.where"], cwd=cwd, env=env,
                              capture_output=True, text=True)
        if expected is None:  # this tree has no such module
            assert done.returncode == 1 and "No module named scheduler.where" in done.stderr
        else:
            assert done.stdout.strip() == str(expected)


def test_one_decision_with_resource_classes_is_its_own_quartiles(capsys):
    from benchmarks import resource_classes

    assert resource_classes.main(["--hosts", "100", "--decisions", "1"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("100 hosts, 1 decisions: decision ")
    median = line.split("decision ")[1].split(" ms")[0]
    assert f"decision {median} ms (IQR {median}-{median})" in line


def test_table_updates_prints_each_trees_cost_and_their_ratio(capsys):
    from benchmarks import table_updates

    assert table_updates.main(["--hosts", "20", "--rounds", "1",
                               "--baseline", str(table_updates.HERE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"this tree: [0-9.]+ us CPU per report \(IQR [0-9.]+-[0-9.]+, 1 rounds\)", lines[0])
    assert re.fullmatch(r".+: [0-9.]+ us CPU per report \(IQR [0-9.]+-[0-9.]+, 1 rounds\)", lines[1])
    assert re.fullmatch(r"this tree / baseline, round by round: [0-9.]+ \(IQR [0-9.]+-[0-9.]+\)", lines[2])


def test_table_updates_refuses_a_baseline_that_is_no_checkout(tmp_path, capsys):
    from benchmarks import table_updates

    with pytest.raises(SystemExit):
        table_updates.main(["--baseline", str(tmp_path)])
    assert "is not a Berth checkout" in capsys.readouterr().err


def test_requests_cast_in_bundles_count_as_the_messages_that_carried_them():
    from benchmarks import e2e

    def handled(method, n):
        return {("berth_rpc_messages_total", ("method", method), ("topic", "scheduler")): n}

    after = {**handled("run_instance", 200), **handled("instance_update", 200),
             ("berth_rpc_casts_total", ("method", "run_instance"), ("topic", "compute")): 200}
    alone = {("casts", "scheduler", "run_instance"): 200}
    bundled = {**alone, ("bundles", "scheduler"): 2, ("bundled", "scheduler"): 200}
    assert e2e._messages({}, after, {}, alone, 1) == {
        "cast in": 200, "build out": 200, "update back": 200, "sent back": 0, "report": 0}
    assert e2e._messages({}, after, {}, bundled, 1) == {
        "cast in": 2, "build out": 200, "update back": 200, "sent back": 0, "report": 0}


def _goal_rows(capsys, argv):
    from benchmarks import rebalance_goals

    assert rebalance_goals.main(argv) == 0
    return {(row["goal"], row["headroom"], row["mode"]): row
            for row in map(json.loads, capsys.readouterr().out.splitlines())}


def test_rebalance_goals_plans_on_measured_load_and_reaches_what_they_predict_on_the_true_load(capsys):
    rows = _goal_rows(capsys, ["--fleets", "10", "--kinds", "equal", "--seeds", "1", "--shared-load",
                               "--true-load", "--json"])
    assert set(rows) == {(goal, headroom, mode) for goal, headroom in (("balance", 0.0), ("consolidate", 0.0),
                                                                       ("consolidate", 0.2))
                         for mode in ("measured", "shared", "true")}
    for row in rows.values():
        assert (row["n_hosts"], row["fleet"], row["plans"], row["faults"]) == (10, "equal", 1, [])
        assert 100 <= row["instances_min"] <= 200
        assert row["migrations_median"] >= row["bound_median"] > 0
    for mode in ("measured", "shared", "true"):
        balanced = rows["balance", 0.0, mode]
        assert balanced["reached_median"] < balanced["before_median"]
        assert 1.0 <= balanced["predicted_median"] <= 1.15
    measured, true = rows["balance", 0.0, "measured"], rows["balance", 0.0, "true"]
    assert abs(measured["reached_median"] - measured["predicted_median"]) <= 0.05
    # on the true load the plan's model is the judge's: it reaches what it predicts
    assert true["reached_median"] == pytest.approx(true["predicted_median"])
    for headroom in (0.0, 0.2):
        for mode in ("measured", "shared", "true"):
            packed = rows["consolidate", headroom, mode]
            # hosts in use: as predicted, fewer than before, no fewer than any plan can reach
            assert packed["before_median"] > packed["reached_median"] == packed["predicted_median"] \
                >= packed["unreachable_median"]
        assert rows["consolidate", headroom, "true"]["overloaded_median"] == 0
    assert rows["consolidate", 0.2, "measured"]["reached_median"] > rows["consolidate", 0.0, "measured"][
        "reached_median"]


def test_python_m_benchmarks_runs_the_rebalance_goals(capsys):
    assert main(["--skip", "decision,reference,traits,ingestion,memory,reports,scaling,moves,scale-out,"
                 "make_room,balance,e2e", "--goals-fleets", "10", "--goals-kinds", "mixed",
                 "--goals-seeds", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rebalance_goals")]
    assert len(lines) == 3
    assert "measured: skew " in lines[0] and "measured: hosts in use 10 " in lines[1]
