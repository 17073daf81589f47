"""Instance metrics in the database (SQLite): saved in bulk, upserted, read newer than a
time, left out and pruned once their instance is DELETED or archived."""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from berth_contract.host_report import HostReport
from scheduler import states
from scheduler.db import archive
from scheduler.db.instance_metrics import RETENTION_S
from scheduler.db.models import instance_metrics

U1 = "00000000-0000-4000-8000-000000000001"
U2 = "00000000-0000-4000-8000-000000000002"
U3 = "00000000-0000-4000-8000-000000000003"


@pytest.fixture
def live(database):
    database.create_instances([{"uuid": u, "state": states.ACTIVE} for u in (U1, U2, U3)])
    return database


def _sample(uuid, name, value, source="agent", **extra):
    return {"instance_uuid": uuid, "name": name, "value": value, "source": source, **extra}


def _reports(**usage):
    """{host: HostReport} carrying each host's ``instance_usage``, and nothing else of note."""
    return {host: HostReport.trusted({"host": host, "instance_usage": u}) for host, u in usage.items()}


def _rows(database):
    with database.engine.connect() as connection:
        return sorted((r.instance_uuid, r.name, r.value, r.source)
                      for r in connection.execute(sa.select(instance_metrics)))


def test_saved_samples_are_read_back_per_instance(live):
    saved = live.save_instance_metrics([_sample(U1, "cpu", 0.5), _sample(U1, "memory", 256),
                                        _sample(U2, "rps", 120, "pushed")])
    assert saved == 3
    since = live.now() - timedelta(seconds=60)
    assert live.latest_instance_metrics([U1, U2, U3], since) == {
        U1: {"cpu": 0.5, "memory": 256.0}, U2: {"rps": 120.0}}
    assert live.latest_instance_metrics([U2], since) == {U2: {"rps": 120.0}}
    assert live.latest_instance_metrics([], since) == {}


def test_a_new_sample_replaces_the_old_one_of_the_same_instance_and_name(live):
    live.save_instance_metrics([_sample(U1, "cpu", 0.5), _sample(U1, "memory", 256)])
    live.save_instance_metrics([_sample(U1, "cpu", 1.5)])
    assert _rows(live) == [(U1, "cpu", 1.5, "agent"), (U1, "memory", 256.0, "agent")]
    # Of one instance and name in one call, the last wins.
    live.save_instance_metrics([_sample(U2, "rps", 1, "pushed"), _sample(U2, "rps", 2, "pushed")])
    assert live.latest_instance_metrics([U2], live.now() - timedelta(seconds=60)) == {U2: {"rps": 2.0}}


def test_a_sample_older_than_since_counts_as_missing(live):
    now = live.now()
    live.save_instance_metrics([_sample(U1, "cpu", 0.5, sampled_at=now - timedelta(seconds=120)),
                                _sample(U1, "memory", 256, sampled_at=now - timedelta(seconds=10)),
                                _sample(U2, "cpu", 1.0, sampled_at=now - timedelta(seconds=120))])
    assert live.latest_instance_metrics([U1, U2], now - timedelta(seconds=60)) == {U1: {"memory": 256.0}}
    assert live.latest_instance_metrics([U1, U2], now - timedelta(seconds=300)) == {
        U1: {"cpu": 0.5, "memory": 256.0}, U2: {"cpu": 1.0}}
    # ``since`` as an ISO-8601 time, as the database's times travel.
    iso = (now - timedelta(seconds=60)).isoformat() + "Z"
    assert live.latest_instance_metrics([U1], iso) == {U1: {"memory": 256.0}}


def test_samples_of_an_instance_unknown_or_deleted_are_not_saved(live):
    live.update_instance(U3, {"state": states.DELETED})
    saved = live.save_instance_metrics([_sample(U1, "cpu", 0.5), _sample(U3, "cpu", 0.5),
                                        _sample("00000000-0000-4000-8000-00000000dead", "cpu", 0.5)])
    assert saved == 1
    assert _rows(live) == [(U1, "cpu", 0.5, "agent")]


