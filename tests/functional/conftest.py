"""Fixtures of the functional tests, which run against the real services."""

import contextlib
import fcntl
import os
import socket
import tempfile
import uuid

import pytest

import scheduler  # noqa: F401  (applies BERTH_CONCURRENCY before kombu & co. load)

RABBIT_HOST = "127.0.0.1"
RABBIT_PORT = 5672
RABBIT_URL = f"rabbit://guest:guest@{RABBIT_HOST}:{RABBIT_PORT}/"


#: The functional tests of one machine run side by side (pytest-xdist) but for those that stop the
#: machine's RabbitMQ (marked ``stops_the_broker``), which run alone: they take these files' locks
#: whole, the others shared. The turnstile lets one waiting to be alone in before more come.
TURNSTILE = os.path.join(tempfile.gettempdir(), "berth-functional-turnstile.lock")
BROKER_IN_USE = os.path.join(tempfile.gettempdir(), "berth-functional-broker.lock")


@contextlib.contextmanager
def _broker_turn(alone):
    with open(TURNSTILE, "a") as turnstile, open(BROKER_IN_USE, "a") as in_use:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(in_use, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(in_use, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)
def broker_turn(request):
    """Held for a whole module, before its fleets start: a module's fleet outlives its tests."""
    with _broker_turn(request.node.get_closest_marker("stops_the_broker") is not None):
        yield


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
