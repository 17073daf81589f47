import pytest

from scheduler.db import api as db_api


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite:///{tmp_path}/state/berth.sqlite"


@pytest.fixture
def database(db_url):
    database = db_api.Database(db_url, max_retries=2, retry_interval=0.0)
    database.sync()
    yield database
    database.dispose()
