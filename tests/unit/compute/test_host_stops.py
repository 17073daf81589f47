"""An agent that stops cleanly says so in a last report (scheduler API 1.4), after every other
report; capped below 1.4 it says nothing, and the log says what follows."""

import logging
import time

from compute_agent.client import ComputeClient
from scheduler.client import PLACED_AT
from tests.unit.compute.stub_scheduler import HOST, make_instance, request_for, wait_for


def test_a_clean_stop_sends_a_last_report_that_says_stopped(conf, transport, scheduler, agents, caplog):
    manager = agents()
    wait_for(lambda: scheduler.report_count() >= 1, "a first report")
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        manager.stop()
    last = wait_for(lambda: (r := scheduler.last_report()) and r.get("stopped") and r, "the last report")
    earlier = [r for h, r in scheduler.reports if h == HOST][:-1]
    assert not any(r.get("stopped") for r in earlier)
    assert last["report_seq"] == max(r["report_seq"] for r in earlier) + 1
    told = f"Told the schedulers that {HOST} stops: it is down until its agent reports again"
    assert told in caplog.messages


def test_capped_below_1_4_a_clean_stop_says_nothing_and_the_log_says_so(conf, transport, scheduler, agents,
                                                                         caplog):
    conf.set_override("scheduler", "1.3", "upgrade_levels")
    manager = agents()
    wait_for(lambda: scheduler.report_count() >= 1, "a first report")
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        manager.stop()
    assert not any(r.get("stopped") for _, r in scheduler.reports)
    assert (f"Not telling the schedulers that {HOST} stops: [upgrade_levels] scheduler is below 1.4; they "
            "take it for down once it has not reported for their service_down_time") in caplog.messages


def test_a_build_the_scheduler_placed_elsewhere_meanwhile_is_dropped_unbuilt(conf, transport, scheduler,
                                                                              agents, caplog):
    manager = agents()
    kept, moved = make_instance(), make_instance()
    scheduler.refused[moved["uuid"]] = f"{moved['uuid']} is SCHEDULED on elsewhere now"
    with caplog.at_level(logging.INFO, logger="compute_agent.manager"):
        for instance in (moved, kept):  # placed (a minute ago) before the agent began consuming
            ComputeClient(transport).run_instance({PLACED_AT: time.time() - 60}, HOST, instance,
                                                  *request_for(instance))
        wait_for(lambda: "ACTIVE" in scheduler.states(kept["uuid"]), "the other one ACTIVE")
        wait_for(lambda: moved["uuid"] not in manager.store, "the moved one dropped")
    assert moved["uuid"] not in manager.tracker and "ACTIVE" not in scheduler.states(moved["uuid"])
    assert set(scheduler.asked) == {kept["uuid"], moved["uuid"]}
    assert (f"Not building {moved['uuid']} on {HOST}: the scheduler placed it elsewhere meanwhile "
            f"({moved['uuid']} is SCHEDULED on elsewhere now); claim dropped") in caplog.messages


def test_capped_below_1_4_an_agent_builds_without_asking(conf, transport, scheduler, agents):
    conf.set_override("scheduler", "1.3", "upgrade_levels")
    agents()
    instance = make_instance()
    scheduler.refused[instance["uuid"]] = "not asked at 1.3"
    ComputeClient(transport).run_instance({}, HOST, instance, *request_for(instance))
    wait_for(lambda: "ACTIVE" in scheduler.states(instance["uuid"]), "ACTIVE")
    assert scheduler.asked == []


def test_a_build_placed_after_the_agent_began_consuming_is_built_without_asking(conf, transport, scheduler,
                                                                                 agents):
    """Its cast cannot have waited in the queue while the host was down: no call before the build.
    Nor for one that does not say when it was placed (a scheduler before it, which could not answer)."""
    manager = agents()
    fresh, unstamped = make_instance(), make_instance()
    placed = manager._consuming_since + 1  # after it began consuming
    ComputeClient(transport).run_instance({PLACED_AT: placed}, HOST, fresh, *request_for(fresh))
    ComputeClient(transport).run_instance({}, HOST, unstamped, *request_for(unstamped))
    for instance in (fresh, unstamped):
        wait_for(lambda i=instance: "ACTIVE" in scheduler.states(i["uuid"]), "ACTIVE")
    assert scheduler.asked == []
