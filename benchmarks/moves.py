"""Draining a host: 100 ACTIVE instances moved off one host of a 1,000-host fleet.

In one process, as the unit tests drive a scheduler: the parts of ``assemble()`` on
memory:// and a SQLite file. Every host reports once, partly filled (a tenth nearly
full); the source host is filled through the scheduler itself: each instance booted
by ``run_instance`` with ``force_hosts`` to it, made ACTIVE by ``instance_update``,
then listed by the source's report. No agent listens: the casts to the agents are
left unconsumed, so the figures are the scheduler's alone.

The drain is what ``berth host drain`` does with ``--max-parallel N`` (default 1, one
move after the other): the source disabled, then ``migrate_instance`` of N
instances, then the ``move_update`` of each step of each from its agents at once
(moves that take no time: "prepared" from the destination, "migrated" from the source,
"done" from the destination), and so on. Each RPC method runs in a unit of work of its
own, as the RPC server runs a message: its transaction committed, its casts sent.

Figures: the decision of each move (``MovePlanner.choose``: filters, weighers,
selection, the destination consumed in the host table), the whole
``migrate_instance`` call, both as the median of every move of every repeat with
the interquartile range; and moves per second of each whole drain, from the disable
to the last "done", as the median of the repeats with min-max. Each repeat drains a
fresh fleet. A drain that leaves an instance on the source, or a destination over
its limits, raises instead of printing figures.

Run alone: ``python -m benchmarks.moves [--hosts N] [--instances N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import itertools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

from benchmarks import command_line
from benchmarks.summary import percentile, quartiles
from scheduler import conf as berth_conf
from scheduler import rpc, states
from scheduler.admin.grouping import known_host
from scheduler.admin.hosts import HostAdminEndpoint
from scheduler.cmd.arguments import positive
from scheduler.conf import filter_scheduler
from scheduler.conf import opts as conf_opts
from scheduler.db.api import Database
from scheduler.process.running import settle_garbage_collector
from scheduler.service import assemble
from scheduler.simulation.host_tables import FLAVORS
from scheduler.transaction.unit_of_work import UnitOfWork

CTX = rpc.Context({})
MOVED_FLAVORS = FLAVORS[:3]  # tiny, small, medium: the source holds them in turn
SOURCE = {"memory_mb": 524_288, "local_gb": 8000, "vcpus": 128}
_exchanges = itertools.count()


def _report(host: str, size: dict[str, int], load: float = 0.0,
            instances: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """An agent's report of ``host``: a share ``load`` of it used by instances Berth does not
    know of (the rest of the fleet's), plus ``instances`` (flavors with a uuid) it holds."""
    ram = int(size["memory_mb"] * load) + sum(i["memory_mb"] for i in instances)
    disk = int(size["local_gb"] * load) + sum(i["root_gb"] + i["ephemeral_gb"] for i in instances)
    vcpus = int(size["vcpus"] * load) + sum(i["vcpus"] for i in instances)
    return {"host": host, "memory_mb": size["memory_mb"], "free_ram_mb": size["memory_mb"] - ram,
            "local_gb": size["local_gb"], "free_disk_gb": size["local_gb"] - disk,
            "vcpus": size["vcpus"], "vcpus_used": vcpus, "running_vms": len(instances),
            "instance_uuids": [i["uuid"] for i in instances]}


class Fleet:
    """A scheduler's parts on memory:// and SQLite in ``tmp``, its hosts reported, the source
    holding ``n_instances`` ACTIVE instances."""

    def __init__(self, tmp: str, n_hosts: int, n_instances: int, seed: int = 0) -> None:
        if n_hosts < 2:
            raise ValueError("a drain needs at least 2 hosts: the source and a destination")
        conf = berth_conf.new_conf()
        conf_opts.register_plugin_opts(conf)
        conf([], project="berth-bench", default_config_files=[])
        conf.set_override("state_path", os.path.join(tmp, "state"))
        conf.set_override("transport_url", "memory://")
        conf.set_override("control_exchange", f"berth-bench-moves-{os.getpid()}-{next(_exchanges)}")
        conf.set_override("connection", f"sqlite:///{tmp}/moves.sqlite", "database")
        self.conf = conf
        self.transport = rpc.get_transport(conf)
        self.database = Database.from_conf(conf)
        self.database.sync()
        self.parts = parts = assemble(conf, self.transport, self.database, random.Random(seed))
        hosts = parts.host_manager
        self.host_admin = HostAdminEndpoint(conf, self.database, hosts,
                                            functools.partial(known_host, self.database, hosts))
        rng = random.Random(seed)
        self.source = "bench-0000"
        flavors = [MOVED_FLAVORS[i % len(MOVED_FLAVORS)] for i in range(n_instances)]
        # big enough for them all, however many
        source = {"memory_mb": max(SOURCE["memory_mb"], sum(f["memory_mb"] for f in flavors)),
                  "local_gb": max(SOURCE["local_gb"], sum(f["root_gb"] + f["ephemeral_gb"] for f in flavors)),
                  "vcpus": max(SOURCE["vcpus"], sum(f["vcpus"] for f in flavors))}
        #: {host: (its size, the share of it others use)}, the source's share 0.
        self.hosts = {self.source: (source, 0.0)}
        for i in range(1, n_hosts):
            size = {"memory_mb": rng.choice([131_072, 262_144]), "local_gb": rng.choice([1000, 2000]),
                    "vcpus": rng.choice([32, 64])}
            load = 0.98 if rng.random() < 0.1 else rng.uniform(0.3, 0.8)
            self.hosts[f"bench-{i:04d}"] = (size, load)
        for host, (size, load) in self.hosts.items():
            parts.manager.report_resources(CTX, host, _report(host, size, load))
        # Every host's generation, as a scheduler that has run a while knows them (SchedulerService.start
        # learns them): else each first placement on a host counts as a conflict and is chosen again.
        parts.claims.learn()
        self.instances = self._fill_source(flavors)

    def handle(self, method, *args, **kwargs):
        """Run an RPC method as the RPC server runs one message: its own unit of work."""
        work = UnitOfWork(self.database, self.parts.outbox, self.parts.undo)
        with work, work.step(method.__name__):
            return method(*args, **kwargs)

    def _fill_source(self, flavors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        manager, instances = self.parts.manager, []
        for flavor in flavors:
            uuid = str(uuidlib.uuid4())
            self.handle(manager.run_instance, CTX, {"instance_uuids": [uuid], "num_instances": 1,
                                                    "instance_type": flavor},
                        {"force_hosts": [self.source]})
            self.handle(manager.instance_update, CTX, uuid, self.source, states.ACTIVE)
            instances.append(dict(flavor, uuid=uuid))
        manager.report_resources(CTX, self.source, _report(self.source, self.hosts[self.source][0],
                                                           instances=instances))
        on_source = self.database.list_instances(host=self.source, states=[states.ACTIVE])
        if len(on_source) != len(flavors):
            raise RuntimeError(f"{len(on_source)} of {len(flavors)} instances ACTIVE on {self.source} "
                               "before the drain")
        return instances

    def close(self) -> None:
        self.transport.cleanup()
        self.database.dispose()


def drain(fleet: Fleet, parallel: int = 1) -> dict[str, Any]:
    """Disable the source and move every instance off it, ``parallel`` moves at a time:
    {"decisions": [s], "calls": [s], "cpu": [this process's CPU s of each call],
    "seconds": the whole drain, "migrations": [rows]}."""
    parts, clock = fleet.parts, time.perf_counter
    decisions: list[float] = []
    choose = parts.move_planner.choose

    def timed_choose(*args, **kwargs):
        start = clock()
        try:
            return choose(*args, **kwargs)
        finally:
            decisions.append(clock() - start)

    parts.move_planner.choose = timed_choose  # the one MoveEndpoint calls
    calls, cpu, migrations = [], [], []
    uuids = [i["uuid"] for i in fleet.instances]
    try:
        started = clock()
        fleet.handle(fleet.host_admin.host_disable, CTX, fleet.source, "drain")
        for first in range(0, len(uuids), parallel):
            window = []
            for uuid in uuids[first:first + parallel]:
                call, call_cpu = clock(), time.process_time()
                window.append(fleet.handle(parts.moves.migrate_instance, CTX, uuid))
                calls.append(clock() - call)
                cpu.append(time.process_time() - call_cpu)
            for migration in window:
                uuid, migration_id = migration["instance_uuid"], migration["id"]
                source, dest = migration["source_host"], migration["dest_host"]
                update = parts.moves.move_update
                fleet.handle(update, CTX, uuid, dest, migration_id, "prepared", transfer={})
                fleet.handle(update, CTX, uuid, source, migration_id, "migrated")
                fleet.handle(update, CTX, uuid, dest, migration_id, "done")
            migrations.extend(window)
        seconds = clock() - started
    finally:
        del parts.move_planner.choose
    return {"decisions": decisions, "calls": calls, "cpu": cpu, "seconds": seconds, "migrations": migrations}


def check(fleet: Fleet, migrations: list[dict[str, Any]]) -> None:
    """Raise RuntimeError unless the source is empty, every instance ACTIVE on another host
    through a completed migration, and no destination over its limits (what its report
    said others use, plus the instances the database now places there, under the
    allocation ratios)."""
    db, source = fleet.database, fleet.source
    left = [i["uuid"] for i in db.list_instances(host=source) if i["state"] != states.DELETED]
    if left:
        raise RuntimeError(f"the drain left {len(left)} instance(s) on {source}: {', '.join(left[:5])}")
    wrong = [m["id"] for m in migrations if db.get_migration(m["id"])["status"] != "completed"]
    if wrong or len(migrations) != len(fleet.instances):
        raise RuntimeError(f"{len(migrations)} migrations for {len(fleet.instances)} instances; "
                           f"not completed: {wrong[:5]}")
    held: dict[str, list[dict[str, Any]]] = {}
    for instance in fleet.instances:
        row = db.get_instance(instance["uuid"])
        if row["state"] != states.ACTIVE or row["host"] == source or row["move_host"] is not None:
            raise RuntimeError(f"instance {row['uuid']} is {row['state']} on {row['host']} after the drain")
        held.setdefault(row["host"], []).append(dict(instance, uuid=row["uuid"]))
    ratios = {r: filter_scheduler.allocation_ratio(fleet.conf, r) for r in ("ram", "disk", "cpu")}
    for host, instances in held.items():
        size, load = fleet.hosts[host]
        used = _report(host, size, load, instances)
        for resource, total, free in (("ram", "memory_mb", "free_ram_mb"),
                                      ("disk", "local_gb", "free_disk_gb")):
            if size[total] - used[free] > size[total] * ratios[resource]:
                raise RuntimeError(f"{host} holds {size[total] - used[free]} of {resource} after the drain, "
                                   f"over its limit {size[total] * ratios[resource]:g}")
        if used["vcpus_used"] > size["vcpus"] * ratios["cpu"]:
            raise RuntimeError(f"{host} holds {used['vcpus_used']} vCPUs after the drain, over its limit "
                               f"{size['vcpus'] * ratios['cpu']:g}")


@contextlib.contextmanager
def _fleet(n_hosts: int, n_instances: int, seed: int) -> Iterator[Fleet]:
    tmp = tempfile.mkdtemp(prefix="berth-bench-moves-")
    fleet = None
    try:
        fleet = Fleet(tmp, n_hosts, n_instances, seed)
        yield fleet
    finally:
        if fleet is not None:
            fleet.close()
        shutil.rmtree(tmp, ignore_errors=True)


def measure(n_hosts: int = 1000, n_instances: int = 100, repeats: int = 5, parallel: int = 1,
            seed: int = 0) -> dict[str, Any]:
    """One row: ``repeats`` drains of ``n_instances`` off one host of ``n_hosts``, each on a fresh fleet."""
    decisions, calls, cpu, rates = [], [], [], []
    threshold = gc.get_threshold()
    try:
        for repeat in range(repeats):
            with _fleet(n_hosts, n_instances, seed + repeat) as fleet:
                settle_garbage_collector()  # as a scheduler process does once started
                drained = drain(fleet, parallel)
                gc.unfreeze()
                check(fleet, drained["migrations"])
            decisions += drained["decisions"]
            calls += drained["calls"]
            cpu += drained["cpu"]
            rates.append(n_instances / drained["seconds"])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    decision = quartiles([s * 1e3 for s in decisions])
    call = quartiles([s * 1e3 for s in calls])
    return {
        "bench": "moves",
        "n_hosts": n_hosts,
        "policy": "default, drain" + (f" {parallel} at a time" if parallel > 1 else " one by one"),
        "instances": n_instances,
        "repeats": repeats,
        "parallel": parallel,
        "moves": len(calls),
        "decision_ms_median": decision[1],
        "decision_ms_q1": decision[0],
        "decision_ms_q3": decision[2],
        "migrate_ms_median": call[1],
        "migrate_ms_q1": call[0],
        "migrate_ms_q3": call[2],
        # what other processes on the machine take from the calls' wall time is not in it
        "migrate_cpu_ms_median": statistics.median(cpu) * 1e3,
        "moves_per_s_median": statistics.median(rates),
        "moves_per_s_min": min(rates),
        "moves_per_s_max": max(rates),
        # the columns every row of python -m benchmarks has: the migrate_instance call
        "median_ms": call[1],
        "p99_ms": percentile(calls, 0.99) * 1e3,
    }


def describe(row: dict[str, Any]) -> str:
    """The row's figures as the table prints them."""
    return (f"{row['instances']} moves: decision {row['decision_ms_median']:.2f} ms "
            f"(IQR {row['decision_ms_q1']:.2f}-{row['decision_ms_q3']:.2f}), migrate_instance "
            f"{row['migrate_ms_median']:.2f} ms (IQR {row['migrate_ms_q1']:.2f}-{row['migrate_ms_q3']:.2f}; "
            f"CPU {row['migrate_cpu_ms_median']:.2f} ms), "
            f"{row['moves_per_s_median']:,.0f} moves/s ({row['moves_per_s_min']:,.0f}-"
            f"{row['moves_per_s_max']:,.0f}), median of {row['repeats']} drains")


def _fleet_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of hosts, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError("a drain needs at least 2 hosts: the source and a destination")
    return value


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The options of this benchmark (``prefix``ed in ``python -m benchmarks``)."""
    parser.add_argument(f"--{prefix}hosts", type=_fleet_size, default=1000,
                        help="fleet size, the drained host included (default 1000)")
    parser.add_argument(f"--{prefix}instances", type=positive, default=100,
                        help="ACTIVE instances on the drained host (default 100)")
    parser.add_argument(f"--{prefix}repeats", type=positive, default=5,
                        help="drains, each of a fresh fleet (default 5)")
    parser.add_argument(f"--{prefix}parallel", type=positive, default=1,
                        help="moves started before their ends come back, as berth host drain "
                        "--max-parallel (default 1: one after the other)")


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.moves", __doc__)
    add_arguments(parser)
    command_line.add_json(parser)
    args = parser.parse_args(argv)
    command_line.print_rows([measure(args.hosts, args.instances, args.repeats, args.parallel)], args.json,
                            lambda row: f"{row['n_hosts']:,} hosts, {row['policy']}: {describe(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
