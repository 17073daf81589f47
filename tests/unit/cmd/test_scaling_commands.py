"""``berth scaling group create|list|show|set|pause|resume|delete``: what each command
sends, what it prints (against the real endpoint on SQLite, the wire's JSON in between),
and its refusals: bad arguments exit 2, the scheduler's refusals print one line."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler import states
from scheduler.admin.grouping import AdminEndpoint
from scheduler.cmd import scaling_commands
from scheduler.cmd.arguments import CommandError
from scheduler.scaling.api import ScalingGroupEndpoint
from tests.unit.cli_scheduler import cli_scheduler, parse, write_conf
from tests.unit.cli_scheduler import main as berth
from tests.unit.scaling.api_world import CPU_50, DirectClient, World, clock_fixture, world_fixture  # noqa: F401

GROUP = "5f2b3c1e-8a4d-4e6f-9b0a-1c2d3e4f5a6b"
ANCHOR = "0b7c6a2e-3f1d-4e5a-8b9c-0d1e2f3a4b5c"
CREATED = {"uuid": "11111111-2222-3333-4444-555555555555", "name": "web"}


class FakeClient:
    """Records what a command asks of the scheduler; answers from ``answers``."""

    def __init__(self, **answers: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers = answers

    def admin_call(self, ctxt: Any, method: str, **kwargs: Any) -> Any:
        self.calls.append((method, kwargs))
        if method == "show_scaling_group" and method not in self.answers:
            return dict(CREATED, desired=0, spec={"max": 3}, members=[])
        return self.answers.get(method)

    def list_instances(self, ctxt: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """Every UUID asked for is an instance; no name is (not recorded in ``calls``)."""
        return [{"uuid": u} for u in kwargs.get("uuids") or []]


@pytest.fixture
def conf_file(tmp_path: Path) -> Path:
    return write_conf(tmp_path)


def run(conf_file: Path, *argv: str, client: Any = None, **answers: Any) -> tuple[int, str, Any]:
    """Parse ``argv`` and run its command: (status, output, client)."""
    args = parse(conf_file, "scaling-group", *argv)
    client = client or FakeClient(**answers)
    out = io.StringIO()
    status = args.func(client, args, out)
    return status, out.getvalue(), client


def sent(client: FakeClient) -> dict[str, Any]:
    [(method, kwargs)] = [call for call in client.calls
                          if call[0] not in ("list_server_groups", "show_scaling_group")]
    return dict(kwargs, method=method)


# -- create: what it sends ---------------------------------------------------------------------


def test_create_prints_the_schedulers_warning_on_standard_error(conf_file, capsys):
    warning = "instances outside the group already carry the names ..."
    created = dict(CREATED, warning=warning)
    status, out, _ = run(conf_file, "create", "web", "--flavor", "m1.small", "--max", "3",
                         create_scaling_group=created)
    assert status == 0 and [line.split() for line in out.splitlines()[:2]] == [
        ["Name:", "web"], ["UUID:", CREATED["uuid"]]]  # as scaling-group show prints it
    assert capsys.readouterr().err == f"berth: warning: {warning}\n"


def test_create_sends_the_spec_and_template_its_options_make_and_prints_the_group(conf_file):
    status, out, client = run(
        conf_file, "create", "web", "--flavor", "m1.small", "--min", "2", "--max", "10", "--desired", "3",
        "--cpu", "50", "--memory", "70", "--metric", "instance:rps=100",
        "--metric", "external:queue:jobs=value:30",
        "--metric", "external:queue:mail=average:2.5", "--metric", "resource:memory=average:1024",
        "--tolerance", "0.05", "--availability-zone", "az1", "--image", "berth-test", "--hint", "query=[1]",
        "--hint", f"same_host={ANCHOR}", "--hint", f"same_host={GROUP}", "--project", "p1",
        "-f", "value", "-c", "uuid", create_scaling_group=CREATED)
    assert (status, out) == (0, CREATED["uuid"] + "\n")
    assert sent(client) == {
        "method": "create_scaling_group", "name": "web", "desired": 3, "project_id": "p1",
        "spec": {"min": 2, "max": 10, "tolerance": 0.05, "metrics": [
            {"type": "resource", "name": "cpu", "target_utilization": 50},
            {"type": "resource", "name": "memory", "target_utilization": 70},
            {"type": "instance", "name": "rps", "target_average": 100},
            {"type": "external", "name": "queue:jobs", "target_value": 30},
            {"type": "external", "name": "queue:mail", "target_average": 2.5},
            {"type": "resource", "name": "memory", "target_average": 1024}]},
        "template": {"flavor_name": "m1.small", "availability_zone": "az1", "image": "berth-test",
                     "scheduler_hints": {"query": "[1]", "same_host": [ANCHOR, GROUP]}},
    }


def test_create_refuses_a_hint_naming_no_instance_by_the_hint(conf_file):
    with pytest.raises(CommandError, match=r"^--hint different_host=db: no instance named or with UUID db$"):
        run(conf_file, "create", "web", "--flavor", "m1.small", "--max", "3", "--hint", "different_host=db",
            create_scaling_group=CREATED)


def test_create_with_an_unnamed_flavor_and_a_server_group_by_name(conf_file):
    _, _, client = run(conf_file, "create", "web", "--flavor-ram", "1024", "--flavor-vcpus", "2",
                       "--max", "4", "--server-group", "spread", list_server_groups=[{"uuid": GROUP}],
                       create_scaling_group=CREATED)
    assert client.calls[0] == ("list_server_groups", {"name": "spread"})
    call = sent(client)
    assert call["template"] == {"memory_mb": 1024, "vcpus": 2, "root_gb": 0, "server_group_uuid": GROUP}
    assert call["spec"] == {"max": 4} and call["desired"] is None and call["project_id"] == "admin"


def test_create_from_a_spec_file_the_options_override_its_parts(conf_file, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"min": 1, "max": 5, "tolerance": 0.1, "metrics": [
        {"type": "instance", "name": "rps", "target_average": 100}],
        "behavior": {"scale_down": {"stabilization_window_s": 60}}}))
    behavior = tmp_path / "behavior.json"
    behavior.write_text('{"scale_up": {"policies": [{"type": "percent", "value": 50, "period_s": 30}]}}')
    _, _, client = run(conf_file, "create", "web", "--flavor", "m1.tiny", "--spec", str(path), "--max", "8",
                       "--cpu", "60", create_scaling_group=CREATED)
    assert sent(client)["spec"] == {"min": 1, "max": 8, "tolerance": 0.1, "metrics": [
        {"type": "resource", "name": "cpu", "target_utilization": 60}],
        "behavior": {"scale_down": {"stabilization_window_s": 60}}}
    _, _, client = run(conf_file, "create", "web", "--flavor", "m1.tiny", "--spec", str(path), "--behavior",
                       str(behavior), create_scaling_group=CREATED)
    assert sent(client)["spec"]["behavior"] == {"scale_up": {"policies": [
        {"type": "percent", "value": 50, "period_s": 30}]}}
    assert sent(client)["spec"]["max"] == 5


@pytest.mark.parametrize("argv, message", [
    (["--flavor", "m1.tiny"], "give --max N (or a --spec file that holds max)"),
    (["--max", "3"], "give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)"),
    (["--max", "3", "--flavor-ram", "512"],
     "give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)"),
    (["--max", "3", "--flavor", "m1.tiny", "--flavor-vcpus", "2"],
     "give either --flavor or --flavor-ram/--flavor-vcpus/--flavor-disk"),
    (["--flavor", "m1.tiny", "--spec", "{missing}"], "--spec {missing}: No such file or directory"),
    (["--flavor", "m1.tiny", "--spec", "{list}"], "--spec {list}: must hold one JSON object"),
    (["--flavor", "m1.tiny", "--spec", "{bad}"],
     "--spec {bad}: not JSON: Expecting value at line 1 column 9"),
    (["--flavor", "m1.tiny", "--max", "3", "--behavior", "{twice}"],
     '--behavior {twice}: key "scale_up" is given twice in one object'),
])
def test_create_refuses_what_it_can_tell_before_sending_anything(conf_file, tmp_path, argv, message):
    files = {"missing": tmp_path / "nope.json", "list": tmp_path / "list.json", "bad": tmp_path / "bad.json",
             "twice": tmp_path / "twice.json"}
    files["list"].write_text("[1]")
    files["bad"].write_text('{"max": }')
    files["twice"].write_text('{"scale_up": {}, "scale_up": {}}')
    argv = [arg.format(**files) for arg in argv]
    client = FakeClient()
    with pytest.raises(CommandError) as caught:
        run(conf_file, "create", "web", *argv, client=client)
    assert str(caught.value) == message.format(**files)
    assert client.calls == []


@pytest.mark.parametrize("argv, message", [
    (["--metric", "rps=100"], "a metric is instance:NAME=AVERAGE, external:NAME=value:V"),
    (["--metric", "external:queue:jobs=30"],
     "'external:queue:jobs=30': say which target, external:queue:jobs=value:N or "
     "external:queue:jobs=average:N"),
    (["--metric", "instance:rps=value:3"], "'instance:rps=value:3': a instance metric's target is average"),
    (["--metric", "resource:disk=average:5"],
     "'resource:disk=average:5': a resource metric is cpu or memory"),
    (["--metric", "instance:rps=0"], "must be a number above 0, got '0'"),
    (["--metric", "instance:rps=lots"], "'lots' is not a number"),
    (["--cpu", "0"], "must be at least 1, got 0"),
    (["--memory", "1.5"], "'1.5' is not a whole number"),
    (["--tolerance", "-0.1"], "must be a number >= 0, got '-0.1'"),
    (["--tolerance", "nan"], "must be a number >= 0, got 'nan'"),
    (["--min", "-1"], "must be at least 0, got -1"),
    (["--max", "0"], "must be at least 1, got 0"),
    (["--hint", "query"], "a hint is key=value, got 'query'"),
])
def test_bad_options_exit_2_with_the_reason(conf_file, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, "scaling-group", "create", "web", "--flavor", "m1.tiny", *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


# -- set, pause, resume, delete: what they send and print --------------------------------------


def test_set_sends_the_changes_and_prints_the_reply(conf_file, tmp_path):
    behavior = tmp_path / "behavior.json"
    behavior.write_text('{"scale_down": {"stabilization_window_s": 0.5e2}}')
    status, out, client = run(
        conf_file, "set", "web", "--min", "0", "--max", "9", "--desired", "0", "--metric", "instance:rps=80",
        "--tolerance", "0.2", "--behavior", str(behavior), update_scaling_group={"message": "updated: fine"})
    assert (status, out) == (0, "updated: fine\n")
    assert sent(client) == {"method": "update_scaling_group", "name_or_uuid": "web", "changes": {
        "min": 0, "max": 9, "desired": 0, "tolerance": 0.2,
        "metrics": [{"type": "instance", "name": "rps", "target_average": 80}],
        "behavior": {"scale_down": {"stabilization_window_s": 50}}}}


def test_set_without_a_change_is_refused(conf_file):
    with pytest.raises(CommandError, match="nothing to change: give --min, --max, --desired"):
        run(conf_file, "set", "web")


@pytest.mark.parametrize("verb", ["pause", "resume", "delete"])
def test_pause_resume_delete_print_the_reply(conf_file, verb):
    method = f"{verb}_scaling_group"
    status, out, client = run(conf_file, verb, "web", **{method: {"message": f"scaling group web: {verb}"}})
    assert (status, out) == (0, f"scaling group web: {verb}\n")
    assert client.calls == [(method, {"name_or_uuid": "web"})]


# -- against the endpoint: list and show -------------------------------------------------------


def _columns(line: str) -> list[str]:
    return line.split()


def _scaled_world(world: World) -> dict[str, Any]:
    """web: 2 members ACTIVE at 90 % of a vCPU against 50 %, scaled to 4; api: never synced."""
    web = world.create("web", desired=2)
    world.sync(0)
    world.run(web["uuid"], cpu=0.9)
    world.sync(15)
    return web


def test_list_prints_each_group_with_its_targets_and_counts(conf_file, world):
    web = _scaled_world(world)
    api = world.create("api", spec={"min": 1, "max": 3, "metrics": [
        {"type": "instance", "name": "rps", "target_average": 100.5}]}, desired=1)
    _, out, _ = run(conf_file, "list", client=DirectClient(world))
    header, *rows = out.splitlines()
    assert _columns(header) == ["NAME", "UUID", "STATE", "TARGETS", "MIN", "MAX", "DESIRED", "CURRENT"]
    assert [_columns(row) for row in rows] == [
        ["api", api["uuid"], "never", "synced", "rps:", "<unknown>/100.5", "1", "3", "1", "0"],
        ["web", web["uuid"], "active", "cpu:", "90%/50%", "1", "20", "4", "4"]]
    _, out, _ = run(conf_file, "list", "-f", "json", "-c", "name", "-c", "targets", "-c", "current",
                    client=DirectClient(world))
    assert json.loads(out) == [{"NAME": "api", "TARGETS": "rps: <unknown>/100.5", "CURRENT": 0},
                               {"NAME": "web", "TARGETS": "cpu: 90%/50%", "CURRENT": 4}]


def test_list_refuses_an_unknown_column(conf_file, world):
    with pytest.raises(CommandError, match="no column 'size'; this listing has name, uuid, state"):
        run(conf_file, "list", "-c", "size", client=DirectClient(world))


def test_show_reads_like_kubectl_describe_hpa(conf_file, world):
    web = _scaled_world(world)
    world.clock.at(40)
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    lines = out.splitlines()
    members = world.db.list_scaling_group_members(web["uuid"])
    [event] = world.db.scaling_group_history(web["uuid"])["scale_events"]
    width = len("  resource cpu on members (as a percentage of request):  ")
    assert lines[:16] == [
        "Name:".ljust(width) + "web",
        "UUID:".ljust(width) + web["uuid"],
        "Project:".ljust(width) + "-",
        "State:".ljust(width) + "active",
        "Created:".ljust(width) + "2026-12-01 12:00:00 (40s ago)",
        "Template:".ljust(width) + "flavor m1.small",
        "Metrics:".ljust(width) + "( current / target )",
        "  resource cpu on members (as a percentage of request):  90% / 50%",
        "Min members:".ljust(width) + "1",
        "Max members:".ljust(width) + "20",
        "Tolerance:".ljust(width) + "0.1",
        "Members:".ljust(width) + "4 current / 4 desired (2 SCHEDULING, 2 ACTIVE)",
        "Last sync:".ljust(width) + "2026-12-01 12:00:15 (25s ago)",
        "Controller:".ljust(width) + "sched-a (lease until 2026-12-01 12:00:30)",
        "Conditions:",
        "  Type            Status  Reason              Message",
    ]
    assert _columns(lines[17])[:3] == ["AbleToScale", "True", "SucceededRescale"]
    assert _columns(lines[18])[:3] == ["ScalingActive", "True", "ValidMetricFound"]
    assert _columns(lines[19])[:3] == ["ScalingLimited", "False", "DesiredWithinRange"]
    assert lines[20:24] == ["Events:", "  Age  Change  Message", "  ---  ------  -------",
                            f"  25s  +2      {event['reason']}"]
    assert lines[24] == "Member instances:"
    assert _columns(lines[25]) == ["UUID", "Name", "State", "Host", "Created"]
    assert [_columns(line) for line in lines[27:]] == [
        [m["uuid"], m["display_name"], m["state"], m["host"] or "-", "2026-12-01",
         "12:00:00" if m["display_name"] in ("web-1", "web-2") else "12:00:15"] for m in members]


def test_show_says_when_a_group_is_overdue_for_its_sync(conf_file, world):
    _scaled_world(world)
    world.create("api", desired=1)
    world.clock.at(45)  # the last sync 30 s ago, api created 45 s ago: not yet two periods of 15 s
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    assert "OVERDUE" not in out
    world.clock.at(46)
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    [line] = [line for line in out.splitlines() if line.startswith("Last sync:")]
    assert line.endswith("2026-12-01 12:00:15 (31s ago); OVERDUE: groups are synced every 15 s: no scheduler "
                         "with [scaling] enabled is running, or its syncs of this group fail (see the "
                         "schedulers' logs)")
    _, out, _ = run(conf_file, "show", "api", client=DirectClient(world))
    [line] = [line for line in out.splitlines() if line.startswith("State:")]
    assert "never synced: no scaling controller has synced the group yet; OVERDUE: groups are synced every " \
           "15 s" in line


def test_show_of_a_group_never_synced_says_so(conf_file, world):
    world.create("web", spec={"min": 1, "max": 5, "metrics": [
        {"type": "instance", "name": "rps", "target_average": 100},
        {"type": "external", "name": "queue:jobs", "target_value": 30},
        {"type": "external", "name": "queue:mail", "target_average": 2.5},
        {"type": "resource", "name": "memory", "target_average": 1024}],
        "behavior": {"scale_down": {"stabilization_window_s": 60}}},
        template={"memory_mb": 1024, "vcpus": 2, "availability_zone": "nova"})
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    shown = {line.split(":  ")[0].strip(): line.split(":  ", 1)[1].strip() for line in out.splitlines()
             if ":  " in line}
    assert shown["State"] == "never synced: no scaling controller has synced the group yet"
    assert shown["Template"] == "1024 MB RAM, 2 vCPUs, 0 GB disk, zone nova"
    assert shown['"rps" on members'] == "<unknown> / 100"
    assert shown['"queue:jobs" (target value)'] == "<unknown> / 30"
    assert shown['"queue:mail" (target average value)'] == "<unknown> / 2.5"
    assert shown["resource memory on members"] == "<unknown> / 1024 MB"
    assert shown["Behavior"] == '{"scale_down": {"stabilization_window_s": 60}}'
    assert shown["Members"] == "0 current / 1 desired"
    assert shown["Conditions"] == shown["Events"] == shown["Member instances"] == "<none>"
    assert "Last sync" not in shown


def test_show_prints_a_metric_not_read_with_the_reason(conf_file, world):
    web = world.create("web", spec={"min": 1, "max": 5, "metrics": CPU_50 + [
        {"type": "instance", "name": "rps", "target_average": 100}]}, desired=2)
    world.sync(0)
    world.run(web["uuid"], cpu=0.5)
    world.sync(15)
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    [rps] = [line for line in out.splitlines() if line.startswith('  "rps" on members:')]
    status = world.db.get_scaling_group(web["uuid"])["status"]
    assert rps.split(":  ")[1].strip() == f"<unknown> / 100 ({status['metrics'][1]['error']})"


def test_show_of_a_new_group_says_its_members_are_initializing_not_that_metrics_failed(conf_file, world):
    world.create("web", desired=2)
    world.sync(0)  # its members are created
    world.sync(15)  # booting, no sample yet
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    [cpu] = [line for line in out.splitlines() if line.startswith("  resource cpu on members")]
    assert cpu.split(":  ")[1].strip().startswith(
        "<initializing> / 50% (every member is within its initialization period")
    [active] = [_columns(line) for line in out.splitlines() if line.startswith("  ScalingActive")]
    assert active[:3] == ["ScalingActive", "False", "MembersInitializing"]
    assert "FailedGetResourceMetric" not in out


def test_show_of_a_paused_and_of_a_deleting_group(conf_file, world):
    world.create("web", desired=2)
    world.sync(0)
    world.api.pause_scaling_group({}, "web")
    world.sync(15)
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    assert any(_columns(line)[:3] == ["AbleToScale", "False", "Paused"] for line in out.splitlines())
    assert "State:" in out and " paused\n" in out
    world.api.delete_scaling_group({}, "web")
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    [state] = [line for line in out.splitlines() if line.startswith("State:")]
    assert state.split(":  ")[1].strip() == "deleting: the controller deletes its members, then the group"


def test_show_with_a_format_prints_one_object_its_members_a_list(conf_file, world):
    web = _scaled_world(world)
    _, out, _ = run(conf_file, "show", "web", "-f", "json", client=DirectClient(world))
    shown = json.loads(out)
    members = world.db.list_scaling_group_members(web["uuid"])
    keys = ("name", "state", "targets", "min", "max", "desired", "current", "members")
    assert {k: shown[k] for k in keys} == {
        "name": "web", "state": "active", "targets": "cpu: 90%/50%", "min": 1, "max": 20, "desired": 4,
        "current": 4, "members": [m["uuid"] for m in members]}
    _, out, _ = run(conf_file, "show", "web", "-f", "value", "-c", "desired", client=DirectClient(world))
    assert out == "4\n"
    _, out, _ = run(conf_file, "show", "web", "-f", "table", "-c", "name", "-c", "limited by",
                    client=DirectClient(world))
    assert out.splitlines()[3:5] == ["| name       | web   |", "| limited_by | None  |"]


@pytest.mark.parametrize("value, shown", [(90, "90"), (0.25, "0.25"), (1500000.0, "1500000"), (2.50, "2.5"),
                                          (None, "<unknown>"), (1e-7, "0.0000001")])
def test_numbers_print_as_people_write_them(value, shown):
    assert scaling_commands.number(value) == shown


@pytest.mark.parametrize("seconds, shown", [(0, "0s"), (119, "119s"), (192, "3m12s"), (600, "10m"),
                                            (3 * 3600 + 60, "3h1m"), (9 * 3600, "9h"), (5 * 86400, "5d")])
def test_ages_as_kubectl_words_them(seconds, shown):
    start = datetime(2026, 12, 1, 12, 0, 0)
    # The database's own form (Z) against an offset: both are UTC.
    now = (start + timedelta(seconds=seconds)).replace(tzinfo=UTC).isoformat()
    assert scaling_commands.age("2026-12-01T12:00:00.000000Z", now) == shown


# -- the whole command over memory://: the scheduler's refusals are one line -------------------


@pytest.fixture
def scheduler(conf_file):
    """A scheduler with its admin and scaling endpoints on memory://, configured from the CLI's file."""
    def endpoints(conf, database, manager):
        return [AdminEndpoint(conf, database, manager.host_manager), ScalingGroupEndpoint(conf, database)]

    with cli_scheduler(conf_file, endpoints) as database:
        yield database


