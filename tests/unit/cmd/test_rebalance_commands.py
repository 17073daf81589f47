"""``berth rebalance plan|show|list|stop``: arguments, what is sent and printed, against a fake
scheduler that answers with a saved plan (``apply``: tests/unit/cmd/test_job_commands.py, against
a real one)."""

import io
import json

import pytest

from scheduler.cmd.arguments import CommandError, Interrupted
from tests.unit.cli_scheduler import parse, stored_flavor, write_conf

FIGURES = [["skew", "1.400", "1.250"], ["hosts used", "3", "3"],
           ["largest flavor that fits", "m1.medium", "m1.large"], ["stranded RAM", "40.0%", "10.0%"]]


def step(position, source="h1", dest="h2"):
    return {"position": position, "instance_uuid": f"00000000-0000-4000-8000-00000000000{position}",
            "source_host": source, "dest_host": dest, "memory_mb": 4096.0, "status": "pending",
            "migration_id": None, "failure": None, "reason": f"frees room on {source} for flavor m1.large"}


class Plans:
    """A fake scheduler holding plan 1 of ``count`` steps."""

    def __init__(self, count=3):
        self.plan = {"id": 1, "goal": "make_room", "state": "planned", "reason": None,
                     "options": {"flavor": {"name": "m1.large"}, "count": 1, "time_limit": 1.0},
                     "summary": {"method": "exact", "optimal": True, "note": "", "placements": ["h1"],
                                 "before": {"hosts_used": 3}, "after": {"hosts_used": 3}, "figures": FIGURES},
                     "steps": [step(n) for n in range(1, count + 1)]}
        self.calls = []

    def admin_call(self, ctxt, method, **kwargs):
        self.calls.append((method, kwargs))
        if method == "show_flavor":
            return stored_flavor(kwargs["name"])
        if method == "plan_rebalance":
            return self.plan
        if method == "list_rebalance_plans":
            return [{"id": 1, "goal": "make_room", "state": self.plan["state"], "step_count": 3,
                     "created_at": "2026-12-04T23:00:00.000000Z", "reason": None}]
        if method == "stop_rebalance_plan":
            self.plan["state"], self.plan["reason"] = "stopping", "stopped by berth rebalance stop"
            return self.plan
        assert method == "show_rebalance_plan"
        return json.loads(json.dumps(self.plan))


def run(tmp_path, plans, *argv):
    args = parse(write_conf(tmp_path), "rebalance", *argv)
    out = io.StringIO()
    status = args.func(plans, args, out)
    return status, out.getvalue()


def test_plan_sends_the_goal_and_its_options_and_prints_figures_and_steps(tmp_path):
    plans = Plans(count=1)
    status, text = run(tmp_path, plans, "plan", "--make-room", "m1.large", "--count", "2", "--zone", "az1",
                       "--time-limit", "5", "--method", "exact")
    assert status == 0
    [(method, sent)] = [c for c in plans.calls if c[0] == "plan_rebalance"]
    assert sent["goal"] == "make_room"
    assert sent["options"] == {"time_limit": 5.0, "count": 2, "zone": "az1", "method": "exact",
                               "flavor": {k: v for k, v in stored_flavor("m1.large").items()
                                          if k not in ("created_at", "updated_at")}}
    lines = text.splitlines()
    assert lines[0] == ("rebalance plan 1: room for 1 x m1.large: 1 migration(s), 4096 MB moved; exact "
                        "(proven fewest); planned")
    assert lines[1].split() == ["FIGURE", "BEFORE", "AFTER"]
    assert lines[4].split() == ["largest", "flavor", "that", "fits", "m1.medium", "m1.large"]
    assert lines[7].split()[:6] == ["STEP", "INSTANCE", "SOURCE", "DEST", "MEMORY_MB", "STATUS"]
    assert lines[8].split()[:6] == ["1", "00000000-0000-4000-8000-000000000001", "h1", "h2", "4096",
                                    "pending"]
    assert lines[8].endswith("frees room on h1 for flavor m1.large  -")  # NAME: the instance has none
    assert lines[-2:] == ["then the new instance(s) fit on: h1", "apply it: berth rebalance apply 1"]


def test_plan_as_json_is_one_object_with_its_figures_and_steps(tmp_path):
    status, text = run(tmp_path, Plans(count=2), "plan", "--make-room", "m1.large", "-f", "json")
    record = json.loads(text)
    assert (status, record["id"], record["method"], record["placements"]) == (0, 1, "exact", ["h1"])
    assert [s["step"] for s in record["steps"]] == [1, 2]
    assert record["steps"][0]["dest"] == "h2" and record["after"] == {"hosts_used": 3}
    assert record["steps"][0]["memory_mb"] == 4096


