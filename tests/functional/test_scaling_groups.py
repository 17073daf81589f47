"""Scaling groups on real processes, RabbitMQ and PostgreSQL: a group grows under load no
faster than its policy, spread by anti-affinity, shrinks only after its stabilization
window, replaces an ERROR member; a controller killed mid-scale-up is taken over without a
member made twice; a worker pool follows a queue's depth."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta

import kombu
import pytest

from scheduler import states
from scheduler.db.api import Database, to_db_time
from tests.functional import wire
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

HOSTS = [f"scale-{i}" for i in range(1, 7)]
SYNC_PERIOD = 2
UP_PERIOD = 6  # the scale-up policy: at most one member more per this many seconds
DOWN_WINDOW = 12  # the scale-down stabilization window
# Short periods, so that a test takes a minute, not an hour: every member is trusted at
# once, samples are fresh for 10 s, a member not built after 4 s gets its build again.
SCALING = {
    "scaling__sync_period": str(SYNC_PERIOD),
    "scaling__cpu_initialization_period": "0",
    "scaling__initial_readiness_delay": "0",
    "scaling__metric_max_age": "10",
    "scaling__cast_grace": "4",
    "scaling__replace_backoff": "1",
}
BEHAVIOR = {
    "scale_up": {"stabilization_window_s": 0, "select_policy": "max",
                 "policies": [{"type": "instances", "value": 1, "period_s": UP_PERIOD}]},
    "scale_down": {"stabilization_window_s": DOWN_WINDOW,
                   "policies": [{"type": "percent", "value": 100, "period_s": SYNC_PERIOD}]},
}


@pytest.fixture
def world(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, **SCALING)
        database = Database(url)
        try:
            yield fleet, database
        finally:
            fleet.close()
            database.dispose()


def start(fleet, schedulers=("sched-1",), env=None, module="scheduler.cmd.scheduler"):
    fleet.start_schedulers(schedulers, env=env, module=module)
    for host in HOSTS:
        fleet.start_agent(host, fake_memory_mb=16384, fake_local_gb=200, fake_vcpus=4)
    fleet.wait_hosts_up(HOSTS)


def berth(fleet, *args):
    done = fleet.cli(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def show(fleet, name):
    return fleet.client.admin_call({}, "show_scaling_group", name_or_uuid=name)


def members(group, state=None):
    return [m for m in group["members"] if state is None or m["state"] == state]


def _metric(group, name):
    return {m["name"]: m for m in (group.get("status") or {}).get("metrics", [])}.get(name, {})


def _cpu(group):
    return _metric(group, "cpu")


class Events:
    """The group's scale events as the controllers record them (the database's times),
    gathered while the test runs: the controller prunes what its windows no longer need."""

    def __init__(self, database, uuid):
        self.database, self.uuid, self.seen, self.recommended = database, uuid, {}, {}

    def poll(self):
        history = self.database.scaling_group_history(self.uuid)
        for event in history["scale_events"]:
            event = dict(event, recorded_at=to_db_time(event["recorded_at"]))
            self.seen[(event["recorded_at"], event["change"])] = event
        for recommendation in history["recommendations"]:
            self.recommended[to_db_time(recommendation["recorded_at"])] = recommendation["replicas"]
        return sorted(self.seen.values(), key=lambda e: e["recorded_at"])


def settled(fleet, name, count, events=None):
    """The group's desired count is ``count`` and that many members are ACTIVE, no other."""

    def check():
        if events is not None:
            events.poll()
        group = show(fleet, name)
        return group if group["desired"] == count and len(members(group, states.ACTIVE)) == count == len(
            members(group)) else None

    return check


