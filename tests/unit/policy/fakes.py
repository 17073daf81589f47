"""Hosts, requests and host tables for the policy tests."""

import random

import pytest

from berth_contract.request_spec import RequestSpec
from scheduler import conf as berth_conf
from scheduler.conf import opts
from scheduler.policy.host_state import HostState, HostTable


@pytest.fixture
def policy_conf(tmp_path):
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("state_path", str(tmp_path))
    return conf


def make_host(name, ram=8192, disk=100, vcpus=8, free_ram=None, free_disk=None, vcpus_used=0,
              instances=(), now=None, table=None, **reserved):
    """A host that has reported once: alone, or as a new row of ``table``; ``reserved``: its
    reserved_host_memory_mb, reserved_host_disk_mb, reserved_host_cpus (counted in the used
    figures given)."""
    host = HostState(name) if table is None else table.view(table.add(name))
    host.update_from_report(
        {
            "host": name,
            "memory_mb": ram,
            "free_ram_mb": ram if free_ram is None else free_ram,
            "local_gb": disk,
            "free_disk_gb": disk if free_disk is None else free_disk,
            "vcpus": vcpus,
            "vcpus_used": vcpus_used,
            "instance_uuids": list(instances),
            "running_vms": len(instances),
            **reserved,
        },
        now=now,
    )
    return host


def make_spec(memory_mb=1024, root_gb=10, vcpus=1, count=1, **filter_properties):
    return RequestSpec.from_wire(
        {
            "num_instances": count,
            "instance_type": {"memory_mb": memory_mb, "root_gb": root_gb, "vcpus": vcpus},
        },
        filter_properties,
    )


@pytest.fixture
def rng():
    return random.Random(42)


@pytest.fixture
def table():
    return HostTable()
