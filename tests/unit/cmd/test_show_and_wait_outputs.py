"""``berth host show`` (its inventories, traits and measured load), and the listings ``boot --wait``
and ``delete --wait`` print, in the formats -f and -c ask."""

import io
import json

import pytest

from scheduler.cmd import instance_commands
from scheduler.cmd.arguments import CommandError
from tests.unit.cli_scheduler import parse, stored_flavor, write_conf
from tests.unit.cmd.test_admin_commands import fields

U1 = "0b7c6a2e-3f1d-4e5a-8b9c-0d1e2f3a4b5c"

HOST = {
    "host": "h1", "state": "up", "memory_mb": 8192, "memory_mb_used": 1024, "free_ram_mb": 7168,
    "aggregates": ["gpus", "rack-a"], "availability_zone": "az1", "cpu_util": 0.25, "mem_util": 0.5,
    "inventories": {"VGPU": {"total": 4, "reserved": 1, "allocation_ratio": 1.5, "min_unit": 1, "max_unit": 2,
                             "step_size": 1, "used": 2}},
    "traits": ["CUSTOM_GOLD", "HW_CPU_X86_AVX2"],
    "instance_load": {"background_cpu": 0.5, "background_memory_mb": 256.0,
                      "instances": {U1: {"cpu": 1.5, "memory_mb": 512.0}}},
}


class Client:
    """Hosts as the scheduler lists them; instances that settle as soon as they are asked for."""

    def __init__(self, hosts=(HOST,)):
        self.hosts = [dict(h) for h in hosts]
        self.booted = []

    def list_hosts(self, ctxt):
        return self.hosts

    def admin_call(self, ctxt, method, **kwargs):
        assert method == "show_flavor", method
        return stored_flavor(kwargs["name"])

    def run_instance(self, ctxt, request_spec, filter_properties):
        self.booted = request_spec["instance_uuids"]

    def list_instances(self, ctxt, **kwargs):
        return [instance(u, "ACTIVE") for u in kwargs.get("uuids") or []]

    def delete_instance(self, ctxt, uuid):
        pass


def instance(uuid, state):
    return {"uuid": uuid, "state": state, "host": "h1", "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0,
            "vcpus": 1, "fault_reason": None, "display_name": "web-1", "flavor_name": "m1.tiny"}


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


def run(conf_file, client, *argv):
    args = parse(conf_file, *argv)
    out = io.StringIO()
    return args.func(client, args, out), out.getvalue()


def test_host_show_prints_inventories_traits_and_measured_load_as_fields(conf_file):
    status, out = run(conf_file, Client(), "host", "show", "h1")
    assert status == 0 and out.startswith("+")  # a table of fields and values, as every show prints
    shown = fields(out)
    assert shown["inventories"] == ("VGPU: used 2 of total 4, reserved 1, allocation_ratio 1.5 (min_unit 1, "
                                    "max_unit 2, step_size 1)")
    assert shown["traits"] == "CUSTOM_GOLD, HW_CPU_X86_AVX2"
    assert shown["aggregates"] == "gpus, rack-a"
    assert shown["instance_load"] == f"{U1}: cpu 1.5, memory_mb 512\nbackground: cpu 0.5, memory_mb 256"
    assert (shown["cpu_util"], shown["mem_util"]) == ("0.25", "0.5")


def test_host_show_in_json_keeps_the_inventories_and_load_whole(conf_file):
    _, out = run(conf_file, Client(), "host", "show", "h1", "-f", "json")
    assert json.loads(out) == HOST
    _, out = run(conf_file, Client(), "host", "show", "h1", "-f", "value", "-c", "traits")
    assert out == "CUSTOM_GOLD, HW_CPU_X86_AVX2\n"


def test_host_show_of_a_host_that_measures_nothing_says_none(conf_file):
    bare = dict(HOST, inventories={}, traits=[], instance_load=None, cpu_util=None, mem_util=None)
    shown = fields(run(conf_file, Client([bare]), "host", "show", "h1")[1])
    assert (shown["inventories"], shown["traits"], shown["instance_load"], shown["cpu_util"]) == (
        "none reported", "none reported", "None", "None")


@pytest.fixture
def settled(monkeypatch):
    """wait_for answers at once: every instance in the state the command waits for."""
    def wait_for(client, uuids, timeout, settled=("ACTIVE",)):
        return {u: instance(u, settled[0]) for u in uuids}

    monkeypatch.setattr(instance_commands, "wait_for", wait_for)


def test_boot_and_delete_wait_print_their_listing_in_the_format_asked(conf_file, settled):
    client = Client()
    status, out = run(conf_file, client, "boot", "--flavor", "m1.tiny", "--wait", "-f", "json")
    assert status == 0
    listed = [(i["UUID"], i["STATE"], i["HOST"]) for i in json.loads(out)]
    assert listed == [(client.booted[0], "ACTIVE", "h1")]
    status, out = run(conf_file, client, "delete", U1, "--wait", "-f", "value", "-c", "state", "-c", "uuid")
    assert (status, out) == (0, f"DELETED {U1}\n")


@pytest.mark.parametrize("argv", [["boot", "--flavor", "m1.tiny", "-f", "json"],
                                  ["delete", U1, "-c", "uuid"]])
def test_a_format_without_wait_is_refused_before_anything_is_done(conf_file, argv):
    client = Client()
    with pytest.raises(CommandError, match=r"^-f and -c go with --wait \(the listing it prints\); without it "
                                           rf"{argv[0]} prints one line per instance$"):
        run(conf_file, client, *argv)
    assert client.booted == []