def main(conf_file: Path, *argv: str) -> tuple[int, str]:
    return berth(conf_file, "scaling-group", *argv)


def test_commands_end_to_end_and_refusals_are_one_line(scheduler, conf_file, capsys):
    database = scheduler
    status, out = main(conf_file, "create", "web", "--flavor", "m1.small", "--max", "5", "--cpu", "50",
                       "--tolerance", "0.2", "-f", "json")
    assert status == 0
    [group] = database.list_scaling_groups()
    created = json.loads(out)
    assert (created["uuid"], created["name"], created["max"], created["members"]) == (
        group["uuid"], "web", 5, [])
    assert group["spec"]["tolerance"] == 0.2 and group["desired"] == 1
    status, out = main(conf_file, "set", "web", "--tolerance", "0.15", "--desired", "3")
    assert status == 0 and out.startswith("scaling group web updated: tolerance 0.15, desired 3; ")
    status, out = main(conf_file, "show", "web")
    assert status == 0 and "Tolerance:" in out and out.count("0.15") == 1
    capsys.readouterr()

    before = database.list_scaling_groups()
    for argv, message in [
        (["create", "web", "--flavor", "m1.small", "--max", "5"],
         "berth: a scaling group named 'web' exists already"),
        (["create", "api", "--flavor", "m9.huge", "--max", "5"],
         "berth: template.flavor_name: no flavor named 'm9.huge'"),
        (["create", "api", "--flavor", "m1.small", "--max", "5", "--server-group", GROUP],
         f"berth: template.server_group_uuid: no server group {GROUP}"),
        (["create", "api", "--flavor", "m1.small", "--max", "5", "--server-group", "spread"],
         "berth: No server group named spread"),
        (["create", "api", "--flavor", "m1.small", "--max", "5", "--desired", "9"],
         "berth: desired: must be within min..max (1..5), got 9"),
        (["create", "api", "--flavor", "m1.small", "--max", "5", "--metric", "external:jobs=value:3"],
         "berth: spec.metrics[0].name: external metric 'jobs'"),
        (["set", "web", "--min", "9"], "berth: spec.min: must not be above max (5), got 9"),
        (["set", "nosuch", "--min", "2"], "berth: no scaling group named 'nosuch'"),
        (["show", "nosuch"], "berth: no scaling group named 'nosuch'"),
        (["pause", "nosuch"], "berth: no scaling group named 'nosuch'"),
        (["delete", "nosuch"], "berth: no scaling group named 'nosuch'"),
    ]:
        status, out = main(conf_file, *argv)
        # In-process, other tests' log handlers may write here too: keep the CLI's lines.
        lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
        assert status == 1 and out == ""
        assert len(lines) == 1 and lines[0].startswith(message), lines
    assert database.list_scaling_groups() == before

    assert main(conf_file, "pause", "web") == (
        0, "scaling group web paused: the controller leaves its members as they are until it is resumed\n")
    assert main(conf_file, "resume", "web")[0] == 0
    assert main(conf_file, "delete", "web") == (0, "scaling group web deleted\n")
    assert database.list_scaling_groups() == []


