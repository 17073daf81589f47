"""python -m benchmarks prints what one sync of the scaling-group controller costs."""

import json

import pytest

from benchmarks import scaling_sync
from benchmarks.__main__ import main

SKIP = ("decision,reference,ingestion,memory,moves,traits,reports,scale-out,make_room,balance,"
        "rebalance_goals,e2e")


def test_the_scaling_sync_row_says_what_it_measured(capsys):
    assert main(["--skip", SKIP, "--scaling-groups", "30",
                 "--scaling-members", "3", "--scaling-runs", "2", "--scaling-backends", "sqlite",
                 "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["bench"], row["backend"], row["groups"], row["members_per_group"], row["runs"]) == (
        "scaling", "sqlite", 30, 3, 2)
    assert 0 < row["cpu_s_min"] <= row["cpu_s_median"] <= row["cpu_s_max"]
    assert row["wall_s_median"] > 0 and row["median_ms"] == row["cpu_s_median"] * 1e3
    assert row["groups_scaling_per_sync"] == 3  # the tenth whose load swings scale every sync
    assert row["db_server_cpu_included"] is True  # SQLite works in the process measured


def test_the_table_tells_what_the_figure_leaves_out(capsys):
    assert main(["--skip", SKIP, "--scaling-groups", "20",
                 "--scaling-members", "2", "--scaling-runs", "1", "--scaling-backends", "sqlite"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("scaling")]
    assert "20 groups x 2: CPU" in line and "median of 1" in line and "SQLite runs in this process" in line
    row = {"groups": 10_000, "members_per_group": 10, "cpu_s_median": 1.2, "cpu_s_min": 1.1, "cpu_s_max": 1.4,
           "wall_s_median": 2.0, "wall_s_min": 1.9, "wall_s_max": 2.2, "runs": 5, "backend": "postgresql",
           "db_server_cpu_included": False, "db_server_cpu_s_median": 0.8}
    assert scaling_sync.describe(row) == (
        "10,000 groups x 10: CPU 1.20 s (1.10-1.40), wall 2.00 s (1.90-2.20), median of 5; "
        "the database server's own CPU is not included (0.80 s beside)")


@pytest.mark.parametrize(("args", "message"), [
    (["--scaling-groups", "0"], "must be at least 1"),
    (["--scaling-share", "2"], "a share between 0 and 1"),
    (["--scaling-backends", "oracle"], "comma-separated list of sqlite, postgresql, got 'oracle'"),
])
def test_bad_sizes_are_refused(capsys, args, message):
    with pytest.raises(SystemExit):
        main(args)
    assert message in capsys.readouterr().err


def test_run_alone_its_help_says_what_each_scenario_is(capsys):
    with pytest.raises(SystemExit) as exit:
        scaling_sync.main(["--help"])
    assert exit.value.code == 0
    assert "harsh (the swinging groups' load 80% over target every other sync" in " ".join(
        capsys.readouterr().out.split())


def test_run_alone_it_prints_each_scenario_and_what_it_is(capsys):
    assert scaling_sync.main(["--groups", "20", "--members", "2", "--runs", "1", "--backends", "sqlite"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("): ")[0] + ")" for line in lines] == [
        "scaling sync, sqlite, steady (10% of the groups: load 15% over target every other sync, "
        "10 members to 12 and back)",
        "scaling sync, sqlite, harsh (10% of the groups: load 80% over target every other sync, "
        "10 members to 18 and back)"]
    assert all("20 groups x 2: CPU" in line for line in lines)


def test_an_unknown_scenario_is_refused(capsys):
    with pytest.raises(SystemExit):
        scaling_sync.main(["--scenarios", "calm"])
    assert "comma-separated list of steady, harsh, got 'calm'" in capsys.readouterr().err