def test_a_group_grows_under_load_within_its_policy_spreads_and_shrinks_after_its_window(world, tmp_path):
    fleet, database = world
    start(fleet, ("sched-1", "sched-2"))
    berth(fleet, "server-group", "create", "spread", "--policy", "anti-affinity")
    behavior = tmp_path / "behavior.json"
    behavior.write_text(json.dumps(BEHAVIOR))
    uuid = berth(fleet, "scaling-group", "create", "web", "--flavor", "m1.small", "--min", "2", "--max", "6",
                 "--cpu", "50", "--server-group", "spread", "--behavior", str(behavior),
                 "-f", "value", "-c", "uuid").strip()
    events = Events(database, uuid)
    fleet.wait(settled(fleet, "web", 2, events), 60, "web's first 2 members ACTIVE")

    # 90% of each member's vCPU against a 50% target: the algorithm asks for ceil(n * 1.8),
    # always more than there are, so the group grows to max, one member per UP_PERIOD.
    berth(fleet, "fake-load", "set", "--cpu", "0.9", "--all")
    fleet.wait(settled(fleet, "web", 6, events), 120, "web to grow to 6 ACTIVE members")
    # A member's first samples come with its host's next report: wait for a sync that has them
    # all. The algorithm then asks for ceil(6 * 90 / 50) = 11 members, limited to max.
    grown = fleet.wait(lambda: (lambda g: g if (_cpu(g).get("current"), _cpu(g).get("proposal")) == (90, 11)
                                else None)(show(fleet, "web")), 30, "a sync with every member's sample")
    ups = [e for e in events.poll() if e["change"] > 0]
    assert [e["change"] for e in ups] == [1, 1, 1, 1], ups
    gaps = [(b["recorded_at"] - a["recorded_at"]).total_seconds() for a, b in zip(ups, ups[1:], strict=False)]
    assert min(gaps) >= UP_PERIOD, gaps  # never faster than the policy allows in any period
    assert grown["status"]["limited_by"] == "TooManyReplicas"
    assert len({m["host"] for m in members(grown)}) == 6  # anti-affinity: one member per host

    # The load drops: the group keeps its 6 members until the last recommendation made on
    # the high load is a stabilization window old, then goes to what the algorithm asks
    # for, ceil(6 * 10 / 50) = 2. Each member's low sample comes with its host's next
    # report, so a sync may see some low and some still high and recommend a count between
    # (1 high, 5 low: ceil(6 * 23.3 / 50) = 3); the group then shrinks in steps, as the
    # HorizontalPodAutoscaler does, each step a window after the last recommendation above
    # the count it goes to.
    dropped_at = to_db_time(database.now())
    berth(fleet, "fake-load", "set", "--cpu", "0.1", "--all")
    fleet.wait(settled(fleet, "web", 2, events), 90, "web to shrink to 2")
    downs = [e for e in events.poll() if e["change"] < 0]
    assert sum(e["change"] for e in downs) == -4, downs
    count = 6
    for down in downs:
        count += down["change"]
        last_higher = max(at for at, replicas in events.recommended.items()
                          if replicas > count and at < down["recorded_at"])
        assert down["recorded_at"] - last_higher >= timedelta(seconds=DOWN_WINDOW), (down, last_higher)
    last_high = max(at for at, replicas in events.recommended.items()
                    if replicas > 2 and at < downs[-1]["recorded_at"])
    assert last_high >= dropped_at - timedelta(seconds=SYNC_PERIOD + 1)  # the window ran after the drop

    # A member gone to ERROR (as its agent reports a failure) is deleted and replaced.
    group = show(fleet, "web")
    broken = members(group)[0]
    fleet.client.instance_update({}, broken["uuid"], broken["host"], states.ERROR,
                                 {"message": "the disk died"})
    replaced = fleet.wait(
        lambda: (lambda g: g if broken["uuid"] not in {m["uuid"] for m in members(g)}
                 and settled(fleet, "web", 2)() else None)(show(fleet, "web")),
        60, "the ERROR member to be replaced")
    assert fleet.instances([broken["uuid"]])[broken["uuid"]]["state"] == states.DELETED
    assert len({m["host"] for m in members(replaced)}) == 2


DIE_AFTER_COMMIT = """
import os, signal, sys
from scheduler import client
from scheduler.cmd import scheduler

def run_instance(self, *args):
    # Only the scaling controller casts run_instance from a scheduler (its builds of a sync
    # together, run_instances): the sync that made the members has committed them. Die
    # before any build is cast.
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    client.SchedulerClient.run_instance = client.SchedulerClient.run_instances = run_instance
    sys.exit(scheduler.main())
"""


