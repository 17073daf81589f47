"""Bad reports and wrong clocks, with real processes on RabbitMQ and PostgreSQL.

- Reports with figures no column can hold, arriving once a second, are refused
  at the edge: heartbeats stay fresh and build expiry keeps running.
- A scheduler whose clock is 11 minutes ahead times nothing out early: records
  are timed, and compared, by the database's clock.
"""

import datetime
import glob
import json
import os
import pathlib
import signal
import time

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from scheduler.db.api import Database
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_poison import report_body

# Debian's libfaketime (.ci/run installs it), and what keeps time.sleep working under it.
FAKETIME = (glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1") or ["libfaketime is not installed"])[0]
FAKETIME_SITE = pathlib.Path(__file__).with_name("faketime_site")
BAD_REPORTS = (
    {"memory_mb": 2**31},
    {"running_vms": 2**40},
    {"memory_mb_used": "lots"},
    {"reported_at": "yesterday"},
    {"nodename": "n" * 300},
    {"vcpus_used": -3},
)


def bad_report(host, i):
    body = json.loads(report_body(host))
    inner = json.loads(body["oslo.message"])
    inner["args"]["resources"].update(BAD_REPORTS[i % len(BAD_REPORTS)])
    body["oslo.message"] = json.dumps(inner)
    return json.dumps(body).encode()


def test_a_bad_report_every_second_stops_neither_heartbeats_nor_build_expiry(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__build_timeout=5)
        database = Database(url)
        publisher = None
        try:
            fleet.start_schedulers(["sched"])
            # The big host gets the instance; it is gone before it can build it.
            fleet.start_agent("big", fake_memory_mb=65536, fake_local_gb=1000, fake_vcpus=16)
            fleet.start_agent("small", fake_memory_mb=8192, fake_local_gb=1000, fake_vcpus=16)
            fleet.wait_hosts_up(["big", "small"])
            fleet.stop("big", signal.SIGKILL)
            spec, props = build_request(flavors.get("m1.small"), 1)
            fleet.client.run_instance({}, spec, props)
            [uuid] = spec["instance_uuids"]
            publisher = wire.RawPublisher(fleet)
            began, stale = time.monotonic(), []
            while time.monotonic() - began < 20:
                publisher.publish(bad_report("small", int(time.monotonic() - began)), "scheduler",
                                  fanout="scheduler")
                [beat] = database.list_services()
                seen = datetime.datetime.fromisoformat(beat["last_seen_at"].rstrip("Z"))
                stale.append((database.now() - seen).total_seconds())
                time.sleep(1)
            instance = fleet.wait_states([uuid], ("ACTIVE",), timeout=30)[uuid]
            refused = wire.dead_letter_count(fleet)
            log = fleet.log("sched")
        finally:
            if publisher is not None:
                publisher.close()
            database.dispose()
            fleet.close()
        print(f"\n20 bad reports, one a second: {refused} dead-lettered; heartbeat at most "
              f"{max(stale):.1f} s old; the instance lost with 'big' rescheduled to "
              f"{instance['host']} after the 5 s build timeout")
        assert refused >= 19
        assert max(stale) <= 3.0  # periodic_interval is 1 s
        assert (instance["host"], instance["attempts"]) == ("small", 2)
        assert "big: build timed out" in log
        assert "Periodic task" not in log


def test_a_scheduler_whose_clock_is_11_minutes_ahead_times_no_build_out(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        database = Database(url)
        try:
            fleet.start_schedulers(["on-time"])
            ahead = {"LD_PRELOAD": FAKETIME, "FAKETIME": "+11m", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                     "PYTHONPATH": os.pathsep.join(filter(None, (str(FAKETIME_SITE),
                                                                 os.environ.get("PYTHONPATH"))))}
            fleet.start_schedulers(["ahead"], env=ahead)
            for host in ("slow-a", "slow-b"):
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=4000, fake_vcpus=64,
                                  fake_build_time=4)
            fleet.wait_hosts_up(["slow-a", "slow-b"])
            instances = fleet.wait_states(fleet.boot(requests=40), ("ACTIVE", "ERROR"), timeout=120)
            logs = fleet.log("ahead") + fleet.log("on-time")
        finally:
            database.dispose()
            fleet.close()
        attempts = sorted({i["attempts"] for i in instances.values()})
        print(f"\n40 builds of 4 s, a scheduler 11 minutes ahead: states "
              f"{sorted({i['state'] for i in instances.values()})}, attempts {attempts}")
        assert "s ahead of the database's" in fleet.log("ahead")
        assert {i["state"] for i in instances.values()} == {"ACTIVE"}
        assert attempts == [1]
        assert "build timed out" not in logs
        assert "Dead-lettered" not in logs
