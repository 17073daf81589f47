"""Moves between two agents (compute API 2.0) on real processes, killed at each step.

Three live migrations run side by side, each between two agents of its own whose fake driver
makes one step slow: the destination's prepare, the source's migrate, the destination's finish.
Once each is in its slow step, the agent running it is SIGKILLed and started again (first
round), or the scheduler is (second round). Every move must end with its instance on its
destination alone, the source holding nothing, and no host's claims ever above its memory,
sampled every 0.2 s throughout.
"""

import signal
import time

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_moves import Sampler, boot

pytestmark = pytest.mark.functional

FLAVOR = {"memory_mb": 1024, "root_gb": 1, "vcpus": 1}
HOST_MB = 4096
SLOW = 6.0  # seconds of the slow step: long enough to kill its agent within it
#: step -> (source options, destination options): the agent whose step it is takes SLOW seconds.
PAIRS = {
    "prepare": ({}, {"fake_move_prepare_time": SLOW}),
    "migrate": ({"fake_migration_time_per_gb": SLOW}, {}),
    "finish": ({}, {"fake_move_finish_time": SLOW}),
}
#: The agent doing each step.
DOING = {"prepare": "dst", "migrate": "src", "finish": "dst"}


def host(step, end):
    return f"{step}-{end}"


def start_agent(fleet, step, end):
    options = PAIRS[step][0 if end == "src" else 1]
    fleet.start_agent(host(step, end), fake_memory_mb=HOST_MB, **options)


def move_all(fleet, instances):
    """Live-migrate each instance ({step: uuid}) to its pair's destination; {step: migration id}."""
    return {step: fleet.client.migrate_instance({}, uuid, host=host(step, "dst"), live=True)["id"]
            for step, uuid in instances.items()}


def at_slow_steps(fleet, migrations):
    """Wait until every move is at its slow step (the database's word), and a moment into it."""
    def there():
        found = {m["id"]: m for m in fleet.client.list_migrations({}, status="migrating")}
        return all(found.get(migration_id, {}).get("step") == step
                   for step, migration_id in migrations.items())
    fleet.wait(there, 60, "each move at its slow step")
    time.sleep(1.0)


def check_moved(fleet, instances, migrations):
    ended = fleet.wait_states(list(instances.values()), ("ACTIVE",), timeout=120)
    for step, uuid in instances.items():
        assert (ended[uuid]["host"], ended[uuid]["move_host"]) == (host(step, "dst"), None), step
    fleet.wait(lambda: all(fleet.hosts()[host(step, "src")]["running_vms"] == 0 for step in PAIRS), 60,
               "every source to let its instance go")
    statuses = {m["id"]: m["status"] for m in fleet.client.list_migrations({})}
    assert {step: statuses[migration_id] for step, migration_id in migrations.items()} == dict.fromkeys(
        PAIRS, "completed")


def test_a_live_move_killed_at_any_step_ends_on_one_host_with_true_claims(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false",
                      filter_scheduler__ram_allocation_ratio=1.0, compute_agent__reserved_host_memory_mb=0)
        sampler = None
        try:
            fleet.start_schedulers(["sched-1"])
            for step in PAIRS:
                for end in ("src", "dst"):
                    start_agent(fleet, step, end)
            fleet.wait_hosts_up([host(step, end) for step in PAIRS for end in ("src", "dst")])
            instances = {step: boot(fleet, 1, FLAVOR, force=host(step, "src"))[0] for step in PAIRS}
            fleet.wait_states(list(instances.values()), ("ACTIVE",))
            sampler = Sampler(fleet, [])

            # Round 1: the agent doing each step is killed in it, and started again.
            migrations = move_all(fleet, instances)
            at_slow_steps(fleet, migrations)
            for step in PAIRS:
                fleet.stop(host(step, DOING[step]), sig=signal.SIGKILL)
            killed = {step: fleet.instances([uuid])[uuid]["state"] for step, uuid in instances.items()}
            for step in PAIRS:
                start_agent(fleet, step, DOING[step])
            check_moved(fleet, instances, migrations)
            work = {"prepare": "prepare", "migrate": "migrate_out", "finish": "finish"}
            resumed = {step: f"Resuming the {work[step]} of {instances[step]}"
                       in fleet.log(host(step, DOING[step])) for step in PAIRS}

            # Round 2: three more moves alike, the scheduler killed while each is in its slow step.
            back = {step: boot(fleet, 1, FLAVOR, force=host(step, "src"))[0] for step in PAIRS}
            fleet.wait_states(list(back.values()), ("ACTIVE",))
            second = move_all(fleet, back)
            at_slow_steps(fleet, second)
            fleet.stop("sched-1", sig=signal.SIGKILL)
            time.sleep(SLOW / 2)  # the steps end, and their word waits for a scheduler
            fleet.start_schedulers(["sched-1"])
            check_moved(fleet, back, second)
            sampler.stop()
            complaints = fleet.complaints()
        finally:
            if sampler is not None:
                sampler.stop()
            fleet.close()
    print(f"\nthree live moves, each agent killed in its slow step ({SLOW:.0f} s) and the scheduler killed "
          f"while three more were in theirs: all completed on their destination; {sampler.samples} samples "
          f"of the claims, {len(sampler.over)} over a host's memory")
    assert killed == dict.fromkeys(PAIRS, "MIGRATING")
    assert resumed == dict.fromkeys(PAIRS, True)
    assert sampler.samples > 20 and sampler.over == []
    assert "Traceback" not in complaints
