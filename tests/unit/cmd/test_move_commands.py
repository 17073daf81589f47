"""``berth server resize``, ``migrate``, ``migrations``, ``host evacuate`` and the moves ``berth server show``
lists: arguments, output and refusals (``host drain``: tests/unit/cmd/test_job_commands.py)."""

import io
import itertools
import json

import pytest

from scheduler import client as client_module
from scheduler import rpc
from scheduler.cmd import cli, waiting
from scheduler.cmd.arguments import CommandError, Interrupted
from tests.unit.cli_scheduler import fields, parse, stored_flavor, write_conf

U1 = "00000000-0000-4000-8000-000000000001"
U2 = "00000000-0000-4000-8000-000000000002"


def refusal(reason):
    """What a scheduler's InvalidRequest is, as the client raises it."""
    return rpc.RemoteError("InvalidRequest", reason, "Traceback (most recent call last): ...")


class Fleet:
    """A fake scheduler: instances on hosts, and the migrations it starts.

    A migration ends after ``polls`` asks for the instance's migrations: completed (the
    instance now on the next host of ``dests``), or error with ``fails[uuid]``; migrate_instance
    of an instance in ``refuse`` raises the scheduler's refusal. Every call is recorded, and
    the most migrations under way at once."""

    def __init__(self, instances=(), polls=2, fails=None, refuse=None):
        self.instances = {i["uuid"]: dict(i) for i in instances}
        self.migrations = []
        self.polls, self.fails, self.refuse = polls, fails or {}, refuse or {}
        self.asked = {}
        self.calls = []
        self.dests = itertools.cycle(["h2", "h3"])
        self.most_under_way = 0

    def admin_call(self, ctxt, method, **kwargs):
        self.calls.append((method, kwargs))
        if method == "show_flavor":
            return stored_flavor(kwargs["name"])
        if kwargs.get("host") == "nosuch":
            raise refusal("unknown host 'nosuch'")
        return {"host": kwargs["host"], "disabled_reason": kwargs.get("reason")}

    def list_instances(self, ctxt, host=None, name=None, **kwargs):
        self.calls.append(("list_instances", {"host": host, "name": name}))
        return [dict(i) for i in self.instances.values()
                if (host is None or i["host"] == host) and (name is None or i.get("display_name") == name)
                and i["state"] != "DELETED"]

    def show_instance(self, ctxt, instance_uuid):
        return dict(self.instances[instance_uuid])

    def list_hosts(self, ctxt):
        return [{"host": host} for host in ("h1", "h2", "h3")]

    def _under_way(self):
        return [m for m in self.migrations if m["status"] == "migrating"]

    def migrate_instance(self, ctxt, instance_uuid, host=None, force=False, live=False):
        self.calls.append(("migrate_instance", {"instance_uuid": instance_uuid, "host": host,
                                                "force": force, "live": live}))
        if instance_uuid in self.refuse:
            raise refusal(self.refuse[instance_uuid])
        instance = self.instances[instance_uuid]
        migration = {"id": len(self.migrations) + 1, "instance_uuid": instance_uuid,
                     "kind": "live-migration" if live else "migration", "status": "migrating",
                     "source_host": instance["host"], "dest_host": host or next(self.dests),
                     "created_at": "2026-12-03T10:00:00.000000Z", "finished_at": None, "reason": None}
        self.migrations.append(migration)
        instance["state"] = "MIGRATING"
        self.most_under_way = max(self.most_under_way, len(self._under_way()))
        return dict(migration)

    def list_migrations(self, ctxt, host=None, status=None, instance_uuid=None):
        self.calls.append(("list_migrations", {"host": host, "status": status,
                                               "instance_uuid": instance_uuid}))
        if instance_uuid is not None and status is None:
            self.asked[instance_uuid] = self.asked.get(instance_uuid, 0) + 1
            if self.asked[instance_uuid] >= self.polls:
                self._end(instance_uuid)
        return [dict(m) for m in reversed(self.migrations)
                if (instance_uuid is None or m["instance_uuid"] == instance_uuid)
                and (status is None or m["status"] == status)
                and (host is None or host in (m["source_host"], m["dest_host"]))]

    def _end(self, uuid):
        for migration in self._under_way():
            if migration["instance_uuid"] != uuid:
                continue
            instance = self.instances[uuid]
            instance["state"] = "ACTIVE"
            migration["finished_at"] = "2026-12-03T10:01:00.000000Z"
            if migration["kind"] == "resize" and uuid not in self.fails:
                migration["status"], instance["state"] = "finished", "VERIFY_RESIZE"
            elif uuid in self.fails:
                migration.update(status="error", reason=self.fails[uuid])
            else:
                migration["status"] = "completed"
                instance["host"] = migration["dest_host"]

    def resize_instance(self, ctxt, instance_uuid, flavor):
        self.calls.append(("resize_instance", {"instance_uuid": instance_uuid, "flavor": flavor}))
        migration = {"id": 7, "instance_uuid": instance_uuid, "kind": "resize", "status": "migrating",
                     "step": "prepare", "source_host": "h1", "dest_host": "h1",
                     "created_at": "2026-12-03T10:00:00.000000Z"}
        self.migrations.append(migration)
        return dict(migration)

    def confirm_resize(self, ctxt, instance_uuid):
        self.calls.append(("confirm_resize", {"instance_uuid": instance_uuid}))
        return {"id": 7, "instance_uuid": instance_uuid, "kind": "resize", "status": "confirmed",
                "source_host": "h1", "dest_host": "h2"}

    def revert_resize(self, ctxt, instance_uuid):
        self.calls.append(("revert_resize", {"instance_uuid": instance_uuid}))
        raise refusal(f"instance {instance_uuid} is ACTIVE: there is no resize to revert")

    def evacuate_host(self, ctxt, host):
        self.calls.append(("evacuate_host", {"host": host}))
        answers = []  # as the scheduler answers: each instance's migration, or why it stays
        for found in self.list_instances(ctxt, host):
            try:
                migration = self.migrate_instance(ctxt, found["uuid"])
                answers.append({"instance_uuid": found["uuid"], "migration": migration})
            except rpc.RemoteError as exc:
                answers.append({"instance_uuid": found["uuid"], "error": exc.value})
        return answers


