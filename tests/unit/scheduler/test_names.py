"""Instances and server groups named by name: ``berth server create --name``, NAME, FLAVOR and ZONE in
the listings, a name wherever a UUID goes, and MEMBERS counting live instances.

The CLI's own main() against a scheduler's two endpoints on memory:// and SQLite (the
``scheduler`` fixture of test_admin_commands: one host, h1), unless said otherwise."""

import json
import time
import uuid as uuidlib

import pytest

from scheduler import rpc
from scheduler.cmd import references
from scheduler.cmd.arguments import CommandError
from scheduler.db.api import Database
from tests.unit.cli_scheduler import fields
from tests.unit.cmd.test_admin_commands import conf_file, main, run, scheduler  # noqa: F401
from tests.unit.scheduler.manager_world import casts, request

TINY = ("--flavor", "m1.tiny")


def berth(capsys, conf_file, *argv):  # noqa: F811
    """(status, stdout, the CLI's lines on stderr) of ``berth argv``."""
    capsys.readouterr()
    status, out = main(conf_file, *argv)
    # In-process, other tests' log handlers may write to stderr too: keep the CLI's lines.
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
    return status, out, errors


def boot(capsys, conf_file, database, *argv):  # noqa: F811
    """``berth server create`` (a cast): the new instances' UUIDs, once the scheduler has recorded them."""
    status, out, errors = berth(capsys, conf_file, "boot", *TINY, *argv)
    assert status == 0, errors
    uuids = out.split()
    deadline = time.monotonic() + 10
    while len(database.get_instances(uuids)) < len(uuids):
        assert time.monotonic() < deadline, "the scheduler did not record the instances"
        time.sleep(0.02)
    return uuids


def refused(capsys, conf_file, *argv):  # noqa: F811
    """The one line ``berth argv`` printed to refuse it (exit status 1, nothing on stdout)."""
    status, out, errors = berth(capsys, conf_file, *argv)
    assert (status, out) == (1, "") and len(errors) == 1, (status, out, errors)
    return errors[0]


def everything(database):
    return (database.list_instances(include_deleted=True), database.list_server_groups(),
            [database.get_server_group(g["uuid"]) for g in database.list_server_groups()])


# -- names given, numbered and shown -------------------------------------------


