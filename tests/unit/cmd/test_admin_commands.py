"""``berth aggregate ...``, ``berth server group ...`` and the boot hints: parsing, and
the whole command over memory:// against a real scheduler endpoint."""

import io
import json
import uuid as uuidlib

import pytest

from scheduler.admin.flavors import FlavorEndpoint
from scheduler.admin.grouping import AdminEndpoint
from scheduler.cmd.arguments import CommandError
from scheduler.cmd.instance_commands import build_request
from tests.unit.cli_scheduler import cli_scheduler, main, parse, stored_flavor, write_conf

GROUP = "5f2b3c1e-8a4d-4e6f-9b0a-1c2d3e4f5a6b"


class FakeClient:
    """Records what a command asks of the scheduler; answers from ``answers``."""

    def __init__(self, **answers):
        self.calls = []
        self.answers = answers

    def admin_call(self, ctxt, method, **kwargs):
        self.calls.append((method, kwargs))
        if method == "show_flavor" and method not in self.answers:
            return stored_flavor(kwargs["name"])
        return self.answers.get(method)

    def list_instances(self, ctxt, **kwargs):
        """Every UUID asked for is an instance but those of ``missing``, as are those ``instances``
        ({name: [uuid...]}) names; not recorded in ``calls``."""
        if kwargs.get("uuids") is not None:
            return [{"uuid": u} for u in kwargs["uuids"] if u not in self.answers.get("missing", ())]
        return [{"uuid": u} for u in self.answers.get("instances", {}).get(kwargs.get("name"), [])]

    def run_instance(self, ctxt, request_spec, filter_properties):
        self.calls.append(
            ("run_instance", {"request_spec": request_spec, "filter_properties": filter_properties})
        )


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


def run(conf_file, *argv, **answers):
    """Parse ``argv`` and run its command against a FakeClient: (status, output, client)."""
    args = parse(conf_file, *argv)
    client, out = FakeClient(**answers), io.StringIO()
    status = args.func(client, args, out)
    return status, out.getvalue(), client


AGGREGATE = {
    "name": "az1agg",
    "availability_zone": "az1",
    "hosts": ["h1", "h2"],
    "metadata": {"availability_zone": "az1", "ssd": "true"},
}


# -- parsing -----------------------------------------------------------------


def test_aggregate_create_with_a_zone(conf_file):
    status, out, client = run(
        conf_file, "aggregate", "create", "az1agg", "--zone", "az1", create_aggregate=AGGREGATE
    )
    assert status == 0
    assert client.calls == [("create_aggregate", {"name": "az1agg", "availability_zone": "az1"})]
    assert fields(out) == {"name": "az1agg", "zone": "az1", "hosts": "h1, h2",  # as aggregate show prints it
                           "metadata": "availability_zone=az1\nssd=true"}


def fields(out):
    """{field: value} of a table of fields and values (cliff's ShowOne table), a value's lines
    (those wrapped or its own) joined by newlines."""
    found, field = {}, None
    for line in out.splitlines()[3:-1]:
        _, name, value, _ = (part.strip() for part in line.split("|"))
        if name:
            field = name
            found[field] = value
        else:
            found[field] += "\n" + value
    return found


def test_aggregate_create_without_a_zone(conf_file):
    plain = {"name": "plain", "availability_zone": None, "hosts": [], "metadata": {}}
    _, out, client = run(conf_file, "aggregate", "create", "plain", create_aggregate=plain)
    assert client.calls == [("create_aggregate", {"name": "plain", "availability_zone": None})]
    _, out, _ = run(conf_file, "aggregate", "create", "plain", "-f", "json", create_aggregate=plain)
    assert json.loads(out) == {"name": "plain", "zone": None, "hosts": [], "metadata": {}}


