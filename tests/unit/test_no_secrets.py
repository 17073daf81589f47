"""No password, of the broker or of the database, in what the services log at
start (even at debug level) or in what ``berth`` prints when it fails."""

import os
import signal
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKER_PW = "Br0kerPassw0rd"
DB_PW = "DbPassw0rd"
GUARD = 60  # against hangs only
WAITING = "Waiting for the message broker"
RETRYING = "Cannot connect to the message broker"
RETRIES = 3  # reconnect attempts logged after WAITING, before the SIGTERM


def write_conf(tmp_path, database):
    path = tmp_path / "berth.conf"
    path.write_text(
        "[DEFAULT]\n"
        # Nothing listens on port 1: every connection fails, and says so in the log.
        f"transport_url = rabbit://berth:{BROKER_PW}@127.0.0.1:1,berth:{BROKER_PW}@127.0.0.2:1/berth\n"
        f"state_path = {tmp_path / 'state'}\n"
        "rpc_response_timeout = 2\n"
        "debug = true\n"
        "[database]\n"
        f"connection = {database}\n"
        "max_retries = 0\n"
        "[oslo_messaging_rabbit]\n"
        "rabbit_retry_interval = 0.1\n"
        "rabbit_interval_max = 0.2\n"
        "publish_retries = 1\n"
        "[compute_agent]\n"
        "driver = fake\n"
    )
    return str(path)


def run_until(args, marker):
    """Run a command until ``marker`` and RETRIES reconnect attempts after it are in its
    output (then SIGTERM it), or until it exits; return its output."""
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"), text=True, errors="replace")
    guard = threading.Timer(GUARD, proc.kill)
    guard.start()
    lines, retries = [], None
    try:
        for line in proc.stdout:
            lines.append(line)
            if retries is None and marker in line:
                retries = 0
            elif retries is not None and RETRYING in line:
                retries += 1
                if retries == RETRIES:
                    proc.send_signal(signal.SIGTERM)
        proc.wait()
    finally:
        guard.cancel()
        proc.stdout.close()
    return "".join(lines)


def assert_no_secret(text):
    assert BROKER_PW not in text
    assert DB_PW not in text


def test_scheduler_start_up_and_reconnect_logs(tmp_path):
    conf = write_conf(tmp_path, f"sqlite:///{tmp_path}/berth.sqlite")
    out = run_until(["scheduler.cmd.scheduler", "--config-file", conf], WAITING)
    assert "berth:***@127.0.0.1:1" in out  # the URL is shown, masked
    assert "Stopped waiting for the message broker" in out  # never started without it
    assert_no_secret(out)


def test_scheduler_that_cannot_reach_its_database_says_so_in_one_line(tmp_path):
    conf = write_conf(tmp_path, f"postgresql+psycopg2://berth:{DB_PW}@127.0.0.1:1/berth")
    pytest.importorskip("psycopg2")
    out = run_until(["scheduler.cmd.scheduler", "--config-file", conf], "never")
    assert "berth-scheduler: cannot start: database postgresql+psycopg2://berth:***@127.0.0.1:1/berth" in out
    assert "Traceback" not in out
    assert_no_secret(out)


def test_agent_start_up_and_reconnect_logs(tmp_path):
    conf = write_conf(tmp_path, f"postgresql://berth:{DB_PW}@db/berth")
    out = run_until(
        ["compute_agent.cmd.agent", "--config-file", conf, "--host", "c1"], WAITING
    )
    assert f"{WAITING} at rabbit://berth:***@127.0.0.1:1,berth:***@127.0.0.2:1/berth" in out
    assert out.count(RETRYING) > RETRIES  # its reconnect attempts are in what was checked
    assert_no_secret(out)


@pytest.mark.parametrize(
    "args",
    [["hosts"], ["boot", "--flavor", "m1.tiny"], ["show", "00000000-0000-4000-8000-000000000000"]],
)
def test_berth_errors(tmp_path, args):
    conf = write_conf(tmp_path, f"postgresql://berth:{DB_PW}@db/berth")
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", conf, *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1].startswith("berth: ")
    assert "Traceback" not in result.stderr
    assert_no_secret(result.stdout + result.stderr)


def test_berth_with_a_bad_transport_url(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = redis://berth:{BROKER_PW}@h/\nstate_path = {tmp_path}\n")
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(conf), "hosts"],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert "redis://berth:***@h/" in result.stderr
    assert "Traceback" not in result.stderr
    assert_no_secret(result.stdout + result.stderr)


def test_database_tls_settings_in_the_url_reach_the_driver():
    psycopg2 = pytest.importorskip("psycopg2")  # noqa: F841
    from scheduler.db.api import Database

    url = (
        f"postgresql+psycopg2://berth:{DB_PW}@db.example/berth"
        "?sslmode=verify-full&sslrootcert=/etc/berth/db-ca.pem"
    )
    database = Database(url)
    try:
        _, params = database.engine.dialect.create_connect_args(database.engine.url)
        assert params["sslmode"] == "verify-full"
        assert params["sslrootcert"] == "/etc/berth/db-ca.pem"
        assert DB_PW not in database.masked_url and DB_PW not in repr(database)
    finally:
        database.dispose()
