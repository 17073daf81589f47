"""``berth flavor ...``, and ``berth server create --flavor NAME`` / ``--image-property``, over memory://
against a real FlavorEndpoint on SQLite."""

import io
import json

import pytest
import yaml

from scheduler.admin.flavors import FlavorEndpoint
from tests.unit.cli_scheduler import cli_scheduler, main, parse, write_conf


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


@pytest.fixture
def database(conf_file):
    with cli_scheduler(conf_file, lambda conf, database, manager: [FlavorEndpoint(database)]) as database:
        yield database


def berth(conf_file, capsys, *argv):
    """(status, output, the CLI's own error lines)."""
    status, out = main(conf_file, *argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
    return status, out, err


def test_create_then_list_and_show_in_every_format(database, conf_file, capsys):
    status, out, err = berth(conf_file, capsys, "flavor", "create", "web.large", "--ram", "8192",
                             "--disk", "40", "--vcpus", "4", "--ephemeral", "10",
                             "--property", "hw:cpu_policy=dedicated",
                             "--property", "trait:HW_CPU_X86_AVX2=required")
    assert (status, err) == (0, [])
    assert "| properties   | hw:cpu_policy=dedicated        |" in out.splitlines()  # as flavor show prints it
    assert "|              | trait:HW_CPU_X86_AVX2=required |" in out.splitlines()
    stored = database.get_flavor("web.large")
    assert [stored[k] for k in ("memory_mb", "root_gb", "ephemeral_gb", "vcpus")] == [8192, 40, 10, 4]

    status, out, _ = berth(conf_file, capsys, "flavor", "list")
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "RAM", "MB", "DISK", "GB", "EPHEMERAL", "GB", "VCPUS", "PROPERTIES"]
    assert [row.split()[0] for row in rows] == ["m1.large", "m1.medium", "m1.small", "m1.tiny", "m1.xlarge",
                                                 "web.large"]

    _, out, _ = berth(conf_file, capsys, "flavor", "list", "-f", "json")
    assert {f["NAME"]: f["RAM MB"] for f in json.loads(out)}["m1.small"] == 2048

    _, out, _ = berth(conf_file, capsys, "flavor", "show", "web.large", "-f", "json")
    shown = json.loads(out)
    assert shown["name"] == "web.large" and shown["vcpus"] == 4
    assert shown["properties"] == {"hw:cpu_policy": "dedicated", "trait:HW_CPU_X86_AVX2": "required"}
    _, out, _ = berth(conf_file, capsys, "flavor", "show", "web.large", "-f", "yaml")
    assert yaml.safe_load(out)["properties"]["hw:cpu_policy"] == "dedicated"
    _, out, _ = berth(conf_file, capsys, "flavor", "show", "web.large", "-f", "value", "-c", "memory_mb")
    assert out.strip() == "8192"


def test_set_unset_delete(database, conf_file, capsys):
    status, _, _ = berth(conf_file, capsys, "flavor", "set", "m1.tiny", "--property", "a=1",
                         "--property", "b=2")
    assert status == 0
    assert database.get_flavor("m1.tiny")["extra_specs"] == {"a": "1", "b": "2"}
    assert berth(conf_file, capsys, "flavor", "unset", "m1.tiny", "--property", "a")[0] == 0
    assert database.get_flavor("m1.tiny")["extra_specs"] == {"b": "2"}
    status, out, _ = berth(conf_file, capsys, "flavor", "delete", "m1.tiny")
    assert (status, out) == (0, "flavor m1.tiny deleted\n")
    assert "m1.tiny" not in [f["name"] for f in database.list_flavors()]


