"""Which statements the database takes: the fast paths of scheduler.db.fastpaths, or the
portable ones (option off, or a database without fast paths)."""

import logging
import types

import pytest
import sqlalchemy
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from scheduler import conf as berth_conf
from scheduler.db import api as db_api
from scheduler.db import fastpaths
from scheduler.db.models import instances

# Never connected to: building a Database does not connect.
PG_URL = "postgresql+psycopg2://berth@127.0.0.1:1/berth"


def _pg_database(**kwargs):
    pytest.importorskip("psycopg2")
    return db_api.Database(PG_URL, **kwargs)


def _conf(**database):
    conf = berth_conf.new_conf()
    conf([], project="berth-test", default_config_files=[])
    conf.set_override("connection", PG_URL, "database")
    for name, value in database.items():
        conf.set_override(name, value, "database")
    return conf


def test_the_option_is_on_by_default_and_from_conf_reads_it():
    pytest.importorskip("psycopg2")
    assert db_api.Database.from_conf(_conf()).fast_paths is True
    assert db_api.Database.from_conf(_conf(sqlalchemy_fast_paths=False)).fast_paths is False


def test_a_database_built_without_the_option_takes_its_default():
    assert _pg_database().fast_paths is True
    assert _pg_database(fast_paths=False).fast_paths is False


def test_databases_without_fast_paths_never_take_them():
    assert db_api.Database("sqlite://", fast_paths=True).fast_paths is False


@pytest.mark.parametrize("version", ["2.0.0", "2.2.0", "3.0.0b1", "unknown"])
def test_any_sqlalchemy_release_takes_the_fast_paths_without_a_warning(version, caplog, monkeypatch):
    # The fast paths render through psycopg2 and public SQLAlchemy names: no version to check.
    monkeypatch.setattr(sqlalchemy, "__version__", version)
    with caplog.at_level(logging.WARNING):
        assert _pg_database(fast_paths=True).fast_paths is True
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("chooser, fast_path", [("instance_inserter", "insert_new_instances_psycopg2"),
                                               ("upserter", "upsert_psycopg2"),
                                               ("versioned_updater", "update_versioned_psycopg2")])
def test_a_psycopg2_fast_path_is_taken_only_on_psycopg2_with_the_fast_paths_on(chooser, fast_path):
    choose = getattr(fastpaths, chooser)
    psycopg2_dialect = types.SimpleNamespace(driver="psycopg2")
    assert choose(psycopg2_dialect, True) is getattr(fastpaths, fast_path)
    assert choose(psycopg2_dialect, False) is None
    assert choose(types.SimpleNamespace(driver="psycopg"), True) is None
    assert choose(sqlite_dialect.dialect(), True) is None


@pytest.mark.parametrize("enabled, unnested", [(True, True), (False, False)])
def test_pairs_are_matched_through_unnested_arrays_only_with_the_fast_paths_on(enabled, unnested):
    connection = types.SimpleNamespace(dialect=postgresql.dialect())
    condition = fastpaths.on_pairs(connection, instances, [("u1", "h1"), ("u2", "h2")], enabled)
    sql = str(sqlalchemy.select(instances.c.id).where(condition).compile(dialect=postgresql.dialect()))
    assert ("unnest(" in sql) is unnested
    assert ("(instances.uuid, instances.host) IN" in sql) is not unnested


def test_other_databases_match_pairs_portably_whatever_the_option():
    connection = types.SimpleNamespace(dialect=sqlite_dialect.dialect())
    condition = fastpaths.on_pairs(connection, instances, [("u1", "h1")], True)
    assert "unnest" not in str(condition.compile(dialect=sqlite_dialect.dialect()))

