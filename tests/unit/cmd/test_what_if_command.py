"""``berth scaling group what-if FILE``: reads a file or stdin, prints one JSON object,
refuses a bad input with one line and exit status 2, and never builds a transport."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler import rpc
from scheduler.cmd import cli

EXAMPLE: dict[str, Any] = {
    "spec": {"min": 1, "max": 100,
             "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50},
                         {"type": "instance", "name": "rps", "target_average": 100},
                         {"type": "external", "name": "queue:jobs", "target_value": 30}],
             "tolerance": 0.1,
             "behavior": {"scale_up": {"stabilization_window_s": 0, "select_policy": "max",
                                       "policies": [{"type": "instances", "value": 4, "period_s": 15},
                                                    {"type": "percent", "value": 100, "period_s": 15}]},
                          "scale_down": {"stabilization_window_s": 300}}},
    "current": 3,
    "members": [{"state": "ACTIVE", "ready": True, "requests": {"cpu": 1.0},
                 "usage": {"cpu": 0.3, "rps": 120}}],
    "external": {"queue:jobs": 300},
    "recommendations": [{"age_s": 120, "replicas": 4}],
    "scale_events": [{"age_s": 30, "change": 2}],
}


def run_main(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             stdin: str | None = None) -> tuple[int, str, str]:
    def no_transport(conf: object) -> None:
        raise AssertionError("what-if built a transport")

    monkeypatch.setattr(rpc, "get_transport", no_transport)
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out = io.StringIO()
    status = cli.main(["--config-file", os.devnull, "scaling-group", "what-if", *args], out=out)
    return status, out.getvalue(), capsys.readouterr().err


def test_reads_a_file_and_prints_one_json_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "group.json"
    path.write_text(json.dumps(EXAMPLE))
    status, out, err = run_main([str(path)], monkeypatch, capsys)
    assert (status, err) == (0, "")
    assert out.count("\n") == 1
    found = json.loads(out)
    assert found["desired"] == 7 and found["limited_by"] == "ScaleUpLimit"
    assert [(m["name"], m["current"], m["proposal"]) for m in found["metrics"]] == [
        ("cpu", 30, 1), ("rps", 120, 2), ("queue:jobs", 300, 10)]
    assert found["record"] == {"recommendation": 10, "scale_event": 4}


def test_reads_stdin_for_a_dash(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_main(["-"], monkeypatch, capsys, stdin=json.dumps(EXAMPLE))
    assert status == 0 and json.loads(out)["desired"] == 7


def _with(path: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(EXAMPLE))
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return data


BAD = [
    ("not JSON", "{", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    ("not an object", "[]", "must be an object, got []"),
    ("a string target", json.dumps(_with("spec.metrics.1.target_average", "x")),
     'spec.metrics[1].target_average: must be a number above 0, got "x"'),
    ("an unknown key", json.dumps(_with("spec.metric", [])), "spec.metric: unknown key (known: "),
    ("an unknown top-level key", json.dumps(_with("now", 5)), "now: unknown key (known: "),
    ("a negative current", json.dumps(_with("current", -1)),
     "current: must be a whole number from 0 to 2147483647, got -1"),
    ("min above max", json.dumps(_with("spec.min", 200)), "spec.min: must not be above max (100), got 200"),
    ("an unknown metric type", json.dumps(_with("spec.metrics.0.type", "pods")),
     'spec.metrics[0].type: must be one of resource, instance, external, got "pods"'),
    ("two targets", json.dumps(_with("spec.metrics.2.target_average", 3)),
     "spec.metrics[2]: give exactly one target: target_value or target_average"),
    ("a negative usage", json.dumps(_with("members.0.usage.cpu", -0.5)),
     "members[0].usage.cpu: must be a number >= 0, got -0.5"),
    ("a zero scale event", json.dumps(_with("scale_events.0.change", 0)),
     "scale_events[0].change: must be a whole number other than 0"),
    ("a boolean count", json.dumps(_with("current", True)), "current: must be a whole number"),
    ("a fractional max", json.dumps(_with("spec.max", 2.5)), "spec.max: must be a whole number"),
    ("an unknown state", json.dumps(_with("members.0.state", "DELETED")), "members[0].state: must be one of"),
    ("NaN", '{"spec": {"max": NaN}, "current": 1}', "NaN is not a number JSON allows"),
    ("a key twice", '{"current": 1, "current": 2}', 'key "current" is given twice in one object'),
    ("an empty policy list", json.dumps(_with("spec.behavior.scale_up.policies", [])),
     "spec.behavior.scale_up.policies: must list at least one policy"),
    ("a window too long", json.dumps(_with("spec.behavior.scale_down.stabilization_window_s", 3601)),
     "spec.behavior.scale_down.stabilization_window_s: must be a whole number from 0 to 3600, got 3601"),
    ("a max past int32", '{"spec": {"max": 1e400}, "current": 1}',
     "spec.max: must be a whole number from 1 to 2147483647"),
    # Counts are int32, as Kubernetes': refused naming them, not an OverflowError.
    ("a current of 400 digits", json.dumps(_with("current", 10**400)),
     "current: must be a whole number from 0"),
    ("a policy's value of 400 digits", json.dumps(_with("spec.behavior.scale_up.policies.0.value", 10**400)),
     "spec.behavior.scale_up.policies[0].value: must be a whole number from 1 to 2147483647"),
]


def test_samples_past_int64_milli_units_saturate_and_counts_past_int32_are_capped(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As Kubernetes' MilliValue saturates at int64 and a count is an int32: a sample of 1e400
    gets an answer, not a traceback."""
    for usage, metric in (({"cpu": "HUGE"}, {"type": "resource", "name": "cpu", "target_utilization": 50}),
                          ({"rps": 1e300}, {"type": "instance", "name": "rps", "target_average": 1e-300})):
        text = json.dumps({"spec": {"max": 2147483647, "metrics": [metric]}, "current": 1,
                           "members": [{"state": "ACTIVE", "requests": {"cpu": 1}, "usage": usage}]}
                          ).replace('"HUGE"', "1e400")
        status, out, err = run_main(["-"], monkeypatch, capsys, stdin=text)
        assert (status, err) == (0, ""), err
        result = json.loads(out)
        assert result["metrics"][0]["proposal"] == 2147483647
        assert result["desired"] == 5  # the default scale-up policy: 4 more (or 100 %) per 15 s


