"""A message that takes down every worker it reaches ends as a dead letter.

The scheduler here dies (os._exit) whenever it handles one particular message;
like systemd, the test starts it again each time. The message comes back
redelivered after each death, is handled alone, and once it has taken the
worker down delivery_limit times it is dead-lettered instead: the 100 valid
requests cast around it all end ACTIVE. On classic queues the worker counts
(under state_path); on quorum queues RabbitMQ's x-delivery-limit counts too.
"""

import pathlib
import time

import pytest

from scheduler.db.api import Database
from tests.functional import wire
from tests.functional.crashing_scheduler import CRASH_UUID
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # where "tests" is importable from
LIMIT = 3


@pytest.mark.parametrize("quorum", [False, True], ids=["classic", "quorum"])
def test_a_message_that_kills_its_worker_every_time_is_dead_lettered(tmp_path, quorum):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      oslo_messaging_rabbit__delivery_limit=LIMIT,
                      oslo_messaging_rabbit__rabbit_quorum_queue=str(quorum).lower())
        env = {"PYTHONPATH": ROOT}
        database = Database(url)
        deaths = 0
        try:
            fleet.start_schedulers(["crashy"], module="tests.functional.crashing_scheduler", env=env)
            fleet.start_agent("steady", fake_memory_mb=65536, fake_local_gb=4000, fake_vcpus=64)
            fleet.wait_hosts_up(["steady"])
            # Saved: a scheduler started again knows the host before any new report.
            fleet.wait(lambda: database.list_compute_nodes(), 30, "the host's report to be saved")
            uuids = []
            for i in range(100):
                if i == 50:
                    fleet.client.delete_instance({}, CRASH_UUID)
                uuids += fleet.boot()
            deadline = time.monotonic() + 180
            while wire.dead_letter_count(fleet) < 1 or fleet.processes["crashy"].poll() is not None:
                assert time.monotonic() < deadline, f"no dead letter after {deaths} deaths"
                if fleet.processes["crashy"].poll() is not None:
                    deaths += 1
                    del fleet.processes["crashy"]
                    fleet.start_scheduler("crashy", module="tests.functional.crashing_scheduler", env=env)
                time.sleep(0.2)
            instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=120)
            [letter] = wire.dead_letters(fleet, 10)
        finally:
            database.dispose()
            fleet.close()
        states = sorted({i["state"] for i in instances.values()})
        reason = letter.headers.get("x-berth-reason") or letter.headers.get("x-first-death-reason")
        print(f"\n{'quorum' if quorum else 'classic'} queues: the worker died {deaths} times, then the "
              f"message was dead-lettered ({reason}); the 100 valid requests: {states}")
        assert states == ["ACTIVE"]
        assert deaths <= LIMIT + 1
