"""Faults mid-burst, with real processes on the real RabbitMQ and PostgreSQL: a
scheduler stopped with SIGTERM or killed with SIGKILL, an agent killed mid-build and
restarted (RabbitMQ stopped and started: test_broker_restarts). Every instance ends ACTIVE (or
ERROR with a reason), none is lost, none is built on two hosts."""

import collections
import signal

from compute_agent.instance_store import InstanceStore
from scheduler.db.api import Database
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENTS = ("fault-a", "fault-b", "fault-c")


def start(
    tmp_path, url, transport_url, schedulers=("scheduler",), agents=AGENTS, agent_options=None, **overrides
):
    overrides.setdefault("DEFAULT__debug", "false")
    # Instances whose build cast was lost with a killed process are rescheduled, within the
    # tests' wait; but not builds merely queued behind the burst's others (an agent builds some
    # ten a second, a few hundred each here: 30 s rescheduled good builds on a busy machine).
    overrides.setdefault("scheduler__build_timeout", 90)
    fleet = Fleet(tmp_path, url, transport_url, **overrides)
    fleet.start_schedulers(schedulers)
    for host in agents:
        fleet.start_agent(
            host, fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256, **(agent_options or {})
        )
    fleet.wait_hosts_up(agents)
    return fleet


def burst(fleet, requests, per_request=2, bundled=False):
    return fleet.boot(count=per_request, requests=requests, bundled=bundled)


def placed(database):
    """How many instances left SCHEDULING (read from the database: no RPC in the queue)."""
    counts = database.count_instances_by_state()
    return sum(n for state, n in counts.items() if state != "SCHEDULING")


def wait_placed(fleet, database, count):
    fleet.wait(lambda: placed(database) >= count, 120, f"{count} instances placed", interval=0.05)


def outcome(fleet, uuids, agents=AGENTS):
    """Settled instances, checked against the agents' own records: each ACTIVE one is
    held by exactly its host's agent, no ERROR one by any, no instance by two."""
    instances = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=240)
    state_path = str(fleet.tmp / "state")

    def consistent():
        held = {h: set(InstanceStore(state_path, h).load()) for h in agents}
        where = collections.defaultdict(list)
        for host, mine in held.items():
            for u in mine:
                where[u].append(host)
        for u, i in instances.items():
            expected = [i["host"]] if i["state"] == "ACTIVE" else []
            if where.get(u, []) != expected:
                return None
        return where

    where = fleet.wait(consistent, 60, "every agent to hold exactly its ACTIVE instances")
    errors = {u: i["fault_reason"] for u, i in instances.items() if i["state"] == "ERROR"}
    assert all(errors.values()), errors  # every ERROR says why
    assert not [u for u, hosts in where.items() if len(hosts) > 1]
    return instances, errors


def figures(label, uuids, instances, errors, extra=""):
    per_host = collections.Counter(i["host"] for i in instances.values() if i["state"] == "ACTIVE")
    print(
        f"\n{label}: {len(uuids)} requested, {len(instances) - len(errors)} ACTIVE, {len(errors)} ERROR, "
        f"0 lost, 0 on two hosts; per host {dict(sorted(per_host.items()))}{extra}"
    )
    if errors:
        print(f"{label}: ERROR reasons {collections.Counter(errors.values()).most_common(3)}")


def test_sigterm_drains_then_a_new_scheduler_finishes_the_burst(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = start(tmp_path, url, transport_url)
        database = Database(url)
        try:
            uuids = burst(fleet, 150)
            wait_placed(fleet, database, 40)
            code = fleet.stop("scheduler", signal.SIGTERM)
            stopped_at = placed(database)
            assert code == 0
            assert "draining and stopping" in fleet.log("scheduler")
            fleet.start_scheduler("scheduler-2")
            instances, errors = outcome(fleet, uuids)
            assert errors == {}
            figures(
                "sigterm", uuids, instances, errors, f"; {stopped_at} placed when SIGTERM returned (exit 0)"
            )
        finally:
            database.dispose()
            fleet.close()


def test_a_scheduler_killed_mid_burst_loses_nothing(tmp_path):
    """1,000 requests, three workers, one SIGKILLed midway."""
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = start(tmp_path, url, transport_url, schedulers=("sched-1", "sched-2", "sched-3"))
        database = Database(url)
        try:
            uuids = burst(fleet, 1000, per_request=1)
            wait_placed(fleet, database, 300)
            code = fleet.stop("sched-1", signal.SIGKILL)
            killed_at = placed(database)
            assert code == -signal.SIGKILL
            instances, errors = outcome(fleet, uuids)
            assert len(instances) == len(uuids)
            attempts = collections.Counter(i["attempts"] for i in instances.values())
            figures(
                "sigkill",
                uuids,
                instances,
                errors,
                f"; {killed_at} placed when sched-1 was killed; attempts {dict(attempts)}",
            )
            assert errors == {}  # what the killed worker held was redelivered to the others
        finally:
            database.dispose()
            fleet.close()


def test_an_agent_killed_mid_build_and_restarted_accounts_for_its_instances(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        agents = ("fault-a", "fault-b")
        fleet = start(tmp_path, url, transport_url, agents=agents, agent_options={"fake_build_time": 3})
        database = Database(url)
        try:
            uuids = burst(fleet, 10)
            victim = "fault-a"
            fleet.wait(
                lambda: len(database.list_instances(host=victim, states=["BUILDING"])) >= 3,
                60,
                f"builds in progress on {victim}",
            )
            building = len(database.list_instances(host=victim, states=["BUILDING"]))
            assert fleet.stop(victim, signal.SIGKILL) == -signal.SIGKILL
            # The other one is stopped cleanly mid-build: it exits 0, its builds resume later.
            assert fleet.stop("fault-b", signal.SIGTERM) == 0
            fleet.start_agent(
                "fault-b", fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256, fake_build_time=3
            )
            fleet.start_agent(
                victim, fake_memory_mb=262144, fake_local_gb=8192, fake_vcpus=256, fake_build_time=3
            )
            instances, errors = outcome(fleet, uuids, agents)
            assert errors == {}
            mine = [u for u, i in instances.items() if i["host"] == victim]
            hosts = fleet.wait(
                lambda: (h := fleet.hosts())[victim]["running_vms"] == len(mine) and h,
                60,
                f"{victim} to report its {len(mine)} instances",
            )
            assert "Resuming the build of" in fleet.log(victim)
            figures(
                "agent-kill",
                uuids,
                instances,
                errors,
                f"; {building} were BUILDING on {victim} when it was killed "
                f"(fault-b: SIGTERM, exit 0); it reports "
                f"{hosts[victim]['running_vms']} after restart",
            )
        finally:
            database.dispose()
            fleet.close()
