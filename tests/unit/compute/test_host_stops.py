"""An agent that stops cleanly says so in a last report (scheduler API 1.4), after every other
report; capped below 1.4 it says nothing, and the log says what follows."""

import logging

from tests.unit.compute.stub_scheduler import HOST, wait_for


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
