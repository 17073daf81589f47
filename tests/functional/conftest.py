"""Fixtures of the functional tests, which run against the real services."""

import os
import socket
import uuid

import pytest

import scheduler  # noqa: F401  (applies BERTH_CONCURRENCY before kombu & co. load)

RABBIT_HOST = "127.0.0.1"
RABBIT_PORT = 5672
RABBIT_URL = f"rabbit://guest:guest@{RABBIT_HOST}:{RABBIT_PORT}/"


@pytest.fixture(scope="session")
def rabbit_url():
    """The URL of the test RabbitMQ; fails (not skips) the test when it is unreachable."""
    try:
        socket.create_connection((RABBIT_HOST, RABBIT_PORT), timeout=5).close()
    except OSError as exc:
        pytest.fail(
            f"RabbitMQ is not reachable at {RABBIT_HOST}:{RABBIT_PORT} ({exc}); the "
            "functional tests need it running with the guest/guest account",
            pytrace=False,
        )
    return RABBIT_URL


@pytest.fixture
def control_exchange():
    """An exchange name no other test (or test run) uses."""
    return f"berth-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
