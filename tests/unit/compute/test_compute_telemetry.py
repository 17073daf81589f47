"""What an agent tells Prometheus: its claims, builds and reports."""

from compute_agent.client import ComputeClient
from tests.unit.compute.stub_scheduler import HOST
from tests.unit.compute.test_compute_manager import CountingDriver, make_instance, request_for, wait_for
from tests.unit.telemetry.scrape import value


def counts():
    return {"claimed": value("berth_agent_claims_total", outcome="claimed"),
            "refused": value("berth_agent_claims_total", outcome="refused"),
            "active": value("berth_agent_builds_total", outcome="active"),
            "failed": value("berth_agent_builds_total", outcome="failed"),
            "built_timed": value("berth_agent_build_seconds_count"),
            "reports": value("berth_agent_reports_total")}


def moved(before):
    return {name: count - before[name] for name, count in counts().items() if count != before[name]}


def test_a_claim_then_a_build_that_goes_active(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    before = counts()
    agents()
    wait_for(lambda: moved(before).get("reports"), "the report at start")
    instance = make_instance()
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    wait_for(lambda: moved(before).get("active"), "the build counted")
    assert {k: v for k, v in moved(before).items() if k != "reports"} == {
        "claimed": 1, "active": 1, "built_timed": 1}
    # At start, and on the claim (report_on_change), once report_min_interval has passed.
    wait_for(lambda: moved(before)["reports"] >= 2, "the report of the claim counted")


def test_a_refused_claim_and_a_failed_build(conf, transport, scheduler, agents):
    conf.set_override("report_interval", 3600, "compute_agent")
    conf.set_override("memory_mb", 4096, "fake")
    before = counts()
    agents(driver=CountingDriver(conf, fail=True))
    too_big = make_instance(memory_mb=8192)
    limited = request_for(too_big, limits={"memory_mb": 6144})
    ComputeClient(transport).run_instance({}, HOST, too_big, *limited)
    wait_for(lambda: len(scheduler.reschedules) == 1, "the refused claim sent back")
    fits = make_instance()
    ComputeClient(transport).run_instance({}, HOST, fits, *request_for(fits))
    wait_for(lambda: len(scheduler.reschedules) == 2, "the failed build sent back")
    changed = moved(before)
    changed.pop("reports", None)
    assert changed == {"refused": 1, "claimed": 1, "failed": 1}
