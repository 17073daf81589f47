"""What one sync of the scaling-group controller costs: 10,000 groups of 10 members.

The groups, their members (ACTIVE, each on a host) and a history as long as their
stabilization windows are written straight into a fresh database (SQLite in a file, and
PostgreSQL when one is reachable), as if the controller had been syncing them for a while.
Every member reports a steady load at its group's target, so most groups keep their
count; a share of them (10% by default) has no scale-down window and a load that swings.
Two scenarios: "steady" (the headline), where the swinging groups' load goes 15% over
their target every other sync, so that each of those scales up by 2 members in one sync
and back down in the next; and "harsh", 80% over, up by 8 members and back down.

Each run is one ``ScalingController.sync_once`` over every group, one lease period after
the one before, reading the members' samples from ``instance_metrics`` as a scheduler's
controller does (``FleetMetrics``); between runs, and outside the figures, the casts take
effect as the scheduler and the agents would make them (new members ACTIVE, deleted ones
DELETED) and the members' samples are written again, as the agents' reports would. The
figure is the CPU time of this process (``time.process_time``) during the sync, with its
wall time beside: the database server's own CPU is not in it (for PostgreSQL it is shown
apart, read from /proc when it can be).

Run alone: ``python -m benchmarks.scaling_sync [--groups N] [--runs R] [--backends ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from benchmarks import command_line
from scheduler import states
from scheduler.cmd.arguments import positive
from scheduler.db import api as db_api
from scheduler.db.models import instance_metrics, instances, scaling_group_recommendations, scaling_groups
from scheduler.process.running import settle_garbage_collector
from scheduler.scaling import members as group_members
from scheduler.scaling.controller import FAILED, LOST, ControllerSettings, ScalingController
from scheduler.scaling.service import FleetMetrics

PG_ADMIN_DSN = os.environ.get("BERTH_BENCH_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
PG_URL = os.environ.get("BERTH_BENCH_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/{db}")
BACKENDS = ("sqlite", "postgresql")

T0 = datetime(2026, 12, 1, 12, 0, 0)
PERIOD_S = 15.0
TARGET = 50  # cpu utilization, percent of the members' vCPUs
STEADY = {"min": 1, "max": 20, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": TARGET}]}
# No scale-down window: the swinging groups go back down one sync after they went up.
SWINGING = dict(STEADY, behavior={"scale_down": {"stabilization_window_s": 0}})
TEMPLATE = {"flavor_name": "m1.small", "scheduler_hints": {}, "availability_zone": "az1",
            "server_group_uuid": None}
HISTORY_S = 300  # the default scale-down window: the steady groups' history is this long
#: The swinging groups' load, as a share of their target, every other sync: by default
#: 1.15 (10 members go to 12 and back: the steady case), 1.8 in the harsh one (10 to 18).
HIGH = 1.15
HARSH_HIGH = 1.8
INSERT_CHUNK = 5000
METRIC_MAX_AGE_S = 60.0  # [scaling] metric_max_age's default


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class _Casts:
    """The scheduler's side: records the builds and deletes cast, applied between runs."""

    def __init__(self) -> None:
        self.builds: list[str] = []
        self.deletes: list[str] = []

    def run_instance(self, request_spec: dict[str, Any], filter_properties: dict[str, Any]) -> None:
        self.builds.extend(request_spec["instance_uuids"])

    def delete_instance(self, uuid: str) -> None:
        self.deletes.append(uuid)


class _Fleet:
    """The groups as the benchmark built them: members, loads and samples."""

    def __init__(self, n_groups: int, members: int, share: float, seed: int, high: float = HIGH) -> None:
        self.high = high
        rng = random.Random(seed)
        self.uuids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n_groups)]
        swinging = set(rng.sample(range(n_groups), round(n_groups * share)))
        self.swinging = {self.uuids[i] for i in swinging}
        self.members_per_group = members
        self.members: dict[str, list[str]] = {}  # group uuid -> live member uuids
        self.rng = rng

    def load(self, group: str, run: int) -> float:
        """The group's total vCPUs used at ``run``: its target at its starting size, or
        ``high`` times that every other run for the swinging groups."""
        steady = self.members_per_group * TARGET / 100
        return steady * self.high if group in self.swinging and run % 2 == 0 else steady

    def store_samples(self, database: db_api.Database, run: int, at: datetime) -> None:
        """Every live member's cpu sample at ``run``, as the agents' reports leave them."""
        rows = [{"instance_uuid": member, "name": "cpu", "value": self.load(group, run) / len(uuids),
                 "sampled_at": at, "source": "agent"}
                for group, uuids in self.members.items() for member in uuids]
        with database.engine.begin() as connection:
            connection.execute(sa.delete(instance_metrics))
            for start in range(0, len(rows), INSERT_CHUNK):
                connection.execute(instance_metrics.insert(), rows[start:start + INSERT_CHUNK])


