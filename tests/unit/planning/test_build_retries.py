"""[scheduler] build_retries_same_host: a failed build is tried again on its host before another
(VMware Cloud Director's power-on retries), the scheduler's RPC endpoint over memory:// and SQLite."""

import datetime
import logging

from compute_agent import driver as drivers
from scheduler import rpc
from tests.unit.scheduler.manager_world import casts, report, request
from tests.unit.scheduler.test_request_ids import berth, stack  # noqa: F401 (a fixture)

FAILED = "build failed: the hypervisor said no"


def send_back(manager, spec, tried):
    """The agent of ``tried[-1]`` sends the instance back, as compute_agent's _reschedule does."""
    retry = {"num_attempts": len(tried), "hosts": [[h, h] for h in tried],
             "exc_reason": f"{tried[-1]}: {FAILED}"}
    manager.run_instance(rpc.Context({}), spec, {"retry": retry})


def booted(world, conf, **options):
    """(manager, database, agents, uuid, spec) of one instance placed on h2, the best host,
    under ``options`` of [scheduler]."""
    for name, value in options.items():
        conf.set_override(name, value, "scheduler")
    manager, database, agents = world
    [uuid], spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    return manager, database, agents, uuid, spec


def builds(agents, expected):
    """[(host, retry record)] of the build casts, in the order of the hosts' names."""
    received = sorted(casts(agents, expected).items())
    return [(host, call[3]["retry"]) for host, calls in received for call in calls]


def test_a_failed_build_is_built_again_on_its_host_then_placed_elsewhere(world, conf):
    manager, database, agents, uuid, spec = booted(world, conf, build_retries_same_host=2)
    assert [host for host, _ in builds(agents, 1)] == ["h2"]

    send_back(manager, spec, ["h2"])
    send_back(manager, spec, ["h2", "h2"])
    assert [host for host, _ in builds(agents, 3)] == ["h2", "h2", "h2"]
    record = database.get_instance(uuid)
    assert (record["state"], record["host"], record["attempts"]) == ("SCHEDULED", "h2", 3)
    assert manager.host_manager.get("h2").free_ram_mb == 16384 - 1024  # held once, not three times

    send_back(manager, spec, ["h2", "h2", "h2"])  # its third failure there: another host
    [last] = [(host, retry) for host, retry in builds(agents, 4) if host != "h2"]
    assert last == ("h1", {"num_attempts": 4, "hosts": [["h2", "h2"]] * 3, "exc_reason": f"h2: {FAILED}"})
    record = database.get_instance(uuid)
    # Four attempts against max_attempts = 3: the retries on h2 count as one host.
    assert (record["state"], record["host"], record["attempts"]) == ("SCHEDULED", "h1", 4)
    assert manager.host_manager.get("h2").free_ram_mb == 16384


def test_a_build_that_timed_out_is_not_tried_again_on_its_silent_host(world, conf, parts):
    manager, database, agents, uuid, spec = booted(world, conf, build_retries_same_host=2, build_timeout=1)
    casts(agents, 1)
    later = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=60)
    assert parts.build_expiry.expire(now=later) == 1
    record = database.get_instance(uuid)
    assert (record["state"], record["host"]) == ("SCHEDULED", "h1")
    # h2 is told to drop it: had it been built there again, this would have destroyed it
    assert [call[0] for call in casts(agents, 3)["h2"]] == ["run_instance", "terminate_instance"]


def test_without_the_option_a_failed_build_goes_to_another_host_at_once(world, conf):
    manager, database, agents, uuid, spec = booted(world, conf)
    casts(agents, 1)
    send_back(manager, spec, ["h2"])
    assert [host for host, _ in builds(agents, 2)] == ["h1", "h2"]
    assert database.get_instance(uuid)["host"] == "h1"


def test_a_host_that_no_longer_passes_is_not_retried_and_says_why(world, conf, caplog):
    manager, database, agents, uuid, spec = booted(world, conf, build_retries_same_host=1)
    casts(agents, 1)
    manager.report_resources({}, "h2", report("h2", 16384, used=16000))
    with caplog.at_level(logging.INFO, logger="scheduler.planning.planner"):
        send_back(manager, spec, ["h2"])
    assert [host for host, _ in builds(agents, 2)] == ["h1", "h2"]
    assert f"Instances {uuid}: not built again on h2: it no longer passes the filters (" in caplog.text
    assert "RamFilter removed 1" in caplog.text


def test_when_max_attempts_leaves_no_other_host_the_instance_is_error_with_both_reasons(world, conf):
    manager, database, agents, uuid, spec = booted(world, conf, build_retries_same_host=1, max_attempts=1)
    casts(agents, 1)
    manager.report_resources({}, "h2", report("h2", 16384, used=16000))
    send_back(manager, spec, ["h2"])
    record = database.get_instance(uuid)
    assert record["state"] == "ERROR"
    assert record["fault_reason"].startswith("Not built again on h2: it no longer passes the filters (")
    assert record["fault_reason"].endswith(
        "; [scheduler] max_attempts (1) leaves no other host to try; last failure: h2: " + FAILED)
    casts(agents, 1)  # nothing more was cast


def test_past_its_retries_and_max_attempts_the_instance_is_error(world, conf):
    manager, database, agents, uuid, spec = booted(world, conf, build_retries_same_host=1, max_attempts=1)
    send_back(manager, spec, ["h2"])
    casts(agents, 2)
    send_back(manager, spec, ["h2", "h2"])
    record = database.get_instance(uuid)
    assert (record["state"], record["fault_reason"]) == (
        "ERROR", f"Exceeded maximum number of attempts (1); last failure: h2: {FAILED}")


class FailsFirstBuild(drivers.FakeDriver):
    def __init__(self, conf):
        super().__init__(conf)
        self.failed = False

    def spawn(self, instance):
        if not self.failed:
            self.failed = True
            raise RuntimeError("the hypervisor said no")
        super().spawn(instance)


def test_an_agent_whose_first_build_fails_builds_it_again_on_the_retry(conf, tmp_path, stack):  # noqa: F811
    conf.set_override("build_retries_same_host", 1, "scheduler")
    service, add_agent, _ = stack
    add_agent("agent-1", driver=FailsFirstBuild(conf))
    status, out = berth(conf, tmp_path, "boot", "--flavor", "m1.tiny", "--wait", "--timeout", "30")
    uuid = out.splitlines()[1].split()[0]
    record = service.database.get_instance(uuid)
    assert (status, record["state"], record["host"], record["attempts"]) == (0, "ACTIVE", "agent-1", 2), out


def test_without_retries_the_only_host_that_failed_leaves_none(conf, tmp_path, stack):  # noqa: F811
    service, add_agent, _ = stack
    add_agent("agent-1", driver=FailsFirstBuild(conf))
    status, out = berth(conf, tmp_path, "boot", "--flavor", "m1.tiny", "--wait", "--timeout", "30")
    uuid = out.splitlines()[1].split()[0]
    record = service.database.get_instance(uuid)
    assert (status, record["state"]) == (1, "ERROR"), out
    assert "1 host considered; RetryFilter removed 1; none left; last failure: " in record["fault_reason"]