@pytest.mark.parametrize(
    ("argv", "method", "kwargs"),
    [
        (["aggregate", "add-host", "a", "h1"], "aggregate_add_host", {"name": "a", "host": "h1"}),
        (["aggregate", "remove-host", "a", "h1"], "aggregate_remove_host", {"name": "a", "host": "h1"}),
        (["aggregate", "show", "a"], "show_aggregate", {"name": "a"}),
        (
            ["aggregate", "set-metadata", "a", "ssd=true", "tier=", "old", "availability_zone=az2", "x=a=b"],
            "aggregate_set_metadata",
            {
                "name": "a",
                "metadata": {
                    "ssd": "true",
                    "tier": None,
                    "old": None,
                    "availability_zone": "az2",
                    "x": "a=b",
                },
            },
        ),
    ],
)
def test_aggregate_commands_call_the_endpoint(conf_file, argv, method, kwargs):
    status, out, client = run(conf_file, *argv, **{method: AGGREGATE})
    assert status == 0
    assert client.calls == [(method, kwargs)]
    assert "az1agg" in out


def test_aggregate_list_and_delete(conf_file):
    _, out, client = run(conf_file, "aggregate", "list", list_aggregates=[AGGREGATE, AGGREGATE])
    assert client.calls == [("list_aggregates", {})] and len(out.splitlines()) == 3
    _, out, client = run(conf_file, "aggregate", "delete", "az1agg")
    assert client.calls == [("delete_aggregate", {"name": "az1agg"})]
    assert out == "aggregate az1agg deleted\n"


@pytest.mark.parametrize(
    ("argv", "rules"),
    [
        (["--policy", "anti-affinity", "web"], {}),
        (["--policy", "anti-affinity", "--max-server-per-host", "2", "web"], {"max_server_per_host": 2}),
        (["web", "--policy", "soft-affinity"], {}),
    ],
)
def test_server_group_create_prints_the_group_as_show_does(conf_file, argv, rules):
    created = {"uuid": GROUP, "name": "web", "policy": "anti-affinity", "rules": rules, "members": []}
    status, out, client = run(conf_file, "server-group", "create", *argv, "-f", "json",
                              create_server_group=created)
    assert status == 0
    assert json.loads(out) == {"uuid": GROUP, "name": "web", "policy": "anti-affinity", "project_id": None,
                               "created_at": None, "rules": rules, "members": []}
    _, out, _ = run(conf_file, "server-group", "create", *argv, "-f", "value", "-c", "uuid",
                    create_server_group=created)
    assert out == f"{GROUP}\n"
    [(method, kwargs)] = client.calls
    assert method == "create_server_group"
    assert kwargs == {"name": "web", "policy": argv[argv.index("--policy") + 1], "rules": rules}


