"""The versions of the APIs a scheduler serves, and [upgrade_levels]: every endpoint declares
its API, a newer client is refused naming the version served, a bad cap stops start-up."""

import logging

import pytest

from compute_agent.manager import ComputeEndpoint
from scheduler import api_versions, rpc
from scheduler.client import FLAVOR_METHODS, JOB_METHODS, REBALANCE_METHODS, SCALING_METHODS, SchedulerClient
from scheduler.conf import upgrade_levels
from scheduler.process import startup as config
from scheduler.rpc import deadletter, roles
from tests.unit.rpc.test_bad_input import dead_letters
from tests.unit.scheduler.test_service_running import service  # noqa: F401 (the fixture)


@pytest.fixture
def started(service):  # noqa: F811 (the fixture imported above)
    service.start()
    yield service
    service.stop()


def endpoint_methods(endpoints):
    return {name for name, _ in roles.public_methods(endpoints)}


def test_every_endpoint_declares_its_api_and_the_scaling_methods_are_the_scaling_apis(started):
    endpoints = started._server.dispatcher.endpoints
    assert [type(e).__name__ for e in endpoints] == ["SchedulerManager", "MoveEndpoint", "AdminEndpoint",
                                                     "HostAdminEndpoint", "FlavorEndpoint",
                                                     "RebalanceEndpoint", "JobEndpoint",
                                                     "ScalingGroupEndpoint", "InstanceMetricsEndpoint"]
    assert [e.RPC_API.name for e in endpoints] == ["scheduler", "scheduler", "admin", "admin", "admin",
                                                   "admin", "admin",
                                                   "scaling", "scaling"]
    assert ComputeEndpoint.RPC_API is api_versions.COMPUTE
    assert {e.RPC_API for e in endpoints} | {ComputeEndpoint.RPC_API} == set(api_versions.ALL)
    # admin_call reaches the scaling API for these, the admin API for the rest.
    assert SCALING_METHODS == endpoint_methods(endpoints[7:])
    assert not SCALING_METHODS & endpoint_methods(endpoints[:7])
    # ... and at 1.1 for the flavors' methods, 1.2 for the rebalance plans', 1.3 for the jobs', which
    # came with them.
    assert FLAVOR_METHODS == endpoint_methods(endpoints[4:5])
    assert REBALANCE_METHODS == endpoint_methods(endpoints[5:6])
    assert JOB_METHODS == endpoint_methods(endpoints[6:7])


def test_a_newer_client_is_refused_naming_the_version_this_scheduler_serves(started):
    client = rpc.RPCClient(started.transport, rpc.Target(topic="scheduler"), timeout=10)
    assert client.call({}, "list_hosts") == []
    for method, api, served in (("list_hosts", "scheduler", "1.9"), ("list_aggregates", "admin", "1.3"),
                                ("list_scaling_groups", "scaling", "1.0")):
        newer = f"1.{int(served[-1]) + 1}"
        with pytest.raises(rpc.RemoteError) as info:
            client.prepare(version=newer).call({}, method)
        assert (info.value.exc_type, info.value.value) == ("UnsupportedVersion", (
            f"Endpoint does not support RPC version {newer}. Attempted method: {method}; it serves the {api} "
            f"API up to {served}: set [upgrade_levels] {api} = {served} where it is sent from, until this is "
            "upgraded"))
    uuid = "00000000-0000-4000-8000-000000000001"
    client.prepare(version="1.10").cast({}, "delete_instance", instance_uuid=uuid)
    [letter] = dead_letters(started.transport, 1)
    assert letter.headers[deadletter.REASON].startswith(
        "UnsupportedVersion: Endpoint does not support RPC version 1.10. Attempted method: delete_instance;")
    # Berth's own client sends 1.0, which it serves.
    assert SchedulerClient(started.transport, timeout=10).admin_call({}, "list_scaling_groups") == []


@pytest.mark.parametrize(("value", "message"), [
    ("3.0", "[upgrade_levels] compute: '3.0' is not a version of the compute API this release speaks: its "
            "versions are 1.0 to 2.1"),
    ("1", "[upgrade_levels] compute: '1' is not a version: give MAJOR.MINOR, e.g. 1.0"),
    ("auto", "[upgrade_levels] compute: 'auto' is not a version: give MAJOR.MINOR, e.g. 1.0"),
])
def test_a_cap_that_is_no_version_of_its_api_stops_every_command_with_one_line(tmp_path, value, message):
    path = tmp_path / "berth.conf"
    path.write_text(f"[upgrade_levels]\ncompute = {value}\n")
    for prog in ("berth-scheduler", "berth-compute-agent", "berth"):
        with pytest.raises(SystemExit) as info:
            config.load(["--config-file", str(path)], prog)
        assert str(info.value) == f"{prog}: invalid configuration: {message} (in {path})"


def test_the_caps_in_force_are_said_at_start_with_what_they_hold_back(tmp_path, caplog):
    path = tmp_path / "berth.conf"
    path.write_text("[upgrade_levels]\ncompute = 1.2\nscheduler = 1.9\nadmin =\n")
    conf = config.load(["--config-file", str(path)], "berth-scheduler")
    assert upgrade_levels.cap(conf, api_versions.COMPUTE) == "1.2"
    assert upgrade_levels.cap(conf, api_versions.ADMIN) is None  # empty: no cap
    with caplog.at_level(logging.INFO, logger=upgrade_levels.__name__):
        upgrade_levels.log_caps(conf)
    assert caplog.messages == [
        "[upgrade_levels] scheduler = 1.9: no version of the scheduler API this release speaks (up to 1.9) "
        "is above it: nothing held back",
        "[upgrade_levels] compute = 1.2: this service sends the compute API at version 1.2 at newest (this "
        f"release speaks 2.1); held back: 2.0 ({api_versions.COMPUTE.history[3][1]}); 2.1 "
        f"({api_versions.COMPUTE.history[4][1]}). Remove the cap once "
        "every server of the compute API runs this release",
    ]