def instance(n, host="h1", state="ACTIVE", name=None):
    return {"uuid": f"00000000-0000-4000-8000-{n:012d}", "state": state, "host": host,
            "display_name": name, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


def run(conf_file, fleet, *argv):
    """Parse ``argv`` and run its command against ``fleet``: (status, output)."""
    args = parse(conf_file, *argv)
    out = io.StringIO()
    return args.func(fleet, args, out), out.getvalue()


def sent(fleet, method):
    return [kwargs for name, kwargs in fleet.calls if name == method]


# -- resize, migrate, migrations, evacuate ----------------------------------------------


def test_resize_to_a_named_flavor_prints_the_migration(conf_file):
    fleet = Fleet([instance(1, name="web-1")])
    status, out = run(conf_file, fleet, "resize", "web-1", "--flavor", "m1.small")
    assert status == 0
    [asked] = sent(fleet, "resize_instance")
    assert asked["instance_uuid"] == U1 and asked["flavor"]["memory_mb"] == 2048
    header, row = out.splitlines()
    assert header.split() == ["ID", "INSTANCE", "KIND", "STATUS", "STEP", "SOURCE", "DEST", "CREATED",
                              "FINISHED", "DOWNTIME", "TRANSFER", "REASON"]
    assert row.split() == ["7", U1, "resize", "migrating", "prepare", "h1", "h1",
                           "2026-12-03T10:00:00.000000Z", "-", "-", "-", "-"]


def test_resize_to_an_unnamed_flavor_as_boot_takes_it_its_disks_and_extra_specs_kept(conf_file):
    specs = {"resources:VGPU": "1", "trait:CUSTOM_SSD": "required"}
    stored = {"instance_type": {"memory_mb": 512, "vcpus": 1, "extra_specs": specs}}
    fleet = Fleet([dict(instance(1), root_gb=20, ephemeral_gb=5, request_spec=stored)])
    status, out = run(conf_file, fleet, "resize", U1, "--flavor-ram", "1024", "--flavor-vcpus", "2",
                      "-f", "json")
    assert status == 0
    assert json.loads(out)[0]["KIND"] == "resize"
    status, _ = run(conf_file, fleet, "resize", U1, "--flavor-ram", "1024", "--flavor-vcpus", "2",
                    "--flavor-disk", "40")
    assert sent(fleet, "resize_instance") == [
        {"instance_uuid": U1, "flavor": {"memory_mb": 1024, "root_gb": 20, "ephemeral_gb": 5, "vcpus": 2,
                                         "extra_specs": specs}},
        {"instance_uuid": U1, "flavor": {"memory_mb": 1024, "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2,
                                         "extra_specs": specs}}]


def test_confirm_and_revert(conf_file):
    fleet = Fleet([instance(1)])
    status, out = run(conf_file, fleet, "resize", U1, "--confirm", "-f", "value", "-c", "status")
    assert (status, out) == (0, "confirmed\n")
    with pytest.raises(rpc.RemoteError, match="there is no resize to revert"):
        run(conf_file, fleet, "resize", U1, "--revert")
    assert [name for name, _ in fleet.calls] == ["confirm_resize", "revert_resize"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--confirm", "--flavor", "m1.small"], "--confirm takes no flavor"),
    (["--revert", "--flavor-ram", "512"], "--revert takes no flavor"),
    ([], "give the new flavor (--flavor NAME, or --flavor-ram and --flavor-vcpus), or --confirm or --revert"),
    (["--flavor", "m9.huge"], "m9.huge"),
    (["--flavor-ram", "512"], "give --flavor NAME, or --flavor-ram and --flavor-vcpus"),
    (["--flavor", "m1.tiny", "--flavor-vcpus", "2"], "give either --flavor or --flavor-ram"),
])
def test_a_bad_resize_is_refused_before_anything_is_sent(conf_file, argv, message):
    fleet = Fleet([instance(1)])
    with pytest.raises(CommandError) as refused:
        run(conf_file, fleet, "resize", U1, *argv)
    assert message in str(refused.value)
    assert [call for call, _ in fleet.calls if call != "show_flavor"] == []  # looked up, nothing sent