def test_bad_plan_arguments_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse(write_conf(tmp_path), "rebalance", "plan")  # no goal
    assert "one of the arguments --make-room" in capsys.readouterr().err
    with pytest.raises(CommandError, match="--time-limit: give more than 0 and at most 600 seconds, got 0"):
        run(tmp_path, Plans(), "plan", "--make-room", "m1.large", "--time-limit", "0")
    with pytest.raises(CommandError, match="no flavor named 'm1.nosuch'"):
        run(tmp_path, Plans(), "plan", "--make-room", "m1.nosuch")
    with pytest.raises(SystemExit):
        parse(write_conf(tmp_path), "rebalance", "plan", "--make-room", "m1.large", "--method", "guess")


def test_balance_and_consolidate_send_their_own_options_and_refuse_the_others(tmp_path):
    plans = Plans(count=1)
    status, _ = run(tmp_path, plans, "plan", "--balance", "--target", "1.1", "--max-migrations", "4")
    assert status == 0
    assert plans.calls[-1] == ("plan_rebalance", {"goal": "balance", "options": {
        "time_limit": 1.0, "target_skew": 1.1, "max_migrations": 4}})
    run(tmp_path, plans, "plan", "--consolidate", "--headroom", "0.2")
    assert plans.calls[-1] == ("plan_rebalance", {"goal": "consolidate", "options": {
        "time_limit": 1.0, "headroom": 0.2}})
    with pytest.raises(CommandError, match="--target goes with --balance, not --consolidate"):
        run(tmp_path, plans, "plan", "--consolidate", "--target", "1.1")
    with pytest.raises(CommandError, match="--max-migrations goes with --balance or --consolidate, not "
                                           "--make-room"):
        run(tmp_path, plans, "plan", "--make-room", "m1.large", "--max-migrations", "3")
    with pytest.raises(CommandError, match="--count and --zone go with --make-room, not --balance"):
        run(tmp_path, plans, "plan", "--balance", "--count", "2")
    with pytest.raises(SystemExit):
        parse(write_conf(tmp_path), "rebalance", "plan", "--balance", "--consolidate")


def test_show_list_and_stop_print_the_plans(tmp_path):
    plans = Plans(count=2)
    status, text = run(tmp_path, plans, "show", "1")
    assert status == 0 and text.splitlines()[0].endswith("planned") and "apply it" not in text
    status, text = run(tmp_path, plans, "list")
    assert text.splitlines()[1].split()[:4] == ["1", "make_room", "planned", "3"]
    status, text = run(tmp_path, plans, "stop", "1")
    assert text == "rebalance plan 1 stopping\n"
    assert plans.calls[-1] == ("stop_rebalance_plan", {"plan_id": 1})
    status, text = run(tmp_path, plans, "apply", "1", "--stop")  # the same
    assert (status, text) == (0, "rebalance plan 1 stopping\n")
    assert plans.calls[-1] == ("stop_rebalance_plan", {"plan_id": 1})


def test_show_of_an_applied_plan_prints_what_it_planned_beside_what_the_fleet_shows_now(tmp_path):
    plans = Plans(count=1)
    plans.plan.update(goal="balance", state="done", options={"max_migrations": 1, "target_skew": 1.15,
                                                             "time_limit": 1.0})
    plans.plan["steps"][0]["status"] = "done"
    plans.plan["summary"]["left"] = {"h9": "94% of its 32 vCPUs busy: its load is none of its instances'"}
    plans.plan["reached"] = {"summary": {"skew": 1.3}, "figures": [["skew", "1.300"], ["hosts used", "3"]]}
    status, text = run(tmp_path, plans, "show", "1")
    lines = text.splitlines()
    assert "not helped: h9: 94% of its 32 vCPUs busy: its load is none of its instances'" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("FIGURE"))
    assert lines[header].split() == ["FIGURE", "BEFORE", "PLANNED", "NOW"]
    assert lines[header + 1].split() == ["skew", "1.400", "1.250", "1.300"]
    assert lines[header + 3].split()[-1] == "-"  # a figure the fleet no longer gives
    status, text = run(tmp_path, plans, "show", "1", "-f", "json")
    shown = json.loads(text)
    assert shown["reached"] == {"skew": 1.3} and shown["left"] == plans.plan["summary"]["left"]


def test_ctrl_c_while_the_scheduler_plans_is_one_line_and_130(tmp_path):
    class Interrupting(Plans):
        def admin_call(self, ctxt, method, **kwargs):
            if method == "plan_rebalance":
                raise KeyboardInterrupt
            return super().admin_call(ctxt, method, **kwargs)

    with pytest.raises(Interrupted) as raised:
        run(tmp_path, Interrupting(), "plan", "--balance")
    assert (raised.value.exit_code, str(raised.value)) == (
        130, "interrupted: the scheduler may still save the plan, which moves nothing until applied: "
        "`berth rebalance list` shows it")