def _populate(database: db_api.Database, fleet: _Fleet) -> None:
    """Groups already synced for a while, their members ACTIVE, their recent history."""
    long_ago = T0 - timedelta(days=1)
    groups, members, history = [], [], []
    flavors = {flavor["name"]: flavor for flavor in database.list_flavors()}
    for number, group_uuid in enumerate(fleet.uuids):
        name = f"group-{number:05d}"
        group = {"uuid": group_uuid, "name": name, "project_id": "bench", "template": TEMPLATE}
        groups.append(dict(group, spec=SWINGING if group_uuid in fleet.swinging else STEADY, paused=False,
                           desired=fleet.members_per_group, status=None,
                           last_synced_at=T0 - timedelta(seconds=PERIOD_S), replace_failures=0, version=0,
                           created_at=long_ago, updated_at=long_ago))
        uuids = []
        for index in range(fleet.members_per_group):
            member_uuid = str(uuid.UUID(int=fleet.rng.getrandbits(128), version=4))
            row = group_members.member_row(group, member_uuid, f"{name}-{index + 1}", flavors)
            row.update(project_id="bench", host=f"host-{(number * 7 + index) % 2000:04d}",
                       state=states.ACTIVE, scaling_group_uuid=group_uuid,
                       created_at=long_ago + timedelta(microseconds=index),
                       updated_at=long_ago, scheduled_at=long_ago, launched_at=long_ago)
            members.append(row)
            uuids.append(member_uuid)
        fleet.members[group_uuid] = uuids
        kept = PERIOD_S if group_uuid in fleet.swinging else HISTORY_S + PERIOD_S
        history.extend({"group_uuid": group_uuid, "recorded_at": T0 - timedelta(seconds=age),
                        "replicas": fleet.members_per_group}
                       for age in range(int(PERIOD_S), int(kept + PERIOD_S), int(PERIOD_S)))
    with database.engine.begin() as connection:
        for start in range(0, len(groups), INSERT_CHUNK):
            connection.execute(scaling_groups.insert(), groups[start:start + INSERT_CHUNK])
        for start in range(0, len(members), INSERT_CHUNK):
            connection.execute(instances.insert(), members[start:start + INSERT_CHUNK])
        ids = dict(connection.execute(sa.select(scaling_groups.c.uuid, scaling_groups.c.id)).all())
        rows = [{"group_id": ids[r["group_uuid"]], "recorded_at": r["recorded_at"], "replicas": r["replicas"]}
                for r in history]
        for start in range(0, len(rows), INSERT_CHUNK):
            connection.execute(scaling_group_recommendations.insert(), rows[start:start + INSERT_CHUNK])
    fleet.store_samples(database, 0, T0 - timedelta(seconds=PERIOD_S))
    if database.engine.dialect.name == "postgresql":
        with database.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def _apply_casts(database: db_api.Database, fleet: _Fleet, casts: _Casts, at: datetime) -> None:
    """What the scheduler and the agents make of the casts: builds ACTIVE, deletes DELETED."""
    built, deleted = casts.builds, set(casts.deletes)
    with database.engine.begin() as connection:
        for start in range(0, len(built), INSERT_CHUNK):
            chunk = built[start:start + INSERT_CHUNK]
            connection.execute(sa.update(instances).where(instances.c.uuid.in_(chunk))
                               .values(state=states.ACTIVE, host="host-new", scheduled_at=at,
                                       launched_at=at - timedelta(days=1), updated_at=at))
        gone = sorted(deleted)
        for start in range(0, len(gone), INSERT_CHUNK):
            chunk = gone[start:start + INSERT_CHUNK]
            connection.execute(sa.update(instances).where(instances.c.uuid.in_(chunk))
                               .values(state=states.DELETED, deleted_at=at, updated_at=at))
        if built:
            rows = connection.execute(sa.select(instances.c.uuid, instances.c.scaling_group_uuid).where(
                instances.c.uuid.in_(built))).all()
            for member, group in rows:
                fleet.members[group].append(member)
    for group, uuids in fleet.members.items():
        fleet.members[group] = [u for u in uuids if u not in deleted]
    casts.builds.clear()
    casts.deletes.clear()


