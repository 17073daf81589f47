"""mask_url: what Berth logs of a URL keeps the user and hosts and loses the password."""

import pytest

from scheduler.utils.masking import mask_url


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:s3cret@h/db", "postgresql://u:***@h/db"),
    ("postgresql+psycopg2://berth:s3cret@127.0.0.1:5432/berth?sslmode=require",
     "postgresql+psycopg2://berth:***@127.0.0.1:5432/berth?sslmode=require"),
    ("redis://admin:s3cret@h1:1,admin:s3cret@h2:2/", "redis://admin:***@h1:1,admin:***@h2:2/"),
    ("amqp://guest:p@ss@rabbit:5672//", "amqp://guest:***@rabbit:5672//"),
    ("weird://u:s3cret@", "weird://u:***@"),
    ("amqp://guest@rabbit//", "amqp://guest@rabbit//"),
    ("sqlite:////var/lib/berth/berth.sqlite", "sqlite:////var/lib/berth/berth.sqlite"),
    ("memory://", "memory://"),
])
def test_the_password_goes_and_the_rest_stays(url, shown):
    assert mask_url(url) == shown


def test_a_message_holding_urls_loses_their_passwords():
    message = ('(psycopg2.OperationalError) connection to "postgresql://berth:s3cret@db:5432/x" failed; '
               "also tried amqp://u:hunter2@h1,u:hunter2@h2/")
    masked = mask_url(message)
    assert "s3cret" not in masked and "hunter2" not in masked
    assert "postgresql://berth:***@db:5432/x" in masked and "amqp://u:***@h1,u:***@h2/" in masked


def test_a_password_given_as_a_query_argument_goes_too():
    message = ('cannot reach "postgresql://berth@/berth?host=db1:5432&password=s3cret&sslmode=require" '
               "nor postgresql://u@db/x?PASSWORD=hunter2")
    assert mask_url(message) == (
        'cannot reach "postgresql://berth@/berth?host=db1:5432&password=***&sslmode=require" '
        "nor postgresql://u@db/x?PASSWORD=***")
