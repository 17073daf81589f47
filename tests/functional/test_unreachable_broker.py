"""A broker that cannot be reached: the command line says so in one line within seconds,
naming the broker (its password masked); a daemon says it waits for the broker, and
starts once the broker answers.

"The broker comes up" is a forwarder that starts listening, in this process, on the
port the daemons were given, and passes each connection on to the test RabbitMQ.
"""

import contextlib
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

from scheduler.utils.masking import mask_url as masked
from tests.functional.fleet import RABBIT_URL, Fleet, temporary_database, temporary_vhost, write_conf

BROKER = urllib.parse.urlsplit(RABBIT_URL)
UUID = "00000000-0000-4000-8000-000000000000"
# Every command that talks to the broker, with what it would send.
COMMANDS = [
    ("hosts",),
    ("instances",),
    ("show", UUID),
    ("boot", "--flavor", "m1.tiny"),
    ("boot", "--flavor", "m1.tiny", "--wait"),
    ("delete", UUID),
    ("delete", UUID, "--wait"),
    ("aggregate", "list"),
    ("aggregate", "create", "agg1"),
    ("server-group", "list"),
    ("server-group", "create", "web", "--policy", "affinity"),
]
# Backoff of the daemons here: a retry every fraction of a second, so that "said once"
# is said over many attempts.
FAST_RETRIES = {
    "oslo_messaging_rabbit__rabbit_retry_interval": 0.2,
    "oslo_messaging_rabbit__rabbit_retry_backoff": 0.2,
    "oslo_messaging_rabbit__rabbit_interval_max": 0.5,
}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Listener:
    """Listens on ``port``; each connection is passed on to ``target``, or, without one,
    held open without a word (a broker that never answers)."""

    def __init__(self, port, target=None):
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port))
        self.sockets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            self.sockets.append(client)
            if self.target is not None:
                upstream = socket.create_connection(self.target)
                self.sockets.append(upstream)
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self):
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for sock in self.sockets:
            sock.close()


def url_at(port, vhost="", password=BROKER.password):
    return f"rabbit://{BROKER.username}:{password}@127.0.0.1:{port}/{vhost}"


def cli_conf(tmp_path, transport_url):
    return write_conf(tmp_path / "cli.conf",
                      {"DEFAULT": {"transport_url": transport_url, "state_path": tmp_path / "state"}})


