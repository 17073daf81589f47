"""Keeping the database bounded: bursts of bad requests, as in the fuzz test, leave
ERROR rows (refused requests, and requests that fit on no host, some of them members
of a server group) among a few valid ones, which are deleted once built (DELETED rows);
``berth-manage db purge --before <now>``, run while the scheduler runs, takes the
instances table back to its live rows, and to the same ones again after the next burst;
after a third, ``db archive`` moves them to the shadow tables and ``db purge`` empties those."""

import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime

import sqlalchemy as sa

from berth_contract import flavors
from scheduler.cmd.instance_commands import build_request
from scheduler.db.models import (
    instances,
    server_group_members,
    shadow_instances,
    shadow_server_group_members,
)
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

AGENT = "purge-a"
BURST = 300  # bad requests per round, one instance each
VALID_EVERY = 100  # and one valid request (one instance, deleted once ACTIVE) per this many bad ones
ROUNDS = (("purge",), ("purge",), ("archive", "purge"))  # the berth-manage db commands after each burst
FITS_NOWHERE = {"memory_mb": 4_000_000, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}


def _bad_request(i, group):
    """(request_spec, filter_properties) of a request that leaves an ERROR row."""
    kind = i % 4
    if kind in (0, 1):  # valid, placed nowhere; half of them in the group
        hints = {"group": group} if kind == 1 else {}
        return build_request(FITS_NOWHERE, 1, hints=hints)
    u = str(uuid.uuid4())
    flavor = {"memory_mb": -1, "root_gb": 1, "vcpus": 1} if kind == 2 else \
        {"memory_mb": 512, "root_gb": 1, "vcpus": 2**40}
    return {"instance_uuids": [u], "num_instances": 1, "instance_type": flavor}, {}


def _table(engine, table=instances, members_table=server_group_members):
    with engine.connect() as connection:
        rows = {u: s for u, s in connection.execute(sa.select(table.c.uuid, table.c.state))}
        members = sorted(connection.scalars(sa.select(members_table.c.instance_uuid)))
    return rows, members


def _manage(fleet, action, before):
    """({table: rows} printed, the heading line, seconds) of a berth-manage db ``action``."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cmd.manage", "--config-file", str(fleet.conf_file),
         "db", action, "--before", before],
        capture_output=True, text=True, timeout=300, cwd=fleet.tmp,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    counts = {line.split()[0]: int(line.split()[1]) for line in lines[2:]}
    return counts, lines[0], took


def test_purge_keeps_the_instances_table_to_its_live_rows(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        engine = sa.create_engine(url)
        try:
            _run(fleet, engine)
        finally:
            engine.dispose()
            fleet.close()


def _run(fleet, engine):
    fleet.start_schedulers(["sched-1"])
    fleet.start_agent(AGENT, fake_memory_mb=16384, fake_local_gb=100, fake_vcpus=16)
    fleet.wait_hosts_up([AGENT])
    group = fleet.client.admin_call({}, "create_server_group", name="purge-web", policy="affinity")["uuid"]

    # Live rows: two ACTIVE members of the group, and one more deleted (DELETED, a member still).
    spec, props = build_request(flavors.get("m1.tiny"), 3, hints={"group": group})
    live = spec["instance_uuids"][:2]
    fleet.client.run_instance({}, spec, props)
    fleet.wait_states(spec["instance_uuids"], ("ACTIVE",))
    fleet.client.delete_instance({}, spec["instance_uuids"][2])
    fleet.wait_states(spec["instance_uuids"][2:], ("DELETED",))

    for round_, actions in enumerate(ROUNDS, 1):
        failed, valid = [], []
        for i in range(BURST):
            if i % VALID_EVERY == 0:
                valid += fleet.boot()
            spec, props = _bad_request(i, group)
            fleet.client.run_instance({}, spec, props)
            failed += spec["instance_uuids"]
        fleet.wait_states(valid, ("ACTIVE",))
        for u in valid:
            fleet.client.delete_instance({}, u)
        fleet.wait_states(failed, ("ERROR",))
        fleet.wait_states(valid, ("DELETED",))

        rows, members = _table(engine)
        deleted = [u for u, state in rows.items() if state == "DELETED"]
        gone = set(failed) | set(deleted)
        gone_members = [m for m in members if m in gone]
        assert set(rows) == set(live) | gone
        print(f"\nround {round_}: instances table {len(rows)} rows ({len(rows) - len(gone)} live, "
              f"{len(failed)} ERROR, {len(deleted)} DELETED), server_group_members {len(members)} rows")
        before = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for action in actions:
            counts, heading, took = _manage(fleet, action, before)
            after, members_after = _table(engine)
            shadow, shadow_members = _table(engine, shadow_instances, shadow_server_group_members)
            print(f"round {round_}: berth-manage db {action} --before {before} took {took:.2f} s (process "
                  f"start-up included), printed {counts}; after it: instances {len(after)} rows, "
                  f"server_group_members {len(members_after)}, shadow_instances {len(shadow)}, "
                  f"shadow_server_group_members {len(shadow_members)}")

            assert sorted(after) == sorted(live)
            assert set(after.values()) == {"ACTIVE"}
            assert members_after == sorted(m for m in members if m not in gone)
            if action == "archive":
                assert heading.startswith("Archived: instances DELETED, or in ERROR on no host, before ")
                assert counts == {"instances": len(gone), "server_group_members": len(gone_members)}
                assert shadow == {u: rows[u] for u in gone} and shadow_members == gone_members
            else:
                assert heading.startswith("Purged: instances DELETED, or in ERROR on no host, before ")
                moved = "archive" in actions
                assert counts == {
                    "instances": 0 if moved else len(gone),
                    "server_group_members": 0 if moved else len(gone_members),
                    "shadow_instances": len(gone) if moved else 0,
                    "shadow_server_group_members": len(gone_members) if moved else 0,
                }
                assert shadow == {} and shadow_members == []
            assert set(fleet.instances()) == set(live)  # as the scheduler lists them
            fleet.check_alive()
