"""berth-manage db archive / db purge: which rows go, which stay, what is printed (SQLite)."""

import uuid as uuidlib
from datetime import timedelta

import pytest
import sqlalchemy as sa

from scheduler import states
from scheduler.cmd import manage
from scheduler.db import archive
from scheduler.db.models import (
    instances,
    server_group_members,
    shadow_instances,
    shadow_server_group_members,
)
from tests.unit.db.test_db_api import _instance

GROUP = "6f0c5cf4-0a47-4a4e-9a53-6c1b1d5f0001"


@pytest.fixture
def now(database):
    return database.now()


@pytest.fixture
def seeded(database, now):
    """Instances of every kind, 60 days old unless said otherwise; each a member of GROUP."""
    old, recent = now - timedelta(days=60), now - timedelta(hours=1)
    times = {"created_at": old, "updated_at": old}
    database.create_instances([
        _instance("deleted-old", state=states.DELETED, host="h1", deleted_at=old, **times),
        _instance("error-old", state=states.ERROR, fault_reason="No valid host was found", **times),
        _instance("active-old", state=states.ACTIVE, host="h1", **times),
        _instance("error-on-host-old", state=states.ERROR, host="h1", fault_reason="Build failed", **times),
        _instance("deleting-old", state=states.DELETING, host="h1", **times),
        _instance("deleted-recent", state=states.DELETED, host="h1", deleted_at=recent, **times),
        _instance("error-recent", state=states.SCHEDULING, **times),
    ])
    # Created long ago, failed just now: its age is its last change.
    database.update_instances([("error-recent", {"state": states.ERROR, "fault_reason": "No valid host"})])
    database.create_server_group(GROUP, "web", "anti-affinity")
    database.add_server_group_members(GROUP, [
        "deleted-old", "error-old", "active-old", "error-on-host-old", "deleting-old", "deleted-recent",
        "error-recent"])
    return now - timedelta(days=30)


STAYING = ["active-old", "deleted-recent", "deleting-old", "error-on-host-old", "error-recent"]
GOING = ["deleted-old", "error-old"]


def _uuids(database, table):
    with database.engine.connect() as connection:
        return sorted(connection.scalars(sa.select(table.c.uuid)))


def _members(database, table):
    with database.engine.connect() as connection:
        return sorted(connection.scalars(sa.select(table.c.instance_uuid)))


def _rows(database, table):
    with database.engine.connect() as connection:
        return {row["uuid"]: dict(row) for row in connection.execute(sa.select(table)).mappings()}


def _everything(database):
    return {table.name: _rows(database, table) if "uuid" in table.c else _members(database, table)
            for table in (instances, server_group_members, shadow_instances, shadow_server_group_members)}


# -- scheduler.db.archive --------------------------------------------------------


def test_archive_moves_old_deleted_and_failed_instances_with_their_memberships(database, seeded):
    before = _rows(database, instances)
    counts, left = archive.archive(database, seeded)
    assert counts == {"instances": 2, "server_group_members": 2}
    assert left is False
    assert _uuids(database, instances) == STAYING
    assert _members(database, server_group_members) == STAYING
    assert _uuids(database, shadow_instances) == GOING
    assert _members(database, shadow_server_group_members) == GOING
    # Moved as they were: the fault with the row, the same id.
    assert _rows(database, shadow_instances) == {u: before[u] for u in GOING}
    assert _rows(database, shadow_instances)["error-old"]["fault_reason"] == "No valid host was found"

    assert archive.archive(database, seeded) == ({"instances": 0, "server_group_members": 0}, False)


def test_purge_deletes_them_for_good(database, seeded):
    counts = archive.purge(database, seeded)
    assert counts == {"instances": 2, "server_group_members": 2, "shadow_instances": 0,
                      "shadow_server_group_members": 0}
    assert _uuids(database, instances) == STAYING
    assert _members(database, server_group_members) == STAYING
    assert _uuids(database, shadow_instances) == []
    assert database.get_server_group(GROUP)["members"] == [
        "active-old", "error-on-host-old", "deleting-old", "deleted-recent", "error-recent"]


def test_dry_runs_count_and_change_nothing(database, seeded):
    before = _everything(database)
    assert archive.archive(database, seeded, dry_run=True) == (
        {"instances": 2, "server_group_members": 2}, False)
    assert archive.purge(database, seeded, dry_run=True) == {
        "instances": 2, "server_group_members": 2, "shadow_instances": 0, "shadow_server_group_members": 0}
    assert _everything(database) == before


def test_archive_then_purge_empties_the_shadow_rows(database, seeded, now):
    archive.archive(database, seeded)
    assert archive.purge(database, seeded, dry_run=True)["shadow_instances"] == 2
    # Archived rows younger than the purge's DATE stay archived.
    assert archive.purge(database, now - timedelta(days=90)) == dict.fromkeys(
        ["instances", "server_group_members", "shadow_instances", "shadow_server_group_members"], 0)
    assert _uuids(database, shadow_instances) == GOING
    assert archive.purge(database, seeded) == {
        "instances": 0, "server_group_members": 0, "shadow_instances": 2, "shadow_server_group_members": 2}
    assert _uuids(database, shadow_instances) == []
    assert _members(database, shadow_server_group_members) == []
    assert _uuids(database, instances) == STAYING
    assert _members(database, server_group_members) == STAYING