def test_show_names_the_server_group_of_the_template(conf_file, world):
    world.db.create_server_group(GROUP, "spread", "anti-affinity")
    world.create(template={"flavor_name": "m1.small", "server_group_uuid": GROUP})

    def template_line() -> str:
        _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
        [line] = [line for line in out.splitlines() if line.startswith("Template:")]
        return line.split(":  ", 1)[1].strip()

    assert template_line() == f"flavor m1.small, server group spread (anti-affinity, {GROUP})"
    world.db.delete_server_group(GROUP)
    assert template_line() == f"flavor m1.small, server group {GROUP} (deleted: new members go to ERROR)"


def test_show_names_the_image_its_members_boot(conf_file, world):
    world.create(template={"flavor_name": "m1.small", "image": "berth-test-busy"})
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    [line] = [line for line in out.splitlines() if line.startswith("Template:")]
    assert line.split(":  ", 1)[1].strip() == "flavor m1.small, image berth-test-busy"


def test_show_says_why_a_member_failed(conf_file, world):
    web = _scaled_world(world)
    [first, *_] = world.db.list_scaling_group_members(web["uuid"])
    reason = "No valid host was found. AvailabilityZoneFilter removed 4 of 4 hosts " + "x" * 100
    world.db.update_instance(first["uuid"], {"state": states.ERROR, "fault_reason": reason})
    _, out, _ = run(conf_file, "show", "web", client=DirectClient(world))
    table = out.split("Member instances:\n", 1)[1].splitlines()
    assert _columns(table[0])[-1] == "Fault"
    [failed] = [line for line in table if first["uuid"] in line]
    assert "ERROR" in failed and failed.rstrip().endswith(reason[:77] + "...")
    assert all(line.rstrip().endswith("-") for line in table[2:] if first["uuid"] not in line)