def test_names_are_numbered_listed_shown_and_used_to_delete(scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    uuids = boot(capsys, conf_file, database, "--name", "web-%d", "--count", "3")
    assert [database.get_instance(u)["display_name"] for u in uuids] == ["web-1", "web-2", "web-3"]

    status, out, _ = berth(capsys, conf_file, "instances", "-f", "json")
    assert status == 0
    listed = {row["UUID"]: row for row in json.loads(out)}
    assert [(listed[u]["NAME"], listed[u]["FLAVOR"], listed[u]["ZONE"]) for u in uuids] == [
        ("web-1", "m1.tiny", None), ("web-2", "m1.tiny", None), ("web-3", "m1.tiny", None)]

    status, out, _ = berth(capsys, conf_file, "instances")
    header, *rows = out.splitlines()
    assert header.split() == ["UUID", "STATE", "HOST", "RAM", "MB", "DISK", "GB", "VCPUS", "FAULT", "NAME",
                              "FLAVOR", "ZONE"]
    # what scripts read by position stays where it was
    assert sorted(row.split()[:3] for row in rows) == sorted([u, "SCHEDULED", "h1"] for u in uuids)
    assert {row.split()[0]: row.split()[7:] for row in rows}[uuids[1]] == ["web-2", "m1.tiny", "-"]

    status, out, _ = berth(capsys, conf_file, "show", "web-2")
    assert status == 0
    shown = fields(out)
    assert (shown["uuid"], shown["name"], shown["flavor_name"], shown["zone"]) == (
        uuids[1], "web-2", "m1.tiny", "None")

    status, out, _ = berth(capsys, conf_file, "delete", "web-1")
    assert (status, out) == (0, f"{uuids[0]} deleting\n")
    assert [database.get_instance(u)["state"] for u in uuids] == ["DELETING", "SCHEDULED", "SCHEDULED"]

    # Once DELETED, its name names nothing; a new instance may take it.
    database.update_instance(uuids[0], {"state": "DELETED"})
    assert refused(capsys, conf_file, "show", "web-1") == "berth: No instance named web-1"
    [again] = boot(capsys, conf_file, database, "--name", "web-1")
    status, out, _ = berth(capsys, conf_file, "show", "web-1")
    assert status == 0 and fields(out)["uuid"] == again


def test_without_percent_d_several_instances_are_numbered_as_nova_numbers_them(
        scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    several = boot(capsys, conf_file, database, "--name", "db", "--count", "2")
    [one] = boot(capsys, conf_file, database, "--name", "solo")
    [unnamed] = boot(capsys, conf_file, database)
    names = {u: i["display_name"] for u, i in database.get_instances(several + [one, unnamed]).items()}
    assert [names[u] for u in several + [one, unnamed]] == ["db-1", "db-2", "solo", None]
    status, out, _ = berth(capsys, conf_file, "show", unnamed)
    assert status == 0 and fields(out)["name"] == "None"


def test_the_zone_shown_is_the_one_asked_for(scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    [uuid] = boot(capsys, conf_file, database, "--name", "zoned", "--availability-zone", "nova")
    status, out, _ = berth(capsys, conf_file, "instances", "-f", "value", "-c", "name", "-c", "zone")
    assert out == "zoned nova\n"
    status, out, _ = berth(capsys, conf_file, "show", "zoned")
    assert (fields(out)["zone"], fields(out)["uuid"]) == ("nova", uuid)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "argument --name: must be a non-empty string of at most 255 characters"),
        (" web", "argument --name: must be printable text that does not start or end with a space"),
        ("web\t1", "argument --name: must not hold control characters"),
    ],
)
def test_a_bad_name_is_refused_before_anything_is_sent(conf_file, capsys, name, message):  # noqa: F811
    with pytest.raises(SystemExit) as exited:
        run(conf_file, "boot", *TINY, "--name", name)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_name_too_long_once_numbered_is_refused_before_anything_is_sent(
        scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    message = refused(capsys, conf_file, "boot", *TINY, "--name", "x" * 254, "--count", "2")
    assert message.startswith("berth: --name: 'xxx") and message.endswith("is longer than 255 characters")
    assert database.list_instances(include_deleted=True) == []


def test_boot_sends_the_name_in_the_request(conf_file):  # noqa: F811
    status, out, client = run(conf_file, "boot", *TINY, "--name", "web-%d", "--count", "2")
    [_flavor, (method, sent)] = client.calls
    assert method == "run_instance"
    assert sent["request_spec"]["instance_properties"] == {"project_id": "admin", "display_name": "web-%d"}
    assert out.split() == sent["request_spec"]["instance_uuids"]


# -- names that name nothing, or several ------------------------------------------


#: A UUID no instance has.
GONE = "0b7c6a2e-3f1d-4e5a-8b9c-0d1e2f3a4b5c"


def test_unknown_and_ambiguous_names_are_refused_and_change_nothing(scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    first = boot(capsys, conf_file, database, "--name", "dup")[0]
    second = boot(capsys, conf_file, database, "--name", "dup")[0]
    [other] = boot(capsys, conf_file, database, "--name", "other")
    before = everything(database)
    ambiguous = f"Name dup is ambiguous: 2 instances ({second}, {first}); use a UUID"
    for argv, message in [
        (["show", "dup"], f"berth: {ambiguous}"),
        (["show", "nosuch"], "berth: No instance named nosuch"),
        (["delete", "dup"], f"berth: {ambiguous}; nothing deleted"),
        (["delete", other, "nosuch"], "berth: No instance named nosuch; nothing deleted"),
        (["delete", "other", str(uuidlib.uuid4())], "berth: No instance "),
        (["boot", *TINY, "--hint", "same_host=dup"], f"berth: --hint same_host=dup: {ambiguous}"),
        (["boot", *TINY, "--hint", "different_host=nosuch"],
         "berth: --hint different_host=nosuch: no instance named or with UUID nosuch"),
        (["boot", *TINY, "--hint", f"same_host={GONE}"],
         f"berth: --hint same_host={GONE}: no instance named or with UUID {GONE}"),
        (["boot", *TINY, "--hint", "same_host=" + "n" * 300],  # a name the scheduler refuses to look up
         f"berth: --hint same_host={'n' * 300}: no instance named or with UUID {'n' * 300}"),
    ]:
        assert refused(capsys, conf_file, *argv).startswith(message)
    assert everything(database) == before

    status, out, _ = berth(capsys, conf_file, "show", first)  # a UUID still names either
    assert status == 0 and fields(out)["name"] == "dup"


def test_an_ambiguous_name_lists_at_most_ten_uuids():
    class Client:
        def list_instances(self, ctxt, name=None):
            return [{"uuid": f"u{i}"} for i in range(12)]

    with pytest.raises(CommandError) as refusal:
        references.instance_uuid(Client(), "many")
    assert str(refusal.value) == ("Name many is ambiguous: 12 instances (u0, u1, u2, u3, u4, u5, u6, u7, u8, "
                                  "u9, ...); use a UUID")


def test_hints_name_instances_by_name(scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    [anchor] = boot(capsys, conf_file, database, "--name", "anchor")
    [near] = boot(capsys, conf_file, database, "--name", "near", "--hint", "same_host=anchor")
    record = database.get_instance(near)
    assert record["filter_properties"]["scheduler_hints"] == {"same_host": anchor}
    assert (record["state"], record["host"]) == ("SCHEDULED", "h1")


# -- server groups by name; MEMBERS ------------------------------------------------


def test_server_groups_by_name_and_members_that_are_live(scheduler, conf_file, capsys):  # noqa: F811
    database = scheduler
    status, out, _ = berth(capsys, conf_file, "server-group", "create", "--policy", "affinity", "web",
                           "-f", "value", "-c", "uuid")
    group = out.strip()
    members = boot(capsys, conf_file, database, "--name", "m-%d", "--count", "3", "--hint", "group=web")
    record = database.get_instance(members[0])
    assert record["filter_properties"]["scheduler_hints"] == {"group": group}

    def listed():
        status, out, _ = berth(capsys, conf_file, "server-group", "list", "-f", "json")
        return [(g["NAME"], g["MEMBERS"]) for g in json.loads(out)]

    assert listed() == [("web", 3)]
    database.update_instance(members[0], {"state": "DELETED"})
    database.update_instance(members[1], {"state": "ERROR"})  # a member until deleted, as in Nova
    assert listed() == [("web", 2)]
    status, out, _ = berth(capsys, conf_file, "server-group", "show", "web", "-f", "json")
    assert status == 0 and json.loads(out)["members"] == [members[1], members[2]]
    assert json.loads(out)["uuid"] == group

    # Another group of the same name: the name names neither any more.
    status, out, _ = berth(capsys, conf_file, "server-group", "create", "--policy", "affinity", "web",
                           "-f", "value", "-c", "uuid")
    twin = out.strip()
    before = everything(database)
    ambiguous = f"berth: Name web is ambiguous: 2 server groups ({group}, {twin}); use a UUID"
    for argv in (["server-group", "show", "web"], ["server-group", "delete", "web"],
                 ["boot", *TINY, "--hint", "group=web"]):
        assert refused(capsys, conf_file, *argv) == ambiguous
    assert refused(capsys, conf_file, "server-group", "delete", "nosuch") == (
        "berth: No server group named nosuch")
    assert refused(capsys, conf_file, "boot", *TINY, "--hint", "group=nosuch") == (
        "berth: No server group named nosuch")
    assert everything(database) == before

    status, out, _ = berth(capsys, conf_file, "server-group", "delete", twin)
    assert (status, out) == (0, f"server group {twin} deleted\n")
    status, out, _ = berth(capsys, conf_file, "server-group", "delete", "web")
    assert (status, out) == (0, f"server group {group} deleted\n")
    assert database.list_server_groups() == []


def test_the_scheduler_keeps_members_that_are_deleted_for_placement(tmp_path):
    """Only listings leave DELETED members out: placement reads the group as it always has."""
    database = Database(f"sqlite:///{tmp_path}/berth.sqlite")
    database.sync()
    try:
        group = str(uuidlib.uuid4())
        database.create_server_group(group, "web", "affinity")
        gone, failed, live, unwritten = (str(uuidlib.uuid4()) for _ in range(4))
        database.create_instances([
            {"uuid": u, "state": state, "memory_mb": 1, "root_gb": 0, "ephemeral_gb": 0, "vcpus": 1}
            for u, state in ((gone, "DELETED"), (failed, "ERROR"), (live, "ACTIVE"))])
        database.add_server_group_members(group, [gone, failed, live, unwritten])
        assert database.get_server_group(group)["members"] == [gone, failed, live, unwritten]
        assert database.get_server_group(group, live_members=True)["members"] == [failed, live, unwritten]
        [listed] = database.list_server_groups(name="web", live_members=True)
        assert listed["members"] == [failed, live, unwritten]
        assert database.list_server_groups(name="nosuch") == []
    finally:
        database.dispose()


# -- the scheduler records each instance's name ------------------------------------


def test_each_instance_is_recorded_and_built_with_its_own_name(world):
    manager, database, agents = world
    uuids, spec, props = request(count=2)
    spec["instance_properties"] = {"display_name": "web"}
    manager.run_instance(rpc.Context({}), spec, props)
    built = [call for calls in casts(agents, 2).values() for call in calls]
    assert sorted((c[1]["uuid"], c[2]["instance_properties"]["display_name"]) for c in built) == sorted(
        zip(uuids, ["web-1", "web-2"], strict=True))
    assert [database.get_instance(u)["display_name"] for u in uuids] == ["web-1", "web-2"]
    assert [i["uuid"] for i in manager.list_instances({}, name="web-2")] == [uuids[1]]
    assert manager.list_instances({}, name="web") == []

    # Sent back by its host, the second one is placed again under the name it has.
    [(_, _, request_spec, filter_properties)] = [c for c in built if c[1]["uuid"] == uuids[1]]
    host = database.get_instance(uuids[1])["host"]
    retry = {"num_attempts": 1, "hosts": [[host, host]], "exc_reason": f"{host}: failed"}
    manager.run_instance(rpc.Context({}), request_spec, {"retry": retry})
    casts(agents, 3)
    record = database.get_instance(uuids[1])
    assert (record["attempts"], record["display_name"]) == (2, "web-2")
    assert record["request_spec"]["instance_properties"]["display_name"] == "web-2"


def test_a_bad_name_filter_is_refused(world):
    from scheduler.exception import InvalidRequest

    manager, _, _ = world
    with pytest.raises(InvalidRequest, match="list_instances: name: must not hold control characters"):
        manager.list_instances({}, name="web\x00")