@pytest.mark.parametrize("row, message", [
    (_sample(U1, "cpu", float("nan")), "value must be a finite number"),
    (_sample(U1, "cpu", True), "value must be a finite number"),
    (_sample(U1, "cpu", 1, source="guessed"), "source must be one of agent, pushed"),
    (_sample(U1, "n" * 65, 1), "name must be text of 1 to 64 characters"),
    (_sample(None, "cpu", 1), "instance_uuid must be a UUID"),
])
def test_a_bad_row_saves_nothing(live, row, message):
    with pytest.raises(ValueError, match=message):
        live.save_instance_metrics([_sample(U2, "cpu", 1.0), row])
    assert _rows(live) == []


def test_the_usage_of_agents_reports_is_saved_for_scaling_group_members(live):
    for uuid, host in ((U1, "h1"), (U2, "h2")):
        live.update_instance(uuid, {"scaling_group_uuid": "g1", "host": host})
    live.update_instance(U3, {"host": "h2"})
    reports = _reports(h1={U1: {"cpu": 0.25, "memory": 100.0}}, h2={U2: {"cpu": 2.0}, U3: {"cpu": 1.0}},
                       h3=None)
    assert live.save_instance_usage(reports) == (3, {})  # U3 is no member
    assert _rows(live) == [(U1, "cpu", 0.25, "agent"), (U1, "memory", 100.0, "agent"),
                           (U2, "cpu", 2.0, "agent")]


def test_a_report_speaks_only_for_the_members_on_its_own_host(live):
    for uuid, host in ((U1, "h1"), (U2, "h2")):
        live.update_instance(uuid, {"scaling_group_uuid": "g1", "host": host})
    # h1 reports U2, which the database places on h2, at 64 vCPUs; h2 reports it at 0.5.
    reports = _reports(h2={U2: {"cpu": 0.5}}, h1={U1: {"cpu": 0.25}, U2: {"cpu": 64.0, "memory": 1.0}})
    assert live.save_instance_usage(reports) == (2, {"h1": [U2]})
    assert _rows(live) == [(U1, "cpu", 0.25, "agent"), (U2, "cpu", 0.5, "agent")]
    # Alone, h1's word about U2 is dropped all the same.
    assert live.save_instance_usage(_reports(h1={U2: {"cpu": 64.0}})) == (0, {"h1": [U2]})
    assert _rows(live) == [(U1, "cpu", 0.25, "agent"), (U2, "cpu", 0.5, "agent")]


def test_operators_see_every_sample_however_old(live):
    old = live.now() - timedelta(days=1)
    live.save_instance_metrics([_sample(U1, "rps", 3, "pushed", sampled_at=old)])
    [(name, sample)] = live.list_instance_metrics([U1, U2])[U1].items()
    assert (name, sample["value"], sample["source"]) == ("rps", 3.0, "pushed")
    assert sample["sampled_at"] == old.isoformat(timespec="microseconds") + "Z"


def test_pruning_deletes_the_samples_of_deleted_and_archived_instances_and_old_ones(live):
    now = live.now()
    too_old, not_yet = now - timedelta(seconds=RETENTION_S + 60), now - timedelta(seconds=RETENTION_S - 60)
    live.save_instance_metrics([_sample(u, "cpu", 1.0) for u in (U1, U2, U3)]
                               + [_sample(U1, "rps", 1.0, "pushed", sampled_at=too_old),
                                  _sample(U1, "queue", 1.0, "pushed", sampled_at=not_yet)])
    live.update_instance(U2, {"state": states.DELETED, "deleted_at": now - timedelta(days=2)})
    live.update_instance(U3, {"state": states.DELETED, "deleted_at": now - timedelta(days=2)})
    moved, _ = archive.archive(live, now - timedelta(days=1), max_rows=1)  # U2 goes to the shadow table
    assert moved["instances"] == 1 and live.get_instance(U2) is None
    assert len(_rows(live)) == 5  # nothing goes before the prune

    assert live.prune_instance_metrics() == 3  # U2's (archived), U3's (DELETED), U1's rps (too old)
    assert _rows(live) == [(U1, "cpu", 1.0, "agent"), (U1, "queue", 1.0, "pushed")]
    # Readers whose staleness limit is longer than RETENTION_S keep their samples.
    live.save_instance_metrics([_sample(U1, "rps", 1.0, "pushed", sampled_at=too_old)])
    assert live.prune_instance_metrics(max_age_s=RETENTION_S + 3600) == 0
    assert live.prune_instance_metrics(max_age_s=60) == 1
    assert _rows(live) == [(U1, "cpu", 1.0, "agent"), (U1, "queue", 1.0, "pushed")]
