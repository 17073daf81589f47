"""README's walkthrough runs top to bottom as written: berth-all-in-one in a process of its own
(on its embedded defaults, in a state_path of the test's), then each ``$ berth ...`` line in
order, each succeeding, each listing printing the header README shows."""

import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from scheduler.cmd import cli
from tests.docs_pages import ROOT, blocks

README = (ROOT / "README.md").read_text()
WALKTHROUGH = README[README.index("## A short walkthrough"):README.index("## Real guests")]


def steps():
    """(command line, the first line of the output README shows or None), in README's order."""
    [start] = blocks("sh", WALKTHROUGH)
    found = [(start.strip(), None)]
    for block in blocks("console", WALKTHROUGH):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ "):
                shown = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$ ") else None
                found.append((line[2:], shown))
    return found


STEPS = steps()


def shown_after(command):
    """The lines README shows under ``$ command``, its first."""
    for block in blocks("console", WALKTHROUGH):
        lines = block.splitlines()
        if f"$ {command}" in lines:
            rest = lines[lines.index(f"$ {command}") + 1:]
            return rest[:next((i for i, line in enumerate(rest) if line.startswith("$ ")), len(rest))]
    raise AssertionError(f"README shows no $ {command}")


def run(conf_file, command):
    """``berth`` in this process, as typed but for the test's --config-file: (status, output)."""
    argv = shlex.split(command)
    assert argv[0] == "berth", command
    out = io.StringIO()
    status = cli.main(["--config-file", str(conf_file), *argv[1:]], out=out)
    return status, out.getvalue()


def wait_for(what, check, seconds=60.0):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {seconds:.0f} s"
        time.sleep(0.5)


def test_the_walkthrough_starts_the_daemon_and_then_runs_berth_commands_only():
    assert STEPS[0][0] == "berth-all-in-one --agents 4"
    assert [command.split()[0] for command, _ in STEPS[1:]] == ["berth"] * (len(STEPS) - 1)
    assert len(STEPS) >= 10


@pytest.fixture
def all_in_one(tmp_path):
    conf_file = tmp_path / "berth.conf"
    # The state of the test's own; a machine's name other than the one of README's transcripts
    # (the agents' names must not depend on it); any free port for the status page; the demo's
    # sync period.
    conf_file.write_text(f"[DEFAULT]\nstate_path = {tmp_path / 'state'}\nhost = laptop\n"
                         "[prometheus]\nlisten_port = 0\n[scaling]\nsync_period = 2\n")
    argv = shlex.split(STEPS[0][0])
    env = dict(os.environ, BERTH_CONCURRENCY="threading")
    log = tmp_path / "berth-all-in-one.log"
    with log.open("w") as logged:
        process = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.all_in_one", "--config-file",
                                    str(conf_file), *argv[1:]], stdout=logged, stderr=logged, env=env)
    try:
        hosts = "berth host list -f value -c host"
        wait_for("4 hosts reporting", lambda: run(conf_file, hosts)[1].count("\n") == 4)
        yield conf_file
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_each_command_of_the_walkthrough_succeeds_in_order(all_in_one):
    for command, shown in STEPS[1:]:
        if command.startswith("berth fake-load"):  # README: wait until CURRENT shows the members
            wait_for("the group's members", lambda: set(re.findall(r"ACTIVE (api-\d)", run(
                all_in_one, "berth server list -f value -c state -c name")[1])) >= {"api-1", "api-2"})
        status, out = run(all_in_one, command)
        assert status == 0, (command, out)
        if shown is not None and shown.isupper():  # a listing: README shows its header
            assert out.splitlines()[0].split() == shown.split(), command
        if command == "berth host list":  # the agents' names, whatever the machine's (host = laptop)
            assert [row.split()[0] for row in out.splitlines()[1:]] == [
                row.split()[0] for row in shown_after(command)[1:]]


def test_readmes_test_command_is_what_ci_runs_and_tox_lists_its_environments():
    [command] = [line for block in blocks("sh", README) for line in block.splitlines() if "tox -e" in line]
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()
    envs = command.split("tox -e ")[1].split(",")
    tox = (ROOT / "tox.ini").read_text()
    assert "docs" in envs
    assert re.search(r"^envlist = (.*)$", tox, re.M).group(1).split(",") == envs