def test_server_group_list_show_delete(conf_file):
    group = {
        "uuid": GROUP,
        "name": "web",
        "policy": "anti-affinity",
        "rules": {"max_server_per_host": 2},
        "members": ["m1", "m2"],
        "project_id": None,
        "created_at": "2024-01-01T00:00:00Z",
    }
    _, out, client = run(conf_file, "server-group", "list", list_server_groups=[group])
    assert out.splitlines()[1].split() == [
        GROUP,
        "web",
        "anti-affinity",
        '{"max_server_per_host":',
        "2}",
        "2",
    ]
    _, out, client = run(conf_file, "server-group", "show", GROUP, show_server_group=group)
    assert client.calls == [("show_server_group", {"group_uuid": GROUP})]
    assert "| project_id | None" in out and "| members    | m1 " in out and "|            | m2 " in out
    _, out, client = run(conf_file, "server-group", "show", GROUP, "-f", "json", show_server_group=group)
    assert json.loads(out) == {"uuid": GROUP, "name": "web", "policy": "anti-affinity", "project_id": None,
                               "created_at": "2024-01-01T00:00:00Z", "rules": {"max_server_per_host": 2},
                               "members": ["m1", "m2"]}
    _, out, client = run(conf_file, "server-group", "delete", GROUP)
    assert client.calls == [("delete_server_group", {"group_uuid": GROUP})]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["aggregate", "rename", "a"], "'aggregate rename' is not a command (berth help aggregate"),
        (["aggregat", "list"], "'aggregat' is not a command: did you mean 'aggregate'?"),
        (["aggregate", "create"], "the following arguments are required: NAME"),
        (["aggregate", "add-host", "a"], "the following arguments are required: HOST"),
        (["aggregate", "set-metadata", "a"], "the following arguments are required: KEY=VALUE"),
        (["aggregate", "set-metadata", "a", "=v"], "metadata is key=value (or key to unset it), got '=v'"),
        (["server-group", "create", "web"], "the following arguments are required: --policy"),
        (["server-group", "create", "--policy", "sideways", "web"], "invalid choice: 'sideways'"),
        (
            ["server-group", "create", "--policy", "anti-affinity", "--max-server-per-host", "0", "w"],
            "must be at least 1, got 0",
        ),
        (
            ["server-group", "create", "--policy", "anti-affinity", "--max-server-per-host", "x", "w"],
            "'x' is not a whole number",
        ),
        (["server-group", "show"], "the following arguments are required: GROUP"),
        (["boot", "--flavor", "m1.tiny", "--hint", "group"], "a hint is key=value, got 'group'"),
        (["boot", "--flavor", "m1.tiny", "--availability-zone"], "expected one argument"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(conf_file, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_group_without_an_action_lists_its_actions(conf_file, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, "aggregate")
    assert exited.value.code == 0
    said = capsys.readouterr().out
    assert said.startswith("usage: berth aggregate [-h] ACTION ...")
    assert "add-host" in said and "set-metadata" in said


# -- boot: hints and the availability zone --------------------------------------


def test_boot_carries_the_zone_and_the_hints(conf_file):
    anchor = str(uuidlib.uuid4())
    status, out, client = run(
        conf_file,
        "boot",
        "--flavor",
        "m1.tiny",
        "--count",
        "2",
        "--availability-zone",
        "az1",
        "--hint",
        f"group={GROUP}",
        "--hint",
        f"different_host={anchor}",
        "--hint",
        'query=["=", "$free_ram_mb", 1024]',
        show_server_group={"uuid": GROUP},
    )
    assert status == 0
    flavor, (check, check_args), (method, sent) = client.calls
    assert flavor == ("show_flavor", {"name": "m1.tiny"})
    assert (check, check_args) == ("show_server_group", {"group_uuid": GROUP})
    assert method == "run_instance"
    spec, props = sent["request_spec"], sent["filter_properties"]
    assert spec["instance_type"] == {"name": "m1.tiny", "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0,
                                     "vcpus": 1, "extra_specs": {}}
    assert spec["instance_properties"] == {"project_id": "admin", "availability_zone": "az1"}
    assert props["scheduler_hints"] == {
        "group": GROUP,
        "different_host": anchor,
        "query": '["=", "$free_ram_mb", 1024]',
    }
    assert out.split() == spec["instance_uuids"] and len(spec["instance_uuids"]) == 2


def test_a_repeated_hint_becomes_a_list(conf_file):
    a, b, c = (str(uuidlib.uuid4()) for _ in range(3))
    _, _, client = run(
        conf_file,
        "boot",
        "--flavor",
        "m1.tiny",
        "--hint",
        f"same_host={a}",
        "--hint",
        f"same_host={b}",
        "--hint",
        f"same_host={c}",
    )
    [_flavor, (_, sent)] = client.calls
    assert sent["filter_properties"]["scheduler_hints"] == {"same_host": [a, b, c]}
    assert "availability_zone" not in sent["request_spec"]["instance_properties"]


@pytest.mark.parametrize(("hint", "message"), [
    ("same_host=foo", "--hint same_host=foo: no instance named or with UUID foo"),
    (f"different_host={GROUP}", f"--hint different_host={GROUP}: no instance named or with UUID {GROUP}"),
    ("same_host=web", "--hint same_host=web: Name web is ambiguous: 2 instances (u1, u2); use a UUID"),
])
def test_a_hint_naming_no_instance_is_refused_by_the_hint_before_any_boot(conf_file, hint, message):
    with pytest.raises(CommandError) as refused:
        run(conf_file, "boot", "--flavor", "m1.tiny", "--hint", hint, missing=[GROUP],
            instances={"web": ["u1", "u2"]})
    assert str(refused.value) == message


def test_a_hint_naming_an_instance_by_name_sends_its_uuid(conf_file):
    _, _, client = run(conf_file, "boot", "--flavor", "m1.tiny", "--hint", "same_host=db",
                       instances={"db": [GROUP]})
    assert client.calls[-1][1]["filter_properties"]["scheduler_hints"] == {"same_host": GROUP}


def test_a_hint_with_a_name_the_scheduler_refuses_is_refused_by_the_hint(conf_file):
    from scheduler import rpc

    class Refusing(FakeClient):
        def list_instances(self, ctxt, **kwargs):
            raise rpc.RemoteError("InvalidRequest", "list_instances: name: must be at most 255 characters")

    args = parse(conf_file, "boot", "--flavor", "m1.tiny", "--hint", "same_host=" + "x" * 300)
    with pytest.raises(CommandError,
                       match=r"^--hint same_host=x{300}: no instance named or with UUID x{300}$"):
        args.func(Refusing(), args, io.StringIO())


def test_build_request_takes_a_dict_of_hints_too():
    spec, props = build_request(
        {"memory_mb": 1, "vcpus": 1}, 1, {"group": GROUP}, availability_zone="az1"
    )
    assert props["scheduler_hints"] == {"group": GROUP}
    assert spec["instance_properties"]["availability_zone"] == "az1"


def test_two_groups_are_refused_before_anything_is_sent(conf_file):
    with pytest.raises(CommandError, match="give one --hint group=UUID"):
        run(conf_file, "boot", "--flavor", "m1.tiny", "--hint", f"group={GROUP}", "--hint", f"group={GROUP}")


# -- the whole command, over memory:// ---------------------------------------------


@pytest.fixture
def scheduler(conf_file):
    """A scheduler's two endpoints on memory://, configured from the CLI's own file; host h1 has
    reported."""
    with cli_scheduler(conf_file, _reported_h1_and_admin) as database:
        yield database


def _reported_h1_and_admin(conf, database, manager):
    manager.report_resources(
        {},
        "h1",
        {
            "host": "h1",
            "memory_mb": 4096,
            "free_ram_mb": 4096,
            "local_gb": 10,
            "free_disk_gb": 10,
            "vcpus": 2,
            "vcpus_used": 0,
            "instance_uuids": [],
            "running_vms": 0,
        },
    )
    return [AdminEndpoint(conf, database, manager.host_manager), FlavorEndpoint(database)]


def test_commands_end_to_end_and_refusals_are_one_line(scheduler, conf_file, capsys):
    database = scheduler
    assert main(conf_file, "aggregate", "create", "az1agg", "--zone", "az1")[0] == 0
    assert main(conf_file, "aggregate", "add-host", "az1agg", "h1")[0] == 0
    assert database.get_aggregate("az1agg")["hosts"] == ["h1"]
    status, out = main(conf_file, "server-group", "create", "--policy", "anti-affinity", "web", "-f", "json")
    assert status == 0
    group = json.loads(out)["uuid"]
    assert database.get_server_group(group)["policy"] == "anti-affinity"
    capsys.readouterr()

    before = database.list_aggregates(), database.list_server_groups(), database.list_instances()
    for argv, message in [
        (["aggregate", "create", "az1agg"], "berth: an aggregate named 'az1agg' exists already"),
        (["aggregate", "add-host", "nosuch", "h1"], "berth: no aggregate named 'nosuch'"),
        (["aggregate", "add-host", "az1agg", "h9"], "berth: unknown host 'h9'"),
        (["aggregate", "set-metadata", "az1agg", "bad key=1"], "berth: metadata key 'bad key'"),
        (
            ["server-group", "create", "--policy", "affinity", "--max-server-per-host", "2", "g"],
            "berth: rule 'max_server_per_host' does not apply to policy affinity",
        ),
        (["server-group", "show", "nosuch"], "berth: No server group named nosuch"),
        (["boot", "--flavor", "m1.tiny", "--hint", f"group={GROUP}"], f"berth: no server group {GROUP}"),
    ]:
        status, out = main(conf_file, *argv)
        # In-process, other tests' log handlers may write here too: keep the CLI's lines
        # (the functional tests check stderr whole, in a process of its own).
        lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
        assert status == 1 and out == ""
        assert len(lines) == 1 and lines[0].startswith(message), lines
    assert (database.list_aggregates(), database.list_server_groups(), database.list_instances()) == before
