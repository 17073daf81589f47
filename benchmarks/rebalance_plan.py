"""``berth rebalance plan --make-room`` as the scheduler serves it: the fleet read, planned, saved.

In one process, as the unit tests drive a scheduler: the parts of ``assemble()`` on memory://
and a SQLite file. The fleet is benchmarks.make_room's (hosts of 128 or 256 GB filled at random
to 85-95 % of their memory with 2-16 GB flavors; no server groups here), its instances written
ACTIVE in the database and listed by their hosts' reports; room is asked for the 64 GB flavor
that fits on no host. Each repeat calls ``plan_rebalance`` once on a fresh seed.

Figures: the wall time of the whole call, and of its parts: the fleet read (the host table
copied, every instance and its stored request read: scheduler.moves.fleet_snapshot), the plan
(make_room, within its 1 s limit), the figures before and after, the plan saved; median with
the interquartile range over the repeats.

Run alone: ``python -m benchmarks.rebalance_plan [--hosts N] [--repeats R] [--seed S]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks import make_room as fleets
from berth_contract.request_spec import RequestSpec
from scheduler import rpc, states
from scheduler.cmd.arguments import positive, whole
from scheduler.db.api import Database
from scheduler.moves import rebalance_api
from scheduler.moves.goals.make_room import MakeRoom
from scheduler.moves.rebalance import figures
from scheduler.service import assemble

CTX = rpc.Context({})


def scheduler_with_fleet(tmp: str, n_hosts: int, seed: int) -> tuple[Any, Any, Any]:
    """(parts, database, transport): a scheduler whose hosts and instances are a fragmented fleet."""
    conf = fleets.make_conf()
    conf.set_override("state_path", os.path.join(tmp, "state"))
    conf.set_override("transport_url", "memory://")
    conf.set_override("control_exchange", f"berth-bench-rebalance-{os.getpid()}-{seed}")
    conf.set_override("connection", f"sqlite:///{tmp}/rebalance-{seed}.sqlite", "database")
    transport = rpc.get_transport(conf)
    database = Database.from_conf(conf)
    database.sync()
    parts = assemble(conf, transport, database, random.Random(seed))
    snapshot = fleets.fragmented_fleet(n_hosts, seed, conf, grouped=0.0, pinned=0.0)
    rows, on_host = [], {}
    for resident in snapshot.residents.values():
        flavor = resident.flavor
        spec, props = RequestSpec(instance_uuids=[resident.uuid], flavor=flavor).to_wire()
        rows.append({"uuid": resident.uuid, "host": resident.host, "state": states.ACTIVE,
                     "flavor_name": flavor.name, "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb,
                     "ephemeral_gb": flavor.ephemeral_gb, "vcpus": flavor.vcpus, "request_spec": spec,
                     "filter_properties": props})
        on_host.setdefault(resident.host, []).append(resident.uuid)
    database.create_instances(rows)
    table = snapshot.table
    for row, host in enumerate(table.names):
        parts.manager.report_resources(CTX, host, {
            "host": host, "memory_mb": int(table.total_ram_mb[row]),
            "free_ram_mb": int(table.free_ram_mb[row]),
            "local_gb": int(table.total_disk_gb[row]), "free_disk_gb": float(table.free_disk_gb[row]),
            "vcpus": int(table.vcpus_total[row]), "vcpus_used": float(table.vcpus_used[row]),
            "running_vms": len(on_host.get(host, [])), "instance_uuids": on_host.get(host, [])})
    return parts, database, transport


class Timed:
    """Wraps the call's parts to time each: {name: [seconds]}."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds.setdefault(label, []).append(time.perf_counter() - start)

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def measure(n_hosts: int, repeats: int, first_seed: int = 0) -> dict[str, Any]:
    timed = Timed()
    timed.wrap(rebalance_api, "fleet_snapshot", "fleet read")
    timed.wrap(figures, "before_after", "figures")
    timed.wrap(MakeRoom, "plan", "plan")
    steps, instances = [], 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(first_seed, first_seed + repeats):
                parts, database, transport = scheduler_with_fleet(tmp, n_hosts, seed)
                try:
                    instances = len(database.list_instances(states=[states.ACTIVE]))
                    timed.wrap(database, "create_rebalance_plan", "plan saved")
                    start = time.perf_counter()
                    plan = parts.rebalance.plan_rebalance(CTX, MakeRoom.name,
                                                          {"flavor": fleets.LARGE.to_wire()})
                    timed.seconds.setdefault("whole call", []).append(time.perf_counter() - start)
                    steps.append(len(plan["steps"]))
                finally:
                    transport.cleanup()
                    database.dispose()
    finally:
        timed.restore()
    return {"hosts": n_hosts, "instances": instances, "repeats": repeats, "steps": steps,
            "seconds": timed.seconds}


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0] * 1000:.0f} ms"
    q1, median, q3 = statistics.quantiles(values, n=4)
    return f"{statistics.median(values) * 1000:.0f} ms (IQR {q1 * 1000:.0f}-{q3 * 1000:.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=positive, default=1000)
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--seed", type=whole, default=0,
                        help="the first fleet's seed: fleets SEED to SEED + REPEATS - 1")
    args = parser.parse_args(argv)
    result = measure(args.hosts, args.repeats, args.seed)
    print(f"plan_rebalance --make-room {fleets.LARGE.name}: {result['hosts']} hosts, {result['instances']} "
          f"instances, {result['repeats']} fleets, migrations per plan {result['steps']}")
    for name in ("whole call", "fleet read", "plan", "figures", "plan saved"):
        values = result["seconds"].get(name)
        print(f"  {name:<11} {_spread(values) if values else 'not called: the goal gave its own'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