@pytest.mark.parametrize(("argv", "message"), [
    (["resize", U1, "--confirm", "--revert"], "argument --revert: not allowed with argument --confirm"),
    (["resize", U1, "--flavor-ram", "0"], "must be at least 1, got 0"),
    (["migrations", "--state", "gone"], "invalid choice: 'gone'"),
    (["host", "drain", "h1", "--max-parallel", "0"], "must be at least 1, got 0"),
    (["host", "evacuate"], "the following arguments are required: HOST"),
    (["migrate"], "the following arguments are required: INSTANCE"),
])
def test_bad_arguments_exit_2_with_the_reason(conf_file, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_migrate_lets_the_scheduler_choose_or_goes_where_told(conf_file):
    fleet = Fleet([instance(1), instance(2)])
    status, out = run(conf_file, fleet, "migrate", U1, "-f", "json")
    assert status == 0
    assert json.loads(out)[0]["DEST"] == "h2"
    run(conf_file, fleet, "migrate", U2, "--live", "--host", "h7", "--force")
    assert sent(fleet, "migrate_instance") == [
        {"instance_uuid": U1, "host": None, "force": False, "live": False},
        {"instance_uuid": U2, "host": "h7", "force": True, "live": True}]


def test_force_without_a_host_is_refused_before_anything_is_sent(conf_file):
    fleet = Fleet([instance(1)])
    with pytest.raises(CommandError, match="--force needs --host HOST"):
        run(conf_file, fleet, "migrate", U1, "--force")
    assert fleet.calls == []


def test_migrations_filter_by_host_status_and_instance(conf_file):
    fleet = Fleet([instance(1, name="web-1"), instance(2)])
    fleet.migrate_instance({}, U1)
    fleet.migrate_instance({}, U2)
    status, out = run(conf_file, fleet, "migrations", "-f", "value", "-c", "id", "-c", "instance")
    assert (status, out) == (0, f"2 {U2}\n1 {U1}\n")
    _, out = run(conf_file, fleet, "migrations", "--host", "h3", "--state", "MIGRATING",
                 "--instance", "web-1")
    assert sent(fleet, "list_migrations")[-1] == {"host": "h3", "status": "migrating", "instance_uuid": U1}
    assert out.splitlines() == [
        "ID  INSTANCE  KIND  STATUS  STEP  SOURCE  DEST  CREATED  FINISHED  DOWNTIME  TRANSFER  REASON"]


def test_migrations_of_a_host_that_never_reported_are_refused_rather_than_listed_empty(conf_file):
    fleet = Fleet([instance(1)])
    assert run(conf_file, fleet, "migrations", "--host", "h2", "-f", "value")[1] == ""  # no move touched it
    with pytest.raises(CommandError, match=r"^no host 'h9' has reported, and no move is from or to it "
                                           r"\(berth host list names them\)$"):
        run(conf_file, fleet, "migrations", "--host", "h9")


def test_migrations_show_a_live_migrations_downtime_and_transfer_in_seconds(conf_file):
    fleet = Fleet([instance(1, name="web-1")])
    fleet.migrate_instance({}, U1, live=True)
    fleet.migrations[0].update(status="completed", figures={"downtime_ms": 61, "total_ms": 1843,
                                                             "memory_bytes": 9 << 20})
    status, out = run(conf_file, fleet, "migrations", "-f", "json", "-c", "kind", "-c", "downtime",
                      "-c", "transfer")
    assert (status, json.loads(out)) == (0, [{"KIND": "live-migration", "DOWNTIME": 0.061,
                                              "TRANSFER": 1.843}])


def test_evacuate_lists_the_migrations_started(conf_file):
    fleet = Fleet([instance(1), instance(2), instance(3, host="h9")])
    status, out = run(conf_file, fleet, "host", "evacuate", "h1", "-f", "value", "-c", "instance",
                      "-c", "source")
    assert (status, out) == (0, f"{U1} h1\n{U2} h1\n")
    fleet = Fleet([instance(1), instance(2)])
    status, out = run(conf_file, fleet, "host", "evacuate", "h1")
    assert status == 0 and out.splitlines()[-1] == (
        "evacuated instances are rebuilt from their image on their new host: what their disks on h1 held "
        "is lost (unless its driver keeps them on shared storage)")
    assert run(conf_file, fleet, "host", "evacuate", "h5") == (0, "host h5 has no instance to evacuate\n")
    assert run(conf_file, fleet, "host", "evacuate", "h5", "-f", "json") == (0, "[]\n")


def test_evacuate_says_which_instance_stays_and_why(conf_file, capsys):
    why = f"Instance {U2} cannot be moved (evacuation): No valid host was found: RamFilter removed 3"
    fleet = Fleet([instance(1), instance(2)], refuse={U2: why})
    status, out = run(conf_file, fleet, "host", "evacuate", "h1", "-f", "value", "-c", "instance")
    assert (status, out) == (1, f"{U1}\n")
    assert capsys.readouterr().err == (
        "evacuated instances are rebuilt from their image on their new host: what their disks on h1 held "
        f"is lost (unless its driver keeps them on shared storage)\nnot evacuated: {U2}: {why}\n")


# -- --wait --------------------------------------------------------------------------------


class Clock:
    """Stands for the time module of scheduler.cmd.waiting: a second passes at each look, and
    a sleep takes no time."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 1
        return self.now

    def sleep(self, seconds):
        pass


@pytest.fixture
def clock(monkeypatch):
    found = Clock()
    monkeypatch.setattr(waiting, "time", found)
    return found


def test_migrate_wait_waits_for_the_move_to_end_telling_it_and_prints_it_as_it_ended(conf_file, clock,
                                                                                    capsys):
    fleet = Fleet([instance(1, name="web-1")], polls=3)
    status, out = run(conf_file, fleet, "migrate", "web-1", "--live", "--wait", "-f", "value", "-c", "status",
                      "-c", "dest")
    assert (status, out) == (0, "completed h2\n")
    assert sent(fleet, "list_migrations") == [{"host": None, "status": None, "instance_uuid": U1}] * 3
    assert capsys.readouterr().err == f"migration 1 of {U1} (web-1) completed from h1 to h2\n"


def test_a_move_that_fails_while_waited_for_exits_1_with_its_reason(conf_file, clock, capsys):
    fleet = Fleet([instance(1)], fails={U1: "disk full on h2"})
    status, out = run(conf_file, fleet, "migrate", U1, "--wait", "-f", "value", "-c", "status",
                      "-c", "reason")
    assert (status, out) == (1, "error disk full on h2\n")
    assert capsys.readouterr().err == f"migration 1 of {U1} error from h1 to h2: disk full on h2\n"


def test_resize_wait_ends_when_the_resize_waits_to_be_confirmed(conf_file, clock, capsys):
    fleet = Fleet([instance(1)])
    status, out = run(conf_file, fleet, "resize", U1, "--flavor", "m1.small", "--wait", "-f", "value",
                      "-c", "status")
    assert (status, out) == (0, "finished\n")
    assert fleet.instances[U1]["state"] == "VERIFY_RESIZE"
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"resized: check it, then berth server resize {U1} --confirm (or --revert)")


def test_evacuate_wait_waits_for_every_instance_rebuilt(conf_file, clock, capsys):
    fleet = Fleet([instance(1), instance(2)])
    status, out = run(conf_file, fleet, "host", "evacuate", "h1", "--wait", "-f", "value", "-c", "instance",
                      "-c", "status")
    assert (status, out) == (0, f"{U1} completed\n{U2} completed\n")
    told = [line for line in capsys.readouterr().err.splitlines() if line.startswith("migration ")]
    assert told == [f"migration 1 of {U1} completed from h1 to h2",
                    f"migration 2 of {U2} completed from h1 to h3"]


def test_a_move_wait_that_times_out_names_the_moves_still_under_way(conf_file, clock):
    fleet = Fleet([instance(1, name="web-1"), instance(2)], polls=100)
    with pytest.raises(CommandError) as raised:
        run(conf_file, fleet, "host", "evacuate", "h1", "--wait", "--timeout", "5")
    assert str(raised.value) == (
        f"timed out after 5 s waiting for 2 of 2 move(s): still migration 1 of {U1} (web-1) migrating "
        f"from h1 to h2, migration 2 of {U2} migrating from h1 to h3")


def test_ctrl_c_in_a_move_wait_says_the_moves_go_on_and_exits_130(conf_file, clock):
    class Interrupting(Fleet):
        def list_migrations(self, ctxt, **kwargs):
            if kwargs.get("instance_uuid"):
                raise KeyboardInterrupt
            return super().list_migrations(ctxt, **kwargs)

    with pytest.raises(Interrupted) as raised:
        run(conf_file, Interrupting([instance(1)]), "migrate", U1, "--wait")
    assert raised.value.exit_code == 130
    assert str(raised.value) == ("interrupted: 1 move(s) still migrating; the moves go on: "
                                 "`berth server migration list` shows them")


def test_a_refusal_is_one_line_with_the_reason_and_exit_1(conf_file, capsys, monkeypatch):
    fleet = Fleet([instance(1)], refuse={U1: "no host in zone az1 has 512 MB RAM free"})
    monkeypatch.setattr(client_module, "SchedulerClient", lambda transport, **options: fleet)
    out = io.StringIO()
    status = cli.main(["--config-file", str(conf_file), "migrate", U1], out=out)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
    assert (status, out.getvalue()) == (1, "")
    assert err == ["berth: no host in zone az1 has 512 MB RAM free"]


def test_a_cap_below_the_moves_api_is_refused_as_one_line(tmp_path, capsys):
    conf_file = write_conf(tmp_path, "[upgrade_levels]\nscheduler = 1.0\n")
    out = io.StringIO()
    status = cli.main(["--config-file", str(conf_file), "migrations"], out=out)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
    assert status == 1 and len(err) == 1
    assert err[0].startswith("berth: list_migrations needs version 1.1 of the scheduler API, above its cap")


# -- berth server show: the moves ---------------------------------------------------------------


def _shown(conf_file, fleet, reference=U1):
    status, out = run(conf_file, fleet, "show", reference)
    assert status == 0
    return fields(out)


def test_show_lists_the_moves_newest_first_under_the_usual_lines(conf_file):
    fleet = Fleet([instance(1, name="web-1")], polls=1, fails={U1: "disk full on h2"})
    fleet.migrate_instance({}, U1)
    fleet.list_migrations({}, instance_uuid=U1)  # it ends, in error
    fleet.fails, fleet.polls = {}, 100
    fleet.migrate_instance({}, U1, host="h3")  # under way
    usual = _shown(conf_file, fleet)
    assert (usual["uuid"], usual["name"], usual["state"]) == (U1, "web-1", "MIGRATING")
    assert usual["moves"].splitlines() == [
        "migration h1 -> h3, 2026-12-03T10:00:00.000000Z to now: migrating",
        "migration h1 -> h2, 2026-12-03T10:00:00.000000Z to 2026-12-03T10:01:00.000000Z: "
        "error: disk full on h2",
    ]


def test_show_of_an_instance_never_moved_is_as_it_was(conf_file):
    fleet = Fleet([instance(1, name="web-1")])
    assert list(_shown(conf_file, fleet, "web-1")) == [
        "uuid", "name", "state", "host", "node", "zone", "flavor_name", "memory_mb", "root_gb",
        "ephemeral_gb", "vcpus", "project", "server_group", "hints", "attempts", "fault_reason",
        "request_id", "created_at", "updated_at", "scheduled_at", "launched_at", "deleted_at", "moves"]


def test_show_names_the_project_server_group_and_hints_of_the_request(conf_file):
    hints = {"group": "web", "different_host": U1, "query": '[">=", "$free_ram_mb", 1024]'}
    fleet = Fleet([dict(instance(1), project_id="p1", filter_properties={"scheduler_hints": hints},
                        updated_at="2026-12-03T10:00:01.000000Z")])
    usual = _shown(conf_file, fleet)
    assert (usual["project"], usual["server_group"], usual["updated_at"]) == (
        "p1", "web", "2026-12-03T10:00:01.000000Z")
    assert usual["hints"] == f'different_host={U1}, query=[">=", "$free_ram_mb", 1024]'
    status, out = run(conf_file, fleet, "show", U1, "-f", "json")
    record = json.loads(out)
    assert (record["project"], record["server_group"]) == ("p1", "web")


def test_show_prints_the_other_host_of_a_moving_instance(conf_file):
    fleet = Fleet([dict(instance(1, state="VERIFY_RESIZE", host="h2"), move_host="h1")])
    assert _shown(conf_file, fleet)["move_host"] == "h1"


@pytest.mark.parametrize("error", [
    rpc.RemoteError("UnsupportedVersion", "Endpoint does not support RPC version 1.1", ""),
    rpc.RPCVersionCapError("list_migrations", "1.1", "1.0", "scheduler"),
])
def test_show_works_against_a_scheduler_that_predates_moves(conf_file, error):
    class OldScheduler(Fleet):
        def list_migrations(self, ctxt, **kwargs):
            raise error

    old, new = OldScheduler([instance(1)]), Fleet([instance(1)])
    assert _shown(conf_file, old) == dict(_shown(conf_file, new), moves="None")


def test_show_as_json_is_one_object_with_every_field_and_the_moves(conf_file):
    fleet = Fleet([dict(instance(1, name="web-1"), request_spec={"instance_properties": {
        "availability_zone": "az1"}}, move_host=None)], polls=1, fails={U1: "disk full on h2"})
    fleet.migrate_instance({}, U1)
    fleet.list_migrations({}, instance_uuid=U1)  # it ends, in error
    status, out = run(conf_file, fleet, "show", U1, "-f", "json")
    assert status == 0
    shown = json.loads(out)
    assert (shown["uuid"], shown["name"], shown["zone"], shown["memory_mb"]) == (U1, "web-1", "az1", 512)
    assert "display_name" not in shown  # it is "name", as in the lines
    assert shown["request_spec"] == {"instance_properties": {"availability_zone": "az1"}}
    assert "move_host" in shown and "fault_reason" in shown
    [move] = shown["moves"]
    assert move == {"id": 1, "kind": "migration", "status": "error", "source_host": "h1", "dest_host": "h2",
                    "created_at": "2026-12-03T10:00:00.000000Z", "finished_at": "2026-12-03T10:01:00.000000Z",
                    "reason": "disk full on h2", "figures": None}


def test_show_picks_columns_and_the_other_formats(conf_file):
    fleet = Fleet([instance(1, name="web-1")])
    status, out = run(conf_file, fleet, "show", U1, "-f", "value", "-c", "state", "-c", "moves")
    assert (status, out.split()) == (0, ["ACTIVE", "none"])
    status, out = run(conf_file, fleet, "show", U1, "-f", "yaml", "-c", "host")
    assert (status, out) == (0, "host: h1\n")
    with pytest.raises(CommandError, match="no column 'nope'"):
        run(conf_file, fleet, "show", U1, "-f", "json", "-c", "nope")
