"""A rebalance plan on real processes: RabbitMQ, PostgreSQL, a scheduler and three agents.

Three 8 GB hosts each hold three 2 GB instances: 6 GB of the fleet is free, 2 GB a host, and a
6 GB flavor fits nowhere: its refusal names fragmentation and the command that plans the moves.
``berth rebalance plan --make-room`` saves a plan of two live
migrations, ``apply`` runs them two at a time, no host ever holds more than its memory
meanwhile, and the 6 GB instance then boots ACTIVE. The same plan made before the moves is
refused when applied after them, the refusal saved with its reason.

A balance plan on the agents' own measure of each instance: four busy instances on one host,
load no instance accounts for on another; applied, the skew the fleet shows is the one the plan
predicted.
"""

import json

import pytest

from compute_agent.load_model import busy_and_off
from scheduler.cmd.instance_commands import build_request
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_moves import Sampler, boot

pytestmark = pytest.mark.functional

TWO_GB = {"memory_mb": 2048, "root_gb": 1, "vcpus": 1}
BIG = {"memory_mb": 6144, "root_gb": 1, "vcpus": 1}
HOSTS = ("a", "b", "c")


def test_a_plan_makes_room_for_a_flavor_that_fit_nowhere_and_it_then_boots(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__ram_allocation_ratio=1.0,
                      compute_agent__reserved_host_memory_mb=0)
        try:
            fleet.start_schedulers(["sched-1"])
            for host in HOSTS:
                fleet.start_agent(host, fake_memory_mb=8192, fake_migration_time_per_gb=1.0)
            fleet.wait_hosts_up(HOSTS)
            residents = [u for host in HOSTS for u in boot(fleet, 3, flavor=TWO_GB, force=host)]
            fleet.wait_states(residents, ("ACTIVE",))
            fleet.wait(lambda: all(h["memory_mb_used"] == 6144 for h in fleet.hosts().values()), 30,
                       "the hosts to report their instances")
            created = fleet.cli("flavor", "create", "big", "--ram", "6144", "--disk", "1", "--vcpus", "1")
            assert created.returncode == 0, created.stderr
            # refused, and the refusal says why: the fleet has room, no host has, moves would make it
            [refused] = boot(fleet, 1, flavor=dict(BIG, name="big"))
            fault = fleet.wait_states([refused], ("ERROR",))[refused]["fault_reason"]
            assert "RamFilter removed 3" in fault, fault
            assert "fragmentation: " in fault, fault
            assert "would have room after moving instances off them" in fault, fault
            assert fault.endswith("`berth rebalance plan --make-room big`"), fault

            planned = fleet.cli("rebalance", "plan", "--make-room", "big", "-f", "json")
            assert planned.returncode == 0, planned.stderr
            plan = json.loads(planned.stdout)
            assert len(plan["steps"]) == 2 and plan["state"] == "planned"
            [target] = plan["placements"]
            assert {s["source"] for s in plan["steps"]} == {target}
            assert {s["dest"] for s in plan["steps"]} == set(HOSTS) - {target}
            # the largest of the flavors in use and the one asked: the 2 GB one fits, then big
            assert (plan["before"]["largest_fit"], plan["after"]["largest_fit"]) == ("1/2048/1", "big")

            stale = json.loads(fleet.cli("rebalance", "plan", "--make-room", "big", "-f", "json").stdout)

            sampler = Sampler(fleet, [])
            applied = fleet.cli("rebalance", "apply", str(plan["id"]), "--max-parallel", "2", timeout=300)
            sampler.stop()
            assert applied.returncode == 0, applied.stdout + applied.stderr
            assert applied.stdout.splitlines()[-1] == f"rebalance plan {plan['id']} done: 2 done"
            assert sampler.samples > 3
            assert sampler.over == [], "a host held more than its memory"
            moved = {s["instance"]: s["dest"] for s in plan["steps"]}
            final = fleet.wait_states(list(moved), ("ACTIVE",))
            assert {u: i["host"] for u, i in final.items()} == moved

            shown = fleet.cli("rebalance", "show", str(plan["id"]), "-f", "json")
            assert [s["status"] for s in json.loads(shown.stdout)["steps"]] == ["done", "done"]
            # the same plan made before: its instances moved since, so its first step is refused, and saved so
            refused = fleet.cli("rebalance", "apply", str(stale["id"]))
            assert refused.returncode == 1
            assert "is no longer ACTIVE on" in refused.stdout, refused.stdout + refused.stderr
            shown = json.loads(fleet.cli("rebalance", "show", str(stale["id"]), "-f", "json").stdout)
            assert shown["state"] == "stopped" and shown["reason"].startswith("step 1 refused: instance ")
            assert [s["status"] for s in shown["steps"]] == ["failed", "pending"]
            fleet.wait(lambda: fleet.hosts()[target]["memory_mb_used"] == 2048, 30,
                       f"{target}'s agent to let go of what moved")
            [big] = boot(fleet, 1, flavor=dict(BIG, name="big"))
            booted = fleet.wait_states([big], ("ACTIVE", "ERROR"))
            assert (booted[big]["state"], booted[big]["host"]) == ("ACTIVE", target)
        finally:
            fleet.close()