@pytest.mark.parametrize("text,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_input_gets_one_line_and_status_2(text: str, message: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(["-"], monkeypatch, capsys, stdin=text)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("berth scaling group what-if: ")
    assert message in err


def test_a_missing_file_gets_one_line_and_status_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    status, out, err = run_main([str(missing)], monkeypatch, capsys)
    assert (status, out) == (2, "")
    assert err == f"berth scaling group what-if: {missing}: No such file or directory\n"


def test_the_command_runs_without_a_broker(tmp_path: Path) -> None:
    """As an operator runs it: a transport_url nobody listens on is never used."""
    path = tmp_path / "group.json"
    path.write_text(json.dumps(EXAMPLE))
    conf = tmp_path / "berth.conf"
    conf.write_text("[DEFAULT]\ntransport_url = rabbit://nobody:nothing@127.0.0.1:1/\n")
    # Threads: under eventlet its deprecation warning would be the only thing on stderr.
    env = dict(os.environ, BERTH_CONCURRENCY="threading")
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(conf),
                           "scaling-group", "what-if", str(path)], capture_output=True, text=True, timeout=60,
                          env=env)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["desired"] == 7


def test_help_names_the_input_format() -> None:
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.cli", "--config-file", os.devnull,
                           "scaling-group", "what-if", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for words in ("FILE", "target_utilization", "exit status 2", "without a broker"):
        assert words in done.stdout
