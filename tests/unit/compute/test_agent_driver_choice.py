"""The driver is the operator's choice: an agent without one does not start, and every agent
says at start which driver runs and the sizes it reports."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from oslo_config import cfg

from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from scheduler import conf as berth_conf
from scheduler.cmd import all_in_one

GUARD = 90  # against hangs only
NOT_SET = (
    "berth-compute-agent: invalid configuration: [compute_agent] driver is not set: set driver = host "
    "to report this machine's memory, disk and CPUs, or driver = fake to report a simulated host of "
    "fake_memory_mb, fake_local_gb and fake_vcpus"
)


def write_conf(tmp_path, **agent_options):
    lines = ["[DEFAULT]", "transport_url = memory://", f"state_path = {tmp_path / 'state'}", "host = c1",
             "[prometheus]", "listen_port = 0",  # whatever else runs on this machine
             "[compute_agent]"] + [f"{k} = {v}" for k, v in agent_options.items()]
    path = tmp_path / "berth.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run_until(args, marker, tmp_path):
    """Run ``python -m args`` until ``marker`` is in its output (then SIGTERM it) or it exits;
    return its exit status and output."""
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                                cwd=tmp_path)
        deadline = time.monotonic() + GUARD
        while proc.poll() is None and time.monotonic() < deadline:
            if marker in log.read_text(errors="replace"):
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.1)
        try:
            proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode, log.read_text(errors="replace")


def said(out, text):
    """The log lines with ``text``, each checked to be at INFO."""
    lines = [line for line in out.splitlines() if text in line]
    assert all(" INFO " in line for line in lines), lines
    return lines


def fresh_conf(*argv):
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf(list(argv), project="berth-test", default_config_files=[])
    return conf


def test_the_driver_has_no_default():
    assert fresh_conf().compute_agent.driver is None


def test_an_agent_without_a_driver_stops_at_start_with_one_line_saying_what_to_set(tmp_path):
    command = [sys.executable, "-m", "compute_agent.cmd.agent", "--config-file", write_conf(tmp_path)]
    # eventlet (BERTH_CONCURRENCY=eventlet) warns of its own deprecation on import: not ours.
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run(command, capture_output=True, text=True, timeout=GUARD, cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [NOT_SET]
    assert done.stdout == ""
    assert not (tmp_path / "state" / "compute").exists()  # nothing was taken


def test_a_driver_that_is_not_set_is_refused_wherever_an_agent_is_built():
    with pytest.raises(ValueError) as info:
        drivers.load_driver(fresh_conf())
    assert str(info.value) == agent_conf.DRIVER_NOT_SET


def test_the_fake_agent_says_at_start_that_its_host_is_simulated_and_how_big(tmp_path):
    status, out = run_until(["compute_agent.cmd.agent", "--config-file",
                             write_conf(tmp_path, driver="fake", fake_memory_mb=4096, fake_vcpus=8)],
                            "starting with", tmp_path)
    assert status == 0, out
    [line] = said(out, "driver fake")
    assert line.endswith("Compute agent c1: driver fake: simulated host of 4096 MB memory, 1024 GB disk, "
                         "8 vCPUs ([compute_agent] fake_memory_mb, fake_local_gb, fake_vcpus)")


def test_the_host_agent_says_at_start_that_it_reports_this_machine(tmp_path):
    status, out = run_until(["compute_agent.cmd.agent", "--config-file", write_conf(tmp_path, driver="host")],
                            "starting with", tmp_path)
    assert status == 0, out
    memory_mb = psutil.virtual_memory().total // (1024 * 1024)
    [line] = said(out, "driver host")
    assert f"Compute agent c1: driver host: this machine's {memory_mb} MB memory, " in line
    assert f" GB disk (the file system of {tmp_path}" in line
    assert line.endswith(f"), {os.cpu_count()} vCPUs")


def test_all_in_one_runs_fake_agents_unless_the_operator_chose_a_driver(tmp_path):
    def driver(*argv):
        conf = cfg.ConfigOpts()
        berth_conf.register_opts(conf)
        all_in_one.register_agent_opts(conf)
        conf(list(argv), project="berth-test", default_config_files=[])
        return conf.compute_agent.driver

    assert driver() == "fake"
    assert driver("--config-file", write_conf(tmp_path, driver="host")) == "host"
    assert fresh_conf().compute_agent.driver is None  # the all-in-one's choice stays its own


def test_all_in_one_says_at_start_what_its_agents_report(tmp_path):
    status, out = run_until(["scheduler.cmd.all_in_one", "--agents", "2", "--config-file",
                             write_conf(tmp_path, fake_local_gb=500)], "starting with", tmp_path)
    assert status == 0, out
    [line] = said(out, "driver fake")
    assert ("2 compute agent(s), vm-compute-1 to vm-compute-2, each driver fake: simulated host of "
            "32768 MB memory, 500 GB disk, 16 vCPUs") in line
