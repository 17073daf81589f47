"""The database URL: libpq's list of servers taken as SQLAlchemy's, and passwords kept out
of what Berth logs, wherever the URL gives them."""

import pytest

from scheduler.db import api as db_api
from scheduler.db import urls


@pytest.mark.parametrize("given, hosts, rest", [
    ("postgresql+psycopg2://berth:pw@db1:5432,db2:5433/berth?target_session_attrs=read-write",
     ("db1:5432", "db2:5433"), {"target_session_attrs": "read-write"}),
    ("postgresql://berth@db1,db2/berth", ("db1", "db2"), {}),
    ("postgresql+psycopg2://berth@/berth?host=db1:5432&host=db2:5433", ("db1:5432", "db2:5433"), {}),
])
def test_several_servers_are_sqlalchemys_host_arguments(given, hosts, rest):
    url = urls.parse(given)
    assert url.query["host"] == hosts
    assert {k: v for k, v in url.query.items() if k != "host"} == rest
    assert url.database == "berth" and url.username == "berth"
    assert url.host is None


def test_the_connect_arguments_name_every_server():
    database = db_api.Database("postgresql+psycopg2://berth:pw@db1:5432,db2:5433/berth"
                               "?target_session_attrs=read-write")
    try:
        _, kwargs = database.engine.dialect.create_connect_args(database.url)
    finally:
        database.dispose()
    assert kwargs["host"] == "db1,db2" and kwargs["port"] == "5432,5433"
    assert kwargs["target_session_attrs"] == "read-write" and kwargs["password"] == "pw"


@pytest.mark.parametrize("given, why", [
    ("mysql+pymysql://berth:pw@db1:3306,db2:3306/berth", "several hosts are for PostgreSQL only"),
    ("postgresql://berth:pw@db1:5432,,db2/berth", "an empty host"),
    ("postgresql://berth:pw@db1:notaport/berth", "invalid literal"),
])
def test_a_url_that_cannot_be_read_is_refused_without_its_password(given, why):
    with pytest.raises(ValueError, match="invalid database URL") as raised:
        db_api.Database(given)
    assert why in str(raised.value)
    assert "pw" not in str(raised.value).replace("pymysql", "")


@pytest.mark.parametrize("given, shown", [
    ("postgresql+psycopg2://berth:s3cret@db1:5432,db2:5433/berth?target_session_attrs=read-write",
     "postgresql+psycopg2://berth:***@/berth?host=db1:5432&host=db2:5433&target_session_attrs=read-write"),
    ("postgresql+psycopg2://berth@/berth?host=db1:5432&password=s3cret&sslmode=require",
     "postgresql+psycopg2://berth@/berth?host=db1:5432&password=***&sslmode=require"),
])
def test_the_logged_url_hides_the_password_wherever_it_is(given, shown):
    database = db_api.Database(given)
    try:
        assert database.masked_url == shown
        assert repr(database) == f"<Database {shown}>"
        assert database.scrub('password "s3cret" refused') == 'password "***" refused'
    finally:
        database.dispose()
