"""The agent refuses a malformed build or terminate before claiming or storing anything."""

import pytest

from compute_agent import validate
from compute_agent.manager import ComputeEndpoint
from scheduler.exception import InvalidRequest

UUID = "00000000-0000-4000-8000-000000000001"
FLAVOR = {"memory_mb": 512, "root_gb": 1, "vcpus": 1}


class Manager:
    def __init__(self):
        self.calls = []

    def run_instance(self, *args):
        self.calls.append(("run_instance", *args))

    def terminate_instance(self, *args):
        self.calls.append(("terminate_instance", *args))


@pytest.mark.parametrize(
    ("instance", "spec", "props", "message"),
    [
        ("x", {}, {}, "instance must be an object"),
        ({"uuid": "nope", "flavor": FLAVOR}, {}, {}, "instance.uuid: must be a UUID"),
        ({"uuid": UUID}, {}, {}, "instance.flavor.memory_mb: must be an integer"),
        ({"uuid": UUID, "flavor": dict(FLAVOR, vcpus=-1)}, {}, {}, "instance.flavor.vcpus"),
        ({"uuid": UUID, "flavor": dict(FLAVOR, memory_mb=10**12)}, {}, {}, "memory_mb: must be between"),
        ({"uuid": UUID, "flavor": FLAVOR}, [], {}, "request_spec: must be an object"),
        ({"uuid": UUID, "flavor": FLAVOR}, {}, "x", "filter_properties: must be an object"),
        ({"uuid": UUID, "flavor": FLAVOR}, {}, {"limits": {"memory_mb": -1}}, "limits.memory_mb"),
        ({"uuid": UUID, "flavor": FLAVOR}, {}, {"limits": {"vcpu": "many"}}, "limits.vcpu"),
        ({"uuid": UUID, "flavor": FLAVOR}, {}, {"limits": {"disk_gb": 10**400}},
         "limits.disk_gb must be a number"),
        ({"uuid": UUID, "flavor": FLAVOR}, {}, {"retry": {"hosts": "h"}}, "retry.hosts"),
    ],
)
def test_a_bad_build_is_refused_naming_the_field(instance, spec, props, message):
    manager = Manager()
    with pytest.raises(InvalidRequest, match=message):
        ComputeEndpoint(manager).run_instance({}, instance, spec, props)
    assert manager.calls == []


def test_a_good_build_and_terminate_reach_the_manager():
    manager = Manager()
    endpoint = ComputeEndpoint(manager)
    props = {"limits": {"memory_mb": 1024.0, "disk_gb": 10, "vcpu": None}, "retry": {"num_attempts": 1}}
    endpoint.run_instance({}, {"uuid": UUID.upper(), "flavor": FLAVOR}, None, props)
    endpoint.terminate_instance({}, UUID)
    assert manager.calls[0][2]["uuid"] == UUID
    endpoint.terminate_instance({}, UUID, reason="deleted by a client (delete_instance)")
    assert manager.calls[1] == ("terminate_instance", {}, UUID, None)
    assert manager.calls[2] == ("terminate_instance", {}, UUID, "deleted by a client (delete_instance)")
    with pytest.raises(InvalidRequest, match="terminate_instance: instance_uuid: must be a UUID"):
        endpoint.terminate_instance({}, {"uuid": UUID})


@pytest.mark.parametrize("reason", ["", "two\nlines", "a\x1b[31mred", 42, "x" * 1001, ["deleted"]])
def test_a_terminate_whose_reason_is_not_one_log_line_of_text_is_refused(reason):
    manager = Manager()
    refused = "terminate_instance: reason must be text of 1 to 1000 characters without control characters"
    with pytest.raises(InvalidRequest, match=refused):
        ComputeEndpoint(manager).terminate_instance({}, UUID, reason=reason)
    assert manager.calls == []


def test_limits_of_other_resources_are_left_alone():
    _, _, props = validate.run_instance_args(
        {"uuid": UUID, "flavor": FLAVOR}, {}, {"limits": {"numa_topology": {"cells": 2}}}
    )
    assert props["limits"] == {"numa_topology": {"cells": 2}}
