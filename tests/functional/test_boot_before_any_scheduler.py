"""A request sent before any scheduler has run is never reported accepted and lost.

On RabbitMQ the schedulers' queue exists once a scheduler declared it: before that the
broker routes a cast to no queue and drops it. ``berth`` publishes its casts mandatory,
so the broker returns such a request and the command refuses it (exit 1, one line saying
why and what to do); once a scheduler has run, a request waits in its queue for one. On
the embedded filesystem:// transport the client declares the queue itself: the request
waits there from the first.
"""

import signal
import subprocess
import sys
import time

from scheduler.utils.masking import mask_url
from tests.functional.fleet import Fleet, child_env, temporary_database, temporary_vhost

SIZES = ("boot", "--flavor-ram", "512", "--flavor-disk", "1", "--flavor-vcpus", "1")


def test_a_boot_before_any_scheduler_ran_on_the_vhost_is_refused_and_one_after_waits_for_it(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            started = time.monotonic()
            refused = fleet.cli(*SIZES)
            took = time.monotonic() - started
            assert (refused.returncode, refused.stdout) == (1, "")  # no UUID: nothing accepted
            assert refused.stderr.splitlines() == [
                f"berth: no scheduler queue 'scheduler' exists yet on exchange '{fleet.exchange}' of "
                f"{mask_url(transport_url)} (no scheduler has run there): the broker dropped the request, "
                "nothing was done. Start berth-scheduler (or berth-all-in-one) on this transport_url and "
                "control_exchange once (it declares the queue, where requests then wait for a scheduler), "
                "and send it again"]

            fleet.start_schedulers(["first"])
            fleet.start_agent("early", fake_memory_mb=8192)
            fleet.wait_hosts_up(["early"])
            assert fleet.instances() == {}  # the refused one is nowhere
            assert fleet.stop("first") == 0  # its queue stays, without a consumer

            started = time.monotonic()
            queued = fleet.cli(*SIZES)
            print(f"\nrefused in {took:.2f} s; queued with no scheduler running in "
                  f"{time.monotonic() - started:.2f} s")
            assert (queued.returncode, queued.stderr) == (0, "")
            [uuid] = queued.stdout.split()
            fleet.start_schedulers(["second"])
            fleet.wait_states([uuid], {"ACTIVE"})
            assert fleet.instances([uuid])[uuid]["host"] == "early"
        finally:
            fleet.close()


def test_on_the_embedded_transport_a_boot_before_any_scheduler_waits_for_it(tmp_path):
    """filesystem:// and SQLite in a fresh state_path, as a newcomer's first boot."""
    env = child_env({"XDG_STATE_HOME": str(tmp_path / "xdg")})
    for name in ("INVOCATION_ID", "NOTIFY_SOCKET"):  # state in XDG's place, even under systemd
        env.pop(name, None)
    env["BERTH_CONCURRENCY"] = "threading"  # under eventlet its deprecation warning would be on stderr

    def berth(*args):
        return subprocess.run([sys.executable, "-m", "scheduler.cmd.cli", *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=120)

    queued = berth(*SIZES)
    assert (queued.returncode, queued.stderr) == (0, "")
    [uuid] = queued.stdout.split()
    with open(tmp_path / "all-in-one.log", "wb") as log:
        all_in_one = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.all_in_one", "--agents", "1"],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 90
        while (shown := berth("show", uuid, "-f", "value", "-c", "state", "-c", "fault_reason").stdout.split(
                None, 1)) == [] or shown[0] not in ("ACTIVE", "ERROR"):
            assert time.monotonic() < deadline and all_in_one.poll() is None, (
                shown, (tmp_path / "all-in-one.log").read_text()[-3000:])
            time.sleep(0.5)
        # Held, and taken by the scheduler as it started: placed, or refused for want of a host
        # when it came before the agent's first report (said in its fault), never lost.
        print(f"\nthe boot queued before berth-all-in-one started: {' '.join(shown)}")
        assert shown == ["ACTIVE"] or shown[1].endswith("no compute host has reported to the scheduler\n")
    finally:
        all_in_one.send_signal(signal.SIGINT)
        assert all_in_one.wait(60) == 0
