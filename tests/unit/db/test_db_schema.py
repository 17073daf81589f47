import threading

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from scheduler.db import api as db_api
from scheduler.db import models, schema


@pytest.fixture
def fresh(db_url):
    database = db_api.Database(db_url, max_retries=0, retry_interval=0.0)
    yield database
    database.dispose()


def test_empty_database_has_no_version(fresh):
    assert fresh.version() is None


def test_sync_creates_every_table(fresh):
    assert fresh.sync() == schema.head()
    tables = set(sa.inspect(fresh.engine).get_table_names())
    assert tables == set(models.Base.metadata.tables) | {"alembic_version"}
    assert fresh.version() == schema.head() == "0014"


def test_sync_is_idempotent(fresh):
    fresh.sync()
    fresh.create_instances([{"uuid": "u1"}])
    assert fresh.sync() == schema.head()
    assert fresh.get_instance("u1") is not None


def test_migrations_create_exactly_the_models(fresh):
    fresh.sync()
    with fresh.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, models.Base.metadata)
    assert diff == []


def test_downgrade_then_upgrade(fresh):
    fresh.sync()
    with fresh.engine.connect() as connection:
        command.downgrade(schema.alembic_config(connection), "base")
        connection.commit()
    assert set(sa.inspect(fresh.engine).get_table_names()) == {"alembic_version"}
    assert fresh.version() is None
    assert fresh.sync() == schema.head()


def test_concurrent_sync(db_url):
    databases = [db_api.Database(db_url, max_retries=0) for _ in range(4)]
    results, errors = [], []
    barrier = threading.Barrier(len(databases))

    def run(database):
        barrier.wait()
        try:
            results.append(database.sync())
        except Exception as exc:  # pragma: no cover - the failure being tested
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for database in databases:
        database.dispose()
    assert errors == []
    assert results == [schema.head()] * len(databases)


def test_sync_uses_wal(database):
    with database.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
