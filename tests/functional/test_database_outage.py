"""The database stops for longer than one batch's retry budget while boots arrive and a
scaling group is being built: the scheduler holds what it cannot commit, unacknowledged,
says so once, and resumes when the database is back. Nothing is dead-lettered, every
request ends ACTIVE, and no host is taken for down for the time the scheduler could not
take their reports."""

import re
import threading
import time

from scheduler import states
from tests.fixtures import temporary_vhost
from tests.functional import wire
from tests.functional.fleet import Fleet
from tests.functional.private_postgresql import private_postgresql

HOSTS = [f"outage-{i}" for i in range(4)]
RATE = 20  # boots a second
SECONDS = 28
OUTAGE_AT = 5  # seconds into the burst
OUTAGE = 15  # seconds without the database: longer than service_down_time and every retry below


def test_a_database_outage_holds_every_message_and_loses_none(tmp_path):
    with private_postgresql() as pg, temporary_vhost() as transport_url:
        fleet = Fleet(
            tmp_path, pg.url, transport_url,
            DEFAULT__debug="false",
            scheduler__service_down_time="10",
            database__max_retries="2",
            database__retry_interval="0.5",
            oslo_messaging_rabbit__rabbit_retry_interval="0.5",
            oslo_messaging_rabbit__rabbit_retry_backoff="0.5",
            oslo_messaging_rabbit__rabbit_interval_max="2",
            scaling__sync_period="2",
            scaling__cpu_initialization_period="0",
            scaling__initial_readiness_delay="0",
        )
        try:
            fleet.start_schedulers(["outage-s1"])
            for host in HOSTS:
                fleet.start_agent(host, fake_memory_mb=98304, fake_local_gb=4096, fake_vcpus=256,
                                  fake_build_time=1)
            fleet.wait_hosts_up(HOSTS)
            done = fleet.cli("scaling-group", "create", "steady", "--flavor", "m1.tiny", "--min", "12",
                             "--max", "12")
            assert done.returncode == 0, done.stderr

            outage = {}

            def cut():
                time.sleep(OUTAGE_AT)
                outage["stopped"] = time.monotonic()
                pg.stop()
                time.sleep(OUTAGE)
                pg.start()
                outage["started"] = time.monotonic()

            cutter = threading.Thread(target=cut)
            cutter.start()
            uuids, began = [], time.monotonic()
            for n in range(RATE * SECONDS):
                time.sleep(max(0.0, began + n / RATE - time.monotonic()))
                uuids += fleet.boot()
            cutter.join()

            instances = fleet.wait_states(uuids, (states.ACTIVE, states.ERROR), timeout=180)
            settled = time.monotonic() - outage["started"]
            errors = {u: i["fault_reason"] for u, i in instances.items() if i["state"] != states.ACTIVE}
            assert not errors, f"{len(errors)} of {len(uuids)} not ACTIVE, e.g. {next(iter(errors.items()))}"
            assert {i["attempts"] for i in instances.values()} == {1}

            def group_active():
                group = fleet.client.admin_call({}, "show_scaling_group", name_or_uuid="steady")
                members = group["members"]
                return group if len(members) == 12 and all(m["state"] == states.ACTIVE
                                                          for m in members) else None

            fleet.wait(group_active, 120, "the group's 12 members to be ACTIVE")
            assert wire.dead_letter_count(fleet) == 0, wire.dead_letters(fleet, 5)

            log = fleet.log("outage-s1")
            held = re.findall(r"the database is unavailable.*; holding (\d+) message", log)
            assert 1 <= len(held) <= 2, held  # said once (per outage), not once per retry
            back = re.findall(r"the failure passed after ([\d.]+) s", log)
            assert back, "the scheduler never said the database was back"
            assert " ERROR " not in log.split("the failure passed after")[-1], "errors after the outage"
            print(f"\n{len(uuids)} boots and 12 members ACTIVE through a {OUTAGE} s outage, every boot "
                  f"settled {settled:.1f} s after the database was back; the hold began with {held} "
                  f"message(s) and was said over after {back} s")
        finally:
            fleet.close()