def berth(conf, *args):
    """Start the berth command line on ``conf``: (process, start time)."""
    proc = subprocess.Popen([sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(conf), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=conf.parent)
    return proc, time.monotonic()


def finished(proc, began, timeout=60):
    """(exit status, stderr lines, stdout, seconds taken) of a process from berth()."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.splitlines(), out, time.monotonic() - began


def test_every_command_fails_within_seconds_in_one_line_naming_the_broker(tmp_path):
    port = free_port()  # nothing listens there: connections are refused
    conf = cli_conf(tmp_path, url_at(port))
    line = (f"berth: cannot reach the message broker at rabbit://guest:***@127.0.0.1:{port}/: "
            "[Errno 111] Connection refused")
    # what starting as many commands side by side costs on this machine now, none reaching for a broker
    started = [berth(conf, "--version") for _ in COMMANDS]
    start_up = max(finished(*run)[3] for run in started)
    alone = finished(*berth(conf, "boot", "--flavor", "m1.tiny"))
    assert alone[:3] == (1, [line], "")
    started = {args: berth(conf, *args) for args in COMMANDS}  # side by side: they only wait
    results = {args: finished(*run) for args, run in started.items()}
    assert {args: result[:3] for args, result in results.items()} == dict.fromkeys(COMMANDS, (1, [line], ""))
    slowest = max(result[3] for result in results.values())
    print(f"\nberth boot refused in {alone[3]:.1f} s; {len(COMMANDS)} commands side by side in at most "
          f"{slowest:.1f} s, {len(COMMANDS)} x berth --version in {start_up:.1f} s")
    # refused at once, not after retries: no later than starting up takes, give or take the machine's
    # noise (the connect timeout, 30 s, would show)
    assert alone[3] < 15
    assert slowest < 2 * start_up + 10


def test_a_broker_that_never_answers_is_given_up_on_at_the_connect_timeout(tmp_path):
    port = free_port()
    silent = Listener(port)  # accepts, then never says a word
    try:
        conf = cli_conf(tmp_path, url_at(port))
        default = finished(*berth(conf, "hosts"))
        shorter = finished(*berth(conf, "--connect-timeout", "2", "boot", "--flavor", "m1.tiny"))
    finally:
        silent.close()
    said = f"berth: cannot reach the message broker at rabbit://guest:***@127.0.0.1:{port}/: no answer within"
    assert default[:3] == (1, [f"{said} 5 s"], "")
    assert shorter[:3] == (1, [f"{said} 2 s"], "")
    print(f"\ngave up after {default[3]:.1f} s (default) and {shorter[3]:.1f} s (--connect-timeout 2)")
    assert default[3] < 15 and shorter[3] < default[3]


def test_a_refused_login_is_said_at_once_and_stops_the_daemons(tmp_path):
    transport_url = url_at(BROKER.port, password="wrong")
    refused = (f"the message broker at {masked(transport_url)} refused the login: "
               "ACCESS_REFUSED - Login was refused")
    conf = cli_conf(tmp_path, transport_url)
    code, lines, out, took = finished(*berth(conf, "boot", "--flavor", "m1.tiny"))
    assert (code, len(lines), out) == (1, 1, "") and lines[0].startswith(f"berth: {refused}"), lines
    assert took < 10, took

    fleet = Fleet(tmp_path, f"sqlite:///{tmp_path / 'berth.sqlite'}", transport_url)
    try:
        daemons = {"pw-sched": ("berth-scheduler", fleet.start_scheduler("pw-sched")),
                   "pw-agent": ("berth-compute-agent", fleet.start_agent("pw-agent"))}
        for name, (prog, proc) in daemons.items():
            assert proc.wait(60) == 1
            log = fleet.log(name)
            assert log.splitlines()[-1].startswith(f"{prog}: cannot start: {refused}"), log
            assert "Traceback" not in log and "Waiting for the message broker" not in log
    finally:
        fleet.close()
    print(f"\nberth refused in {took:.1f} s; both daemons exited 1")


def test_a_daemon_started_before_the_broker_waits_for_it_and_starts_once_it_answers(tmp_path):
    port = free_port()
    with temporary_database() as database_url, temporary_vhost() as transport_url:
        vhost = transport_url.rsplit("/", 1)[1]
        via_port = url_at(port, vhost)
        fleet = Fleet(tmp_path, database_url, via_port, DEFAULT__debug="false", **FAST_RETRIES)
        forwarder = None
        try:
            fleet.start_scheduler("early-sched")
            fleet.start_agent("early-agent", fake_memory_mb=4096)
            waiting = (f"WARNING scheduler.rpc.transport [-] Waiting for the message broker at "
                       f"{masked(via_port)}: [Errno 111] Connection refused; retrying")
            expected = {"early-sched": waiting, "early-agent": waiting}

            def said(name, text):
                return text in fleet.log(name)

            fleet.wait(lambda: all(said(n, t) for n, t in expected.items()), 60, "both to say they wait")
            time.sleep(3)  # a dozen more attempts each
            for name, text in expected.items():
                log = fleet.log(name)
                assert log.count(text) == 1, log
                assert log.count("Waiting for the message broker") == 1, log
                assert " started " not in log and " starting " not in log, log
            fleet.check_alive()

            began = time.monotonic()
            forwarder = Listener(port, (BROKER.hostname, BROKER.port))  # the broker comes up
            connected = ("INFO scheduler.rpc.transport [-] Connected to the message broker at "
                         f"{masked(via_port)}")
            firsts = {
                "early-sched": (connected, "Scheduler early-sched started on"),
                "early-agent": (connected, "Compute agent early-agent (node"),
            }
            fleet.wait(lambda: all(said(n, s) for n, (_, s) in firsts.items()), 60, "both to start")
            took = time.monotonic() - began
            for name, (first, then) in firsts.items():
                log = fleet.log(name)
                assert first in log and log.index(first) < log.index(then), log

            fleet.wait_hosts_up(["early-agent"])
            booted = fleet.cli("boot", "--flavor", "m1.tiny", "--wait", "--timeout", "60")
            assert booted.returncode == 0, booted.stderr
            assert booted.stdout.splitlines()[1].split()[1:3] == ["ACTIVE", "early-agent"]
            assert fleet.stop("early-agent") == 0 and fleet.stop("early-sched") == 0
            print(f"\nboth connected and started {took:.1f} s after the broker came up; a boot went ACTIVE")
        finally:
            fleet.close()
            if forwarder is not None:
                forwarder.close()


def test_sigterm_stops_a_daemon_waiting_for_the_broker(tmp_path):
    refused_port, silent_port = free_port(), free_port()
    silent = Listener(silent_port)
    fleet = Fleet(tmp_path, f"sqlite:///{tmp_path / 'berth.sqlite'}", url_at(refused_port), **FAST_RETRIES)
    brokers = {"refused-sched": url_at(refused_port), "refused-agent": url_at(refused_port),
               "silent-sched": url_at(silent_port)}
    try:
        fleet.start_scheduler("refused-sched")
        fleet.start_agent("refused-agent")
        # Signalled inside an attempt of up to 5 s, on a broker that never answers.
        options = {"host": "silent-sched", "transport_url": brokers["silent-sched"]}
        silent_conf = write_conf(tmp_path / "silent.conf", {"DEFAULT": options})
        fleet._spawn("silent-sched", "scheduler.cmd.scheduler", "--config-file", str(silent_conf))
        fleet.wait(lambda: all("Waiting for the message broker" in fleet.log(n) for n in brokers), 60,
                   "all three to say they wait")
        took = {}
        for name, url in brokers.items():
            began = time.monotonic()
            assert fleet.stop(name) == 0
            took[name] = time.monotonic() - began
            log = fleet.log(name)
            assert "Received SIGTERM: draining and stopping" in log, log
            assert f"Stopped waiting for the message broker at {masked(url)}" in log, log
            assert "Traceback" not in log and " started " not in log and " starting " not in log, log
    finally:
        fleet.close()
        silent.close()
    print("\nstopped in " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in took.items()))
    assert max(took.values()) < 15


def test_with_no_scheduler_consuming_every_call_is_refused_at_once_naming_the_queue_and_broker(tmp_path):
    """A broker that answers but no scheduler: the commands that ask the scheduler something
    say so at once (rpc_response_timeout is an hour here: a wait would end the test's own
    timeout, not the command); a boot by sizes is a cast, which no queue would hold on this
    vhost where no scheduler ran: refused too (test_boot_before_any_scheduler)."""
    with temporary_vhost() as url:
        conf = write_conf(tmp_path / "cli.conf", {"DEFAULT": {
            "transport_url": url, "state_path": tmp_path / "state", "rpc_response_timeout": 3600}})
        line = (f"berth: no scheduler is consuming 'scheduler' on {masked(url)}: start berth-scheduler "
                "(or berth-all-in-one) on this transport_url")
        calls = [("instances",), ("hosts",), ("show", UUID), ("flavor", "list"),
                 ("boot", "--flavor", "m1.tiny")]
        started = {args: berth(conf, *args) for args in calls}
        results = {args: finished(*run)[:3] for args, run in started.items()}
        assert results == dict.fromkeys(calls, (1, [line], ""))
        sizes = ("--flavor-ram", "512", "--flavor-disk", "1", "--flavor-vcpus", "1")
        status, err, out, _ = finished(*berth(conf, "boot", *sizes))
        assert (status, out) == (1, "")
        assert err[0].startswith(f"berth: no scheduler queue 'scheduler' exists yet on exchange 'berth' of "
                                 f"{masked(url)} (no scheduler has run there)")
