"""The systemd units in etc/systemd run installed commands with /etc/berth/berth.conf; the daemons'
are restarted on failure and offer `systemctl reload` exactly where the command handles SIGHUP."""

import configparser
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "etc" / "systemd"
UNITS = sorted(SYSTEMD.glob("*.service"))
GUARD = 90  # against hangs only
STARTED = ("started on", "starting with")  # the scheduler's and the agents' start lines


def console_scripts():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    scripts = {}
    for line in setup["options.entry_points"]["console_scripts"].strip().splitlines():
        name, _, target = (part.strip() for part in line.partition("="))
        scripts[name] = target.split(":")[0]
    return scripts


def read_unit(path):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(path)
    return unit


def exec_start(unit):
    return shlex.split(unit["Service"]["ExecStart"])


DAEMONS = [u for u in UNITS if read_unit(u)["Service"].get("Type") == "simple"]


def test_a_unit_for_each_daemon():
    assert {u.name for u in DAEMONS} == {"berth-all-in-one.service", "berth-compute-agent.service",
                                         "berth-scheduler.service"}


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_the_unit_runs_an_installed_command_on_etc_berth(path):
    unit = read_unit(path)
    binary, *args = exec_start(unit)
    assert binary.startswith("/")
    assert pathlib.PurePath(binary).name in console_scripts()
    assert args[:2] == ["--config-file", "/etc/berth/berth.conf"]
    service = unit["Service"]
    assert service["User"] == "berth"
    assert service["StateDirectory"] == "berth"  # /var/lib/berth, state_path's default under systemd


@pytest.mark.parametrize("path", DAEMONS, ids=lambda p: p.name)
def test_a_daemon_runs_its_own_command_and_is_restarted_on_failure(path):
    unit = read_unit(path)
    binary, *args = exec_start(unit)
    assert pathlib.PurePath(binary).name == path.stem  # berth-scheduler.service runs berth-scheduler
    assert args == ["--config-file", "/etc/berth/berth.conf"]
    assert unit["Service"]["Restart"] == "on-failure"
    assert "rabbitmq-server.service" in unit["Unit"]["Wants"].split()


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_the_broker_and_the_database_are_wanted_never_required(path):
    section = read_unit(path)["Unit"]
    wants, after = section["Wants"].split(), section["After"].split()
    assert "network-online.target" in wants and "network-online.target" in after
    assert set(wants) <= set(after)
    for strong in ("Requires", "Requisite", "BindsTo", "PartOf"):
        assert strong not in section, strong


def handles_sighup(module, tmp_path):
    """Run ``module`` until it has started, send it SIGHUP; True if it says so and keeps running
    (then SIGTERM stops it with status 0)."""
    conf = tmp_path / "berth.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = memory://\nstate_path = {tmp_path / 'state'}\nhost = u1\n"
                    "[compute_agent]\ndriver = fake\n"
                    "[prometheus]\nlisten_port = 0\n")  # whatever else listens on this machine
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", module, "--config-file", str(conf)], stdout=out,
                                stderr=subprocess.STDOUT, cwd=tmp_path)
        try:
            deadline = time.monotonic() + GUARD
            while proc.poll() is None and not any(m in log.read_text() for m in STARTED):
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGHUP)
            while proc.poll() is None and "Received SIGHUP" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            if proc.poll() is not None:
                return False
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(GUARD) == 0, log.read_text()
            return True
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("path", DAEMONS, ids=lambda p: p.name)
def test_reload_is_offered_exactly_where_sighup_is_handled(path, tmp_path):
    service = read_unit(path)["Service"]
    module = console_scripts()[pathlib.PurePath(exec_start(read_unit(path))[0]).name]
    assert ("ExecReload" in service) == handles_sighup(module, tmp_path)
    if "ExecReload" in service:
        assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"


@pytest.mark.parametrize("path", sorted(set(UNITS) - set(DAEMONS)), ids=lambda p: p.name)
def test_a_unit_that_runs_once_has_nothing_to_reload(path):
    service = read_unit(path)["Service"]
    assert service["Type"] == "oneshot" and "ExecReload" not in service


@pytest.mark.parametrize("path", sorted(SYSTEMD.glob("*.timer")), ids=lambda p: p.name)
def test_a_timer_starts_a_unit_shipped_beside_it(path):
    timer = read_unit(path)["Timer"]
    assert (SYSTEMD / timer.get("Unit", path.with_suffix(".service").name)).exists()


def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path):
    analyze = shutil.which("systemd-analyze")
    installed = shutil.which("berth-scheduler")
    if not analyze or not installed:
        pytest.skip("needs systemd-analyze and Berth's commands installed")
    # The units name /usr/local/bin; verify checks the command exists, so point them at this install.
    where = str(pathlib.Path(installed).parent)
    copies = []
    for path in sorted(SYSTEMD.glob("*.service")) + sorted(SYSTEMD.glob("*.timer")):
        copy = tmp_path / path.name
        copy.write_text(path.read_text().replace("ExecStart=/usr/local/bin/", f"ExecStart={where}/"))
        copies.append(str(copy))
    done = subprocess.run([analyze, "verify", "--man=no", *copies], capture_output=True, text=True,
                          timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if "berth" in line], done.stderr


@pytest.mark.parametrize("path", DAEMONS, ids=lambda p: p.name)
def test_a_daemon_may_open_more_descriptors_than_systemds_default_1024(path):
    soft = read_unit(path)["Service"]["LimitNOFILE"].split(":")[0]
    assert soft == "infinity" or int(soft) >= 16384


def test_stopping_the_agent_ends_the_agent_alone_never_its_guests():
    # systemd's default (control-group) would kill the qemu driver's guests with the agent.
    unit = read_unit(SYSTEMD / "berth-compute-agent.service")
    assert unit["Service"].get("KillMode") == "process"