def _server_cpu_s() -> float | None:
    """CPU seconds of every process named postgres on this machine, None if unreadable."""
    total, tick, found = 0, os.sysconf("SC_CLK_TCK"), False
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        if name not in ("postgres", "postmaster"):
            continue
        fields = text[text.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
        found = True
    return total / tick if found else None


@contextlib.contextmanager
def _database_url(backend: str, tmp: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp}/scaling-bench.sqlite"
        return
    from tests.fixtures import temporary_database  # the test extra, as the e2e benchmark

    with temporary_database(PG_ADMIN_DSN, PG_URL, prefix="berth_bench", connect_timeout=3) as url:
        yield url


def measure(backend: str = "sqlite", n_groups: int = 10_000, members: int = 10, runs: int = 5,
            share: float = 0.1, max_groups: int | None = None, seed: int = 0,
            high: float = HIGH) -> dict[str, Any]:
    """One row: the CPU and wall time of ``runs`` syncs of ``n_groups`` groups of ``members``
    on ``backend``, after one sync not counted (imports, caches, the first claim).
    ``max_groups``: the controller's setting (None: its default). Raises RuntimeError when a
    sync leaves groups out or fails any."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    tmp = tempfile.mkdtemp(prefix="berth-scaling-bench-")
    try:
        with _database_url(backend, tmp) as url:
            return _measure(url, backend, n_groups, members, runs, share, max_groups, seed, high)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(url: str, backend: str, n_groups: int, members: int, runs: int, share: float,
             max_groups: int | None, seed: int, high: float = HIGH) -> dict[str, Any]:
    clock = _Clock()
    database = db_api.Database(url, max_retries=2, retry_interval=0.1)
    database.now = clock  # type: ignore[method-assign]
    threshold = gc.get_threshold()
    try:
        database.sync()
        fleet = _Fleet(n_groups, members, share, seed, high)
        built = time.perf_counter()
        _populate(database, fleet)
        setup_s = time.perf_counter() - built
        settings = ControllerSettings("bench", period_s=PERIOD_S)
        if max_groups is not None:
            settings = ControllerSettings("bench", period_s=PERIOD_S, max_groups=max_groups)
        settle_garbage_collector()  # as the scheduler process the controller runs in does once started
        figures = _syncs(database, clock, fleet, settings, backend, n_groups, runs)
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
        database.dispose()
    cpu, wall, server, changed = figures
    return {
        "bench": "scaling",
        "n_hosts": None,
        "policy": f"sync, {backend}",
        "backend": backend,
        "groups": n_groups,
        "members_per_group": members,
        "groups_scaling_per_sync": statistics.median(changed) if changed else 0,
        "runs": len(cpu),
        "cpu_s_median": statistics.median(cpu),
        "cpu_s_min": min(cpu),
        "cpu_s_max": max(cpu),
        "wall_s_median": statistics.median(wall),
        "wall_s_min": min(wall),
        "wall_s_max": max(wall),
        "db_server_cpu_included": backend == "sqlite",
        "db_server_cpu_s_median": statistics.median(server) if server else None,
        "setup_s": setup_s,
        "median_ms": statistics.median(cpu) * 1e3,
        "p99_ms": None,
    }


def _syncs(database: db_api.Database, clock: _Clock, fleet: _Fleet, settings: ControllerSettings,
           backend: str, n_groups: int, runs: int) -> tuple[list[float], list[float], list[float], list[int]]:
    """``runs`` syncs measured after one that is not: (CPU s, wall s, server CPU s, groups
    that scaled) of each."""
    casts = _Casts()
    samples = FleetMetrics(database, None, METRIC_MAX_AGE_S, clock)  # type: ignore[arg-type]  # no external
    controller = ScalingController(settings, database, casts.run_instance, casts.delete_instance,
                                   samples, clock)
    cpu: list[float] = []
    wall: list[float] = []
    server: list[float] = []
    changed: list[int] = []
    for run in range(runs + 1):
        clock.now = T0 + timedelta(seconds=PERIOD_S * run)
        fleet.store_samples(database, run, clock.now - timedelta(seconds=PERIOD_S / 3))
        server_before = _server_cpu_s() if backend == "postgresql" else None
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        results = controller.sync_once(clock.now)
        cpu_s, wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
        server_after = _server_cpu_s() if server_before is not None else None
        _check(results, n_groups, run)
        if run:  # the first sync warms up: not counted
            cpu.append(cpu_s)
            wall.append(wall_s)
            changed.append(sum(1 for r in results if r.created or r.deleted))
            if server_before is not None and server_after is not None:
                server.append(server_after - server_before)
        _apply_casts(database, fleet, casts, clock.now + timedelta(seconds=PERIOD_S / 2))
    return cpu, wall, server, changed


def _check(results: list[Any], n_groups: int, run: int) -> None:
    if len(results) != n_groups:
        raise RuntimeError(f"sync {run} synced {len(results)} of {n_groups} groups (max_groups too low?)")
    bad = [r for r in results if r.outcome in (FAILED, LOST)]
    if bad:
        raise RuntimeError(f"sync {run}: {len(bad)} group(s) {bad[0].outcome}, e.g. {bad[0].error}")


#: scenario: (the swinging groups' load as a share of their target, what it is).
SCENARIOS = {
    "steady": (HIGH, "the swinging groups' load 15% over target every other sync, "
                     "10 members to 12 and back"),
    "harsh": (HARSH_HIGH, "the swinging groups' load 80% over target every other sync, "
                          "10 members to 18 and back"),
}


def rows(backends: list[str], n_groups: int, members: int, runs: int, share: float,
         scenarios: Sequence[str] = ("steady",)) -> Iterator[dict[str, Any]]:
    """One row per backend and scenario; PostgreSQL is left out, with a line on stderr,
    when unreachable."""
    for backend in backends:
        for scenario in scenarios:
            high, _ = SCENARIOS[scenario]
            try:
                row = measure(backend, n_groups, members, runs, share, high=high)
            except AssertionError as exc:  # temporary_database: the server is not reachable
                print(f"scaling sync on {backend}: skipped ({exc})", file=sys.stderr)
                break
            row["scenario"] = scenario
            yield row


def describe(row: dict[str, Any]) -> str:
    """The row's figures as the table prints them."""
    server = row.get("db_server_cpu_s_median")
    if row["db_server_cpu_included"]:
        outside = " (SQLite runs in this process: its work is included)"
    elif server is not None:
        outside = f"; the database server's own CPU is not included ({server:.2f} s beside)"
    else:
        outside = "; the database server's own CPU is not included"
    return (f"{row['groups']:,} groups x {row['members_per_group']}: CPU {row['cpu_s_median']:.2f} s "
            f"({row['cpu_s_min']:.2f}-{row['cpu_s_max']:.2f}), wall {row['wall_s_median']:.2f} s "
            f"({row['wall_s_min']:.2f}-{row['wall_s_max']:.2f}), median of {row['runs']}{outside}")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a share between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share between 0 and 1, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The options of this benchmark (``prefix``ed in ``python -m benchmarks``)."""
    parser.add_argument(f"--{prefix}groups", type=positive, default=10_000,
                        help="scaling groups synced (default 10000)")
    parser.add_argument(f"--{prefix}members", type=positive, default=10,
                        help="ACTIVE members per group (default 10)")
    parser.add_argument(f"--{prefix}runs", type=positive, default=5,
                        help="syncs measured, after one not counted (default 5)")
    parser.add_argument(f"--{prefix}share", type=_share, default=0.1,
                        help="share of the groups whose load swings, scaling every sync (default 0.1)")
    parser.add_argument(f"--{prefix}backends", type=command_line.names("backends", BACKENDS),
                        default=list(BACKENDS),
                        help="comma-separated, of sqlite,postgresql (PostgreSQL is skipped when "
                        "not reachable; default both)")


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser("python -m benchmarks.scaling_sync", __doc__)
    add_arguments(parser)
    parser.add_argument("--scenarios", type=command_line.names("scenarios", SCENARIOS),
                        default=list(SCENARIOS),
                        help="comma-separated, of " + "; ".join(  # argparse formats help with %
                            f"{name} ({what.replace('%', '%%')})" for name, (_, what) in SCENARIOS.items())
                        + " (default both)")
    command_line.add_json(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    swinging = f"{args.share:.0%} of the groups:"

    def text(row: dict[str, Any]) -> str:
        what = SCENARIOS[row["scenario"]][1].replace("the swinging groups'", swinging)
        return f"scaling sync, {row['backend']}, {row['scenario']} ({what}): {describe(row)}"

    command_line.print_rows(rows(args.backends, args.groups, args.members, args.runs, args.share,
                                 args.scenarios), args.json, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