@pytest.mark.parametrize(("argv", "message"), [
    (["flavor", "create", "m1.tiny", "--ram", "1", "--disk", "0", "--vcpus", "1"],
     "berth: a flavor named 'm1.tiny' exists already"),
    (["flavor", "show", "m9.nope"], "berth: no flavor named 'm9.nope'"),
    (["flavor", "delete", "m9.nope"], "berth: no flavor named 'm9.nope'"),
    (["flavor", "set", "m9.nope", "--property", "a=1"], "berth: no flavor named 'm9.nope'"),
    (["flavor", "unset", "m1.tiny", "--property", "nope"], "berth: flavor 'm1.tiny' has no property 'nope'"),
    (["flavor", "create", "x", "--ram", "1", "--disk", "0", "--vcpus", "1", "--property", "a=1",
      "--property", "a=2"], "berth: --property a given more than once"),
    (["boot", "--flavor", "m9.nope"], "berth: no flavor named 'm9.nope'"),
])
def test_refusals_are_one_line_and_change_nothing(database, conf_file, capsys, argv, message):
    before = database.list_flavors(), database.list_instances()
    status, out, err = berth(conf_file, capsys, *argv)
    assert (status, out, err) == (1, "", [message])
    assert (database.list_flavors(), database.list_instances()) == before


@pytest.mark.parametrize(("argv", "message"), [
    (["flavor", "create", "x", "--ram", "0", "--disk", "0", "--vcpus", "1"], "must be at least 1, got 0"),
    (["flavor", "create", "x", "--ram", "1", "--vcpus", "1"], "the following arguments are required: --disk"),
    (["flavor", "set", "x", "--property", "novalue"], "a property is KEY=VALUE, got 'novalue'"),
    (["flavor", "unset", "x", "--property", "k=v"], "give the property's KEY alone, got 'k=v'"),
    (["boot", "--flavor", "m1.tiny", "--image-property", "novalue"], "an image property is KEY=VALUE"),
])
def test_bad_arguments_exit_2_with_the_reason(conf_file, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


class Recorder:
    """A client whose flavor calls reach ``endpoint`` and whose casts are recorded."""

    def __init__(self, endpoint):
        self.endpoint, self.casts = endpoint, []

    def admin_call(self, ctxt, method, **kwargs):
        return getattr(self.endpoint, method)(ctxt, **kwargs)

    def run_instance(self, ctxt, request_spec, filter_properties):
        self.casts.append(request_spec)


def test_boot_sends_a_stored_flavor_whole_and_the_image_properties(database, conf_file, capsys):
    assert berth(conf_file, capsys, "flavor", "create", "gpu.small", "--ram", "1024", "--disk", "10",
                 "--vcpus", "2", "--property", "resources:VGPU=1")[0] == 0
    args = parse(conf_file, "boot", "--flavor", "gpu.small", "--image-property", "hw_architecture=x86_64",
                 "--image-property", "img_type=linux")
    client, out = Recorder(FlavorEndpoint(database)), io.StringIO()
    assert args.func(client, args, out) == 0
    [spec] = client.casts
    assert out.getvalue().split() == spec["instance_uuids"]
    assert spec["instance_type"] == {"name": "gpu.small", "memory_mb": 1024, "root_gb": 10, "ephemeral_gb": 0,
                                     "vcpus": 2, "extra_specs": {"resources:VGPU": "1"}}
    assert spec["image"]["properties"] == {"hw_architecture": "x86_64", "img_type": "linux"}
    assert "id" not in spec["image"]


def test_boot_sends_the_image_it_names(database, conf_file, capsys):
    args = parse(conf_file, "boot", "--flavor", "m1.tiny", "--image", "berth-test")
    client = Recorder(FlavorEndpoint(database))
    assert args.func(client, args, io.StringIO()) == 0
    [spec] = client.casts
    assert spec["image"] == {"id": "berth-test", "properties": {}}


def test_a_repeated_image_property_is_refused(database, conf_file, capsys):
    status, out, err = berth(conf_file, capsys, "boot", "--flavor", "m1.tiny", "--image-property", "a=1",
                             "--image-property", "a=2")
    assert (status, err) == (1, ["berth: --image-property a given more than once"])
    assert database.list_instances() == []
