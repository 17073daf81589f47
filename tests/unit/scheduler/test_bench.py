"""python -m benchmarks prints the figures it promises."""

import json

import pytest

from benchmarks.__main__ import main


def test_json_rows_carry_the_documented_keys(capsys):
    assert main(["--hosts", "50,200", "--decisions", "5", "--reference-hosts", "50",
                 "--ingest-hosts", "100", "--skip", "e2e,scaling", "--json"]) == 0
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


def test_table_output_has_a_header_and_a_row_per_figure(capsys):
    assert main(["--hosts", "30", "--decisions", "3", "--policies", "default",
                 "--skip", "e2e,reference,ingestion,memory,scaling"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:3] == ["bench", "hosts", "policy"]
    assert lines[2].split()[:3] == ["decision", "30", "default"]


@pytest.mark.parametrize(("args", "message"), [
    (["--hosts", "ten"], "comma-separated list of host counts"),
    (["--hosts", "0"], "host counts must be positive"),
    (["--policies", "fastest"], "unknown policy fastest"),
])
def test_bad_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit):
        main(args)
    assert message in capsys.readouterr().err