def test_max_rows_moves_that_many_instances_and_says_more_remain(database, seeded):
    counts, left = archive.archive(database, seeded, max_rows=1)
    assert counts == {"instances": 1, "server_group_members": 1} and left is True
    assert archive.archive(database, seeded, max_rows=1, dry_run=True) == (
        {"instances": 1, "server_group_members": 1}, False)
    counts, left = archive.archive(database, seeded, max_rows=1)
    assert counts == {"instances": 1, "server_group_members": 1} and left is False
    assert _uuids(database, shadow_instances) == GOING


def test_many_batches(database, now, monkeypatch):
    monkeypatch.setattr(archive, "BATCH", 7)
    old = now - timedelta(days=2)
    uuids = [str(uuidlib.UUID(int=i)) for i in range(40)]
    failed = [_instance(u, state=states.ERROR, created_at=old, updated_at=old) for u in uuids]
    database.create_instances(failed + [_instance("live", state=states.ACTIVE, host="h1", created_at=old)])
    database.create_server_group(GROUP, "web", "affinity")
    database.add_server_group_members(GROUP, uuids[::2] + ["live"])
    assert archive.archive(database, now - timedelta(days=1), max_rows=30) == (
        {"instances": 30, "server_group_members": 15}, True)
    assert archive.purge(database, now - timedelta(days=1)) == {
        "instances": 10, "server_group_members": 5, "shadow_instances": 30, "shadow_server_group_members": 15}
    assert _uuids(database, instances) == ["live"]
    assert _members(database, server_group_members) == ["live"]


@pytest.mark.parametrize("operation", [archive.archive, archive.purge])
def test_an_instance_changed_after_the_select_stays(database, seeded, monkeypatch, operation):
    """The operator deletes the failed instance (now DELETING) while the batch is being read."""
    select = archive._next

    def select_then_scheduler_acts(connection, table, condition, after, limit):
        found = select(connection, table, condition, after, limit)
        if table is instances:
            connection.execute(sa.update(instances).where(instances.c.uuid == "error-old")
                               .values(state=states.DELETING, host="h1"))
        return found

    monkeypatch.setattr(archive, "_next", select_then_scheduler_acts)
    counts = operation(database, seeded)
    counts = counts[0] if isinstance(counts, tuple) else counts
    assert counts["instances"] == 1 and counts["server_group_members"] == 1
    assert database.get_instance("error-old")["state"] == states.DELETING
    assert "error-old" in _members(database, server_group_members)
    assert "error-old" not in _uuids(database, shadow_instances)
    assert "error-old" not in _members(database, shadow_server_group_members)


def test_an_id_the_shadow_table_holds_already_gets_another(database, now):
    """SQLite gives the id of a deleted last row to the next one: both archived rows are kept."""
    old = now - timedelta(days=2)
    database.create_instances([_instance("first", state=states.DELETED, created_at=old, deleted_at=old)])
    archive.archive(database, now - timedelta(days=1))
    database.create_instances([_instance("second", state=states.DELETED, created_at=old, deleted_at=old)])
    assert _rows(database, instances)["second"]["id"] == _rows(database, shadow_instances)["first"]["id"]
    assert archive.archive(database, now - timedelta(days=1))[0]["instances"] == 1
    shadow = _rows(database, shadow_instances)
    assert sorted(shadow) == ["first", "second"]
    assert shadow["first"]["id"] != shadow["second"]["id"]


# -- berth-manage db archive / db purge --------------------------------------------


@pytest.fixture
def config_file(tmp_path, db_url):
    path = tmp_path / "berth.conf"
    path.write_text(f"[DEFAULT]\nstate_path = {tmp_path / 'state'}\n"
                    f"[database]\nconnection = {db_url}\nmax_retries = 0\nretry_interval = 0\n")
    return str(path)


def _manage(config_file, *args):
    return manage.main(["--config-file", config_file, "db", *args])


def _table(out):
    """{table: rows} of a printed count table, and the line above it."""
    lines = out.strip().splitlines()
    assert lines[1].split() == ["TABLE", "ROWS"], out
    return lines[0], {line.split()[0]: int(line.split()[1]) for line in lines[2:] if line[:1].islower()}


def test_archive_command_prints_the_rows_per_table(database, seeded, config_file, capsys):
    assert _manage(config_file, "archive", "--before", "30d", "--dry-run") == 0
    heading, counts = _table(capsys.readouterr().out)
    assert heading.startswith("Dry run, nothing changed; would be archived: instances DELETED, or in ERROR "
                              "on no host, before ")
    assert counts == {"instances": 2, "server_group_members": 2}
    assert _uuids(database, shadow_instances) == []

    assert _manage(config_file, "archive", "--before", "30d") == 0
    heading, counts = _table(capsys.readouterr().out)
    assert heading.startswith("Archived: instances DELETED, or in ERROR on no host, before ")
    assert counts == {"instances": 2, "server_group_members": 2}
    assert _uuids(database, shadow_instances) == GOING