def test_a_balance_plan_on_each_instances_measured_load_reaches_the_skew_it_predicted(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        # a short half-life: the moving averages follow the new load within a few reports
        fleet = Fleet(tmp_path, url, transport_url, filter_scheduler__load_half_life=2.0)
        try:
            fleet.start_schedulers(["sched-1"])
            # whether an instance is busy (its vCPU all used) or idle (5 % of it) is drawn from its
            # uuid, on whichever agent it runs: its load goes with it when it moves
            drawn = {"fake_vcpus": 8, "fake_busy_fraction": 0.5, "fake_load_seed": 7,
                     "fake_migration_time_per_gb": 1.0}
            fleet.start_agent("a", **drawn)
            fleet.start_agent("b", **drawn)
            # c: 2 of its 8 cores busy with work that is none of its instances'
            fleet.start_agent("c", fake_hidden_cpu_load=2.0, **drawn)
            fleet.wait_hosts_up(HOSTS)
            busy = [boot_drawn(fleet, "a", busy=True) for _ in range(4)]
            idle = [boot_drawn(fleet, "b", busy=False), boot_drawn(fleet, "c", busy=False)]
            fleet.wait_states(busy + idle, ("ACTIVE",))
            # a: 4 busy vCPUs of 8; b: an idle one; c: an idle one and its 2 of background
            expected = {"a": 0.5, "b": 0.05 / 8, "c": 2.05 / 8}
            fleet.wait(lambda: all(abs((fleet.hosts()[h]["cpu_util"] or 0) - u) < 0.01
                                   for h, u in expected.items()), 60, "the measured load to settle",
                       last_seen=lambda: {h: v["cpu_util"] for h, v in fleet.hosts().items()})

            planned = fleet.cli("rebalance", "plan", "--balance", "--target", "1.0", "--max-migrations", "2",
                                "-f", "json")
            assert planned.returncode == 0, planned.stderr
            plan = json.loads(planned.stdout)
            # 6.1 busy vCPUs of 24: the fleet 25 % busy, a at 50 %: skew 1.97; the instances leave a,
            # to b first (the least busy), none to c, whose background stays where it is
            assert plan["before"]["skew"] == pytest.approx(0.5 / (6.1 / 24), abs=0.01)
            assert {s["source"] for s in plan["steps"]} == {"a"} and len(plan["steps"]) >= 1
            assert "b" in {s["dest"] for s in plan["steps"]}
            predicted = plan["after"]["skew"]
            assert predicted < 1.5

            applied = fleet.cli("rebalance", "apply", str(plan["id"]), timeout=300)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            moved = {s["instance"]: s["dest"] for s in plan["steps"]}
            final = fleet.wait_states(list(moved), ("ACTIVE",))
            assert {u: i["host"] for u, i in final.items()} == moved

            def reached():
                shown = fleet.cli("rebalance", "show", str(plan["id"]), "-f", "json")
                return json.loads(shown.stdout)["reached"]

            # once each agent has measured its instances where they are now
            fleet.wait(lambda: abs(reached()["skew"] - predicted) <= 0.05, 60,
                       f"the skew reached to come within 0.05 of the {predicted} predicted",
                       last_seen=reached)
            shown = fleet.cli("rebalance", "show", str(plan["id"]))
            header = next(line for line in shown.stdout.splitlines() if line.startswith("FIGURE"))
            assert header.split() == ["FIGURE", "BEFORE", "PLANNED", "NOW"]
        finally:
            fleet.close()


def boot_drawn(fleet, host, busy):
    """An instance on ``host`` whose uuid the fake agents' draw makes busy (or idle)."""
    while True:
        request_spec, filter_properties = build_request(TWO_GB, 1)
        [uuid] = request_spec["instance_uuids"]
        if busy_and_off(uuid, 7, 0.5, 0.0)[0] == busy:
            break
    fleet.client.run_instance({}, request_spec, dict(filter_properties, force_hosts=[host]))
    return uuid
