"""Listings in the openstack client's formats (-f, -c), --version, and the options' help."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest
import yaml

from scheduler.cmd import grammar, parsers
from scheduler.cmd.arguments import CommandError
from scheduler.version import version
from tests.unit.cmd.test_admin_commands import AGGREGATE, conf_file, run  # noqa: F401

INSTANCES = [
    {"uuid": "u1", "state": "ACTIVE", "host": "h1", "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0,
     "vcpus": 1, "fault_reason": None, "display_name": "web-1", "flavor_name": "m1.tiny",
     "request_spec": {"instance_properties": {"project_id": "admin", "availability_zone": "az1"}}},
    {"uuid": "u2", "state": "ERROR", "host": None, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0,
     "vcpus": 2, "fault_reason": "No valid host was found", "display_name": None, "flavor_name": None,
     "request_spec": None},
]


class Client:
    def __init__(self):
        self.asked = {}

    def list_instances(self, ctxt, **kwargs):
        self.asked = kwargs
        return [i for i in INSTANCES if kwargs.get("host") in (None, i["host"])]

    def list_hosts(self, ctxt):
        return [{"host": "h1"}, {"host": "h2"}]


def instances(conf_file, *argv):  # noqa: F811
    from tests.unit.cmd.test_admin_commands import parse

    args = parse(conf_file, "instances", *argv)
    client, out = Client(), io.StringIO()
    assert args.func(client, args, out) == 0
    return out.getvalue(), client


def test_json_parses_back_to_the_rows(conf_file):  # noqa: F811
    out, _ = instances(conf_file, "-f", "json")
    assert json.loads(out) == [
        {"UUID": "u1", "STATE": "ACTIVE", "HOST": "h1", "RAM MB": 512, "DISK GB": 1, "VCPUS": 1,
         "FAULT": None, "NAME": "web-1", "FLAVOR": "m1.tiny", "ZONE": "az1"},
        {"UUID": "u2", "STATE": "ERROR", "HOST": None, "RAM MB": 2048, "DISK GB": 20, "VCPUS": 2,
         "FAULT": "No valid host was found", "NAME": None, "FLAVOR": None, "ZONE": None},
    ]


def test_columns_in_any_case_and_the_value_yaml_and_csv_formats(conf_file):  # noqa: F811
    assert instances(conf_file, "-f", "value", "-c", "uuid", "-c", "STATE")[0] == "u1 ACTIVE\nu2 ERROR\n"
    assert yaml.safe_load(instances(conf_file, "-f", "yaml", "-c", "ram_mb")[0]) == [{"RAM MB": 512},
                                                                                        {"RAM MB": 2048}]
    rows = list(csv.reader(io.StringIO(instances(conf_file, "-f", "csv", "-c", "fault")[0])))
    assert rows == [["FAULT"], [""], ["No valid host was found"]]


def test_columns_come_in_the_order_asked_each_once(conf_file):  # noqa: F811
    out, _ = instances(conf_file, "-f", "value", "-c", "name", "-c", "state", "-c", "host", "-c", "NAME")
    assert out == "web-1 ACTIVE h1\nNone ERROR None\n"
    out, _ = instances(conf_file, "-c", "host", "-c", "uuid")
    assert out.splitlines() == ["HOST  UUID", "h1    u1", "-     u2"]


def test_a_host_that_never_reported_is_refused_rather_than_listed_empty(conf_file):  # noqa: F811
    assert instances(conf_file, "-f", "value", "-c", "uuid", "--host", "h1")[0] == "u1\n"
    assert instances(conf_file, "-f", "value", "-c", "uuid", "--host", "h2")[0] == ""  # none on it
    with pytest.raises(CommandError, match=r"^no host 'h3' has reported, and no instance is on it "
                                           r"\(berth host list names them\)$"):
        instances(conf_file, "--host", "h3")
    with pytest.raises(CommandError, match=r"^no host 'h11' has reported, and no instance is on it: "
                                           r"did you mean 'h1'\?$"):
        instances(conf_file, "--host", "h11")


def test_the_table_format_is_the_openstack_clients(conf_file):  # noqa: F811
    out = instances(conf_file, "-f", "table", "-c", "uuid", "-c", "host")[0]
    assert out.splitlines()[:3] == ["+------+------+", "| UUID | HOST |", "+------+------+"]


def test_without_a_format_the_columns_are_aligned_and_blanks_show_as_a_dash(conf_file):  # noqa: F811
    out, _ = instances(conf_file, "-c", "uuid", "-c", "host")
    assert out.splitlines() == ["UUID  HOST", "u1    h1", "u2    -"]


def test_an_unknown_column_is_refused_naming_the_columns(conf_file):  # noqa: F811
    with pytest.raises(CommandError, match="no column 'colour'; this listing has uuid, state, host, "
                                               "ram_mb, disk_gb, vcpus, fault, name, flavor, zone$"):
        instances(conf_file, "-c", "uuid", "-c", "colour")


def test_a_lower_case_state_is_read(conf_file):  # noqa: F811
    _, client = instances(conf_file, "--state", "active")
    assert client.asked["state"] == "ACTIVE"


def test_aggregates_and_groups_take_the_formats(conf_file):  # noqa: F811
    _, out, _ = run(conf_file, "aggregate", "list", "-f", "json", list_aggregates=[AGGREGATE])
    assert json.loads(out) == [{"NAME": "az1agg", "ZONE": "az1", "HOSTS": "h1,h2",
                                "METADATA": "availability_zone=az1,ssd=true"}]
    group = {"uuid": "g1", "name": "web", "policy": "anti-affinity", "rules": {}, "members": ["a", "b"]}
    _, out, _ = run(conf_file, "server-group", "list", "-f", "value", "-c", "name", "-c", "members",
                    list_server_groups=[group])
    assert out == "web 2\n"


@pytest.mark.parametrize("program", ["scheduler.cmd.cli", "scheduler.cmd.scheduler", "scheduler.cmd.manage",
                                     "compute_agent.cmd.agent", "scheduler.cmd.all_in_one"])
def test_every_command_tells_its_version(program):

    done = subprocess.run([sys.executable, "-m", program, "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == version() != "", done.stderr


def test_every_option_of_the_cli_has_help():
    import argparse

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    parsers.build(subparsers, grammar.ROUTES)
    silent = []

    def walk(p, path):
        for action in p._actions:  # noqa: SLF001 (argparse has no public listing)
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
            elif action.option_strings and not action.help and action.dest != "help":
                silent.append(" ".join(path + [action.option_strings[-1]]))

    walk(parser, [])
    assert not silent, f"options without help: {silent}"


def test_debug_on_the_command_line_shows_the_log_and_debug_in_a_shared_file_does_not(tmp_path):
    conf = tmp_path / "berth.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = memory://\nstate_path = {tmp_path}\ndebug = true\n")

    def boot(*extra):
        command = [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(conf), *extra,
                   "boot", "--flavor-ram", "512", "--flavor-vcpus", "1"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
        assert done.returncode == 0, done.stderr
        return done.stderr

    shown = boot("--debug")
    assert "DEBUG" in shown and "Booting" in shown and "as request req-" in shown
    assert boot() == ""  # the user's terminal is theirs unless they ask


def test_the_two_demos_are_refused_together_before_anything_starts(tmp_path):
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.all_in_one", "--demo", "--demo-scaling"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          # threads: under eventlet its deprecation warning would be on stderr too
                          env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg"),
                               "BERTH_CONCURRENCY": "threading"})
    assert done.returncode == 1
    assert done.stderr == "berth-all-in-one: --demo and --demo-scaling: choose one\n"
    assert not (tmp_path / "xdg").exists()  # no database, no log


def test_the_demo_runs_on_its_own_state_whatever_broker_and_database_the_configuration_names(tmp_path):
    """An operator's configuration (here a broker nothing listens on, and their own database) is
    said to be left alone, and is: the demo runs and passes on a broker and a database of its own."""
    operators = tmp_path / "operators.sqlite"
    conf = tmp_path / "berth.conf"
    conf.write_text("[DEFAULT]\ntransport_url = rabbit://berth:secret@127.0.0.1:1/\n"
                    f"[database]\nconnection = sqlite:///{operators}\n")
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.all_in_one", "--demo",
                           "--config-file", str(conf)],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg"),
                               "BERTH_CONCURRENCY": "threading"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "28 of 28 ACTIVE; all deleted again." in done.stdout
    [said] = done.stderr.splitlines()
    assert said.startswith(f"berth-all-in-one: the demo runs on a broker and database of its own in "
                           f"{tmp_path / 'xdg' / 'berth' / 'demo-'}")
    assert said.endswith(f", not on transport_url = rabbit://berth:***@127.0.0.1:1/ and "
                         f"[database] connection = sqlite:///{operators} of the configuration")
    assert not operators.exists()
    assert [p.name for p in (tmp_path / "xdg" / "berth").iterdir()] == ["berth-all-in-one.log"]
