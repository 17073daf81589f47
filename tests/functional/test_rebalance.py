"""A rebalance plan on real processes: RabbitMQ, PostgreSQL, a scheduler and three agents.

Three 8 GB hosts each hold three 2 GB instances: 6 GB of the fleet is free, 2 GB a host, and a
6 GB flavor fits nowhere: its refusal names fragmentation and the command that plans the moves.
``berth rebalance plan --make-room`` saves a plan of two live
migrations, ``apply`` runs them two at a time, no host ever holds more than its memory
meanwhile, and the 6 GB instance then boots ACTIVE. The same plan made before the moves is
refused when applied after them, the refusal saved with its reason.
"""

import json

import pytest

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