def test_archive_command_exits_3_while_more_remain(database, seeded, config_file, capsys):
    assert _manage(config_file, "archive", "--before", "720h", "--max-rows", "1") == 3
    out = capsys.readouterr().out
    assert _table(out)[1]["instances"] == 1
    assert "--max-rows 1 reached; more rows before " in out and "run it again" in out
    assert _manage(config_file, "archive", "--before", "720h", "--max-rows", "1") == 0
    assert _table(capsys.readouterr().out)[1]["instances"] == 1
    assert _manage(config_file, "archive", "--before", "720h", "--max-rows", "1") == 0
    assert _table(capsys.readouterr().out)[1]["instances"] == 0


def test_purge_command_purges_live_and_archived_rows(database, seeded, config_file, capsys, now):
    assert _manage(config_file, "archive", "--before", "30d", "--max-rows", "1") == 3
    capsys.readouterr()
    cutoff = (now - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert _manage(config_file, "purge", "--before", cutoff) == 0
    heading, counts = _table(capsys.readouterr().out)
    assert heading == f"Purged: instances DELETED, or in ERROR on no host, before {cutoff}"
    assert counts == {"instances": 1, "server_group_members": 1, "shadow_instances": 1,
                      "shadow_server_group_members": 1}
    assert _uuids(database, instances) == STAYING
    assert _uuids(database, shadow_instances) == []


@pytest.mark.parametrize("date", ["yesterday", "2026-13-01", "30", "30 days", "-5d", "1.5d", "", "01/11/2026",
                                  "now"])
def test_a_bad_date_is_refused_and_nothing_changes(database, seeded, config_file, capsys, date):
    before = _everything(database)
    for action in ("archive", "purge"):
        assert _manage(config_file, action, f"--before={date}") == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.splitlines() == [
            f"berth-manage: --before {date!r} is not a date: give an ISO 8601 date or date-time (2026-11-01, "
            "2026-11-01T12:00:00, 2026-11-01T12:00:00Z, 2026-11-01T12:00:00+02:00; UTC unless it has an "
            "offset) or an age in days or hours (30d, 12h)"]
    assert _everything(database) == before


def test_a_date_in_the_future_is_refused(database, seeded, config_file, capsys, now):
    before = _everything(database)
    tomorrow = (now + timedelta(days=1)).strftime("%Y-%m-%d")
    assert _manage(config_file, "purge", "--before", tomorrow) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"berth-manage: --before {tomorrow}T00:00:00Z is in the future")
    assert "it would purge even the rows made a moment ago" in err[0]
    assert _everything(database) == before


@pytest.mark.parametrize("date, going", [
    ("2000-01-01", []),
    ("2000-01-01T00:00:00+02:00", []),
    ("59d", GOING),  # 60 days old
    ("61d", []),
    ("1h", GOING + ["deleted-recent"]),  # an hour old, a moment before the command reads the clock
])
def test_accepted_dates(database, seeded, config_file, capsys, date, going):
    assert _manage(config_file, "purge", "--before", date) == 0
    assert _table(capsys.readouterr().out)[1]["instances"] == len(going)
    assert _uuids(database, instances) == sorted(set(GOING + STAYING) - set(going))


def test_an_offset_is_converted_to_utc(database, now, config_file, capsys):
    database.create_instances([_instance("gone", state=states.DELETED, deleted_at=now - timedelta(hours=3))])
    in_paris = (now - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S") + "+01:00"  # 3h ago in UTC
    assert _manage(config_file, "purge", "--before", in_paris) == 0
    assert _table(capsys.readouterr().out)[1]["instances"] == 0
    in_tokyo = (now + timedelta(hours=7)).strftime("%Y-%m-%dT%H:%M:%S") + "+09:00"  # 2h ago in UTC
    assert _manage(config_file, "purge", "--before", in_tokyo) == 0
    assert _table(capsys.readouterr().out)[1]["instances"] == 1


def test_an_age_beyond_the_calendar_is_refused(database, seeded, config_file, capsys):
    before = _everything(database)
    assert _manage(config_file, "purge", "--before", "900000d") == 1
    assert capsys.readouterr().err.splitlines() == [
        "berth-manage: --before: 900000 days ago is before the year 1"]
    assert _manage(config_file, "purge", "--before", f"{10**12}d") == 1
    assert "is not a date" in capsys.readouterr().err
    assert _everything(database) == before


def test_a_schema_not_synced_is_refused(config_file, capsys):
    assert _manage(config_file, "purge", "--before", "30d") == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"berth-manage: the database schema is at revision none, not {manage.schema.head()}: "
                   "run 'berth-manage db sync' first"]


def test_before_is_required(config_file):
    assert _manage(config_file, "purge") == 2
    assert _manage(config_file, "archive", "--before", "1d", "--max-rows", "0") == 2