def test_a_controller_killed_mid_scale_up_is_taken_over_and_no_member_is_made_twice(world, tmp_path):
    fleet, database = world
    (tmp_path / "dies_after_commit.py").write_text(DIE_AFTER_COMMIT)
    # sched-1 alone first, so that it holds the group's lease; its first build kills it.
    fleet.start_schedulers(["sched-1"], env={"PYTHONPATH": str(tmp_path)}, module="dies_after_commit")
    for host in HOSTS:
        fleet.start_agent(host, fake_memory_mb=16384, fake_local_gb=200, fake_vcpus=4)
    fleet.wait_hosts_up(HOSTS)
    uuid = berth(fleet, "scaling-group", "create", "pool", "--flavor", "m1.tiny", "--min", "3", "--max", "5",
                 "--cpu", "50", "-f", "value", "-c", "uuid").strip()
    dying = fleet.processes.pop("sched-1")  # out of the fleet's liveness checks
    try:
        assert dying.wait(timeout=60) == -signal.SIGKILL, fleet.log("sched-1")[-3000:]
    finally:
        if dying.poll() is None:
            dying.kill()
    written = database.list_scaling_group_members(uuid)
    assert len(written) == 3 and {m["state"] for m in written} == {states.SCHEDULING}
    assert {m["host"] for m in written} == {None}  # committed, never cast

    fleet.start_schedulers(["sched-2"])
    # sched-1's lease has run out: sched-2 takes the group at its first sync, and sends the
    # builds sched-1 never sent once they are cast_grace old.
    fleet.wait(lambda: (database.get_scaling_group(uuid)["lease_owner"] or "").startswith("sched-2:"),
               2 * SYNC_PERIOD, "sched-2 to hold the group")
    group = fleet.wait(settled(fleet, "pool", 3), 60, "sched-2 to build pool's members")
    every = database.list_scaling_group_members(uuid, include_deleted=True)
    assert sorted(m["uuid"] for m in every) == sorted(m["uuid"] for m in written)  # none made twice
    assert sorted(m["name"] for m in members(group)) == ["pool-1", "pool-2", "pool-3"]


def test_a_worker_pool_follows_the_depth_of_its_queue(world, tmp_path):
    fleet, database = world
    start(fleet)
    with wire.raw_connection(fleet) as conn:
        jobs = kombu.Queue("jobs", kombu.Exchange("jobs", type="direct"), routing_key="jobs", durable=True)
        producer = conn.Producer()
        for n in range(100):
            producer.publish({"job": n}, exchange=jobs.exchange, routing_key="jobs", declare=[jobs])
    behavior = tmp_path / "behavior.json"
    behavior.write_text(json.dumps({"scale_down": {"stabilization_window_s": 6}}))
    uuid = berth(fleet, "scaling-group", "create", "workers", "--flavor", "m1.tiny", "--min", "1", "--max",
                 "8", "--metric", "external:queue:jobs=average:20", "--behavior", str(behavior),
                 "-f", "value", "-c", "uuid").strip()
    events = Events(database, uuid)
    # 100 messages at 20 a worker: 5 workers (from 1, Kubernetes' default policy allows +4).
    fleet.wait(settled(fleet, "workers", 5, events), 90, "5 workers")
    fleet.wait(lambda: _metric(show(fleet, "workers"), "queue:jobs").get("current") == 20, 10,
               "a sync of the 5 workers: 100 messages, 20 a worker")
    assert _metric(show(fleet, "workers"), "queue:jobs")["proposal"] == 5

    with wire.raw_connection(fleet) as conn:
        jobs(conn.default_channel).purge()
    fleet.wait(settled(fleet, "workers", 1, events), 90, "the pool to shrink to 1 once the queue is empty")
    assert [e["change"] for e in events.poll()] == [4, -4]


def test_the_scaling_demo_grows_a_group_to_its_max_and_shrinks_it_on_the_embedded_default(tmp_path):
    """berth-all-in-one --demo-scaling as a newcomer runs it (filesystem:// and SQLite)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cmd.all_in_one", "--demo-scaling"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**{k: v for k, v in os.environ.items() if k not in ("INVOCATION_ID", "NOTIFY_SOCKET")},
             "XDG_STATE_HOME": str(tmp_path / "xdg")})
    print(f"\nscaling demo: {time.monotonic() - started:.1f} s\n{done.stdout}")
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    assert re.search(r"^The group went 2 -> (\d -> )*6 -> [12] members\.$", done.stdout, re.M), done.stdout
    assert "scaled from 6 to" in done.stdout and "deleted demo-web and its members" in done.stdout
    assert done.stderr == ""
