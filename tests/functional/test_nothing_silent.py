"""Nothing silent: what Berth will not do as asked, it refuses, in one line that says why.

A scheduler and two agents as real processes on RabbitMQ and PostgreSQL, and the
`berth` command line as an operator types it.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost, write_conf

AGENTS = ("quiet-a", "quiet-b")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("silent")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp, url, transport_url, DEFAULT__debug="false")
        try:
            fleet.start_schedulers(["quiet"])
            for host in AGENTS:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=4000, fake_vcpus=64)
            fleet.wait_hosts_up(AGENTS)
            yield fleet
        finally:
            fleet.close()


def test_a_boot_larger_than_a_request_can_be_is_refused_before_anything_is_sent(fleet):
    before = fleet.instances()
    result = fleet.cli("boot", "--flavor", "m1.small", "--count", "100000")
    assert result.returncode == 2
    assert "at most 1000 instances a request (the scheduler refuses more), got 100000" in result.stderr
    assert result.stdout == ""  # no UUID printed: nothing was booted
    assert fleet.instances() == before


def test_deleting_an_instance_that_does_not_exist_says_so_and_deletes_nothing(fleet):
    booted = fleet.cli("boot", "--flavor", "m1.tiny", "--wait")
    [uuid] = [line.split()[0] for line in booted.stdout.splitlines()[1:]]
    unknown = "00000000-0000-4000-8000-000000000000"
    for wait in ([], ["--wait"]):
        result = fleet.cli("delete", uuid, unknown, *wait, timeout=30)
        assert result.returncode == 1
        assert result.stderr.strip() == f"berth: No instance {unknown}; nothing deleted"
    assert fleet.instances([uuid])[uuid]["state"] == "ACTIVE"
    assert fleet.cli("delete", uuid, "--wait").returncode == 0
    again = fleet.cli("delete", uuid)
    assert (again.returncode, again.stdout.strip()) == (0, f"{uuid} deleted already")


def test_a_listing_cut_short_by_its_reader_ends_quietly(fleet):
    fleet.cli("boot", "--flavor", "m1.tiny", "--count", "50", "--wait")
    command = [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(fleet.conf_file), "instances"]
    listing = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=fleet.tmp)
    first = listing.stdout.readline()
    listing.stdout.close()  # as `| head -1` does
    errors = listing.stderr.read().decode()
    assert listing.wait(30) == 0
    assert first.startswith(b"UUID")
    assert errors == ""


@pytest.mark.parametrize("program", ["scheduler.cmd.scheduler", "compute_agent.cmd.agent",
                                     "scheduler.cmd.all_in_one", "scheduler.cmd.cli"])
def test_an_unknown_transport_is_one_line(tmp_path, program):
    conf = write_conf(tmp_path / "bad.conf", {"DEFAULT": {"transport_url": "amqp2://u:secret@x",
                                                          "state_path": tmp_path}})
    extra = ["hosts"] if program.endswith("cli") else []
    result = subprocess.run([sys.executable, "-m", program, "--config-file", str(conf), *extra],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert line.endswith("invalid configuration: transport_url 'amqp2://u:***@x' is not supported; "
                         "use one of rabbit://, amqp://, amqps://, filesystem://, memory://")


def test_a_postgresql_url_without_its_driver_says_which_extra_to_install(tmp_path):
    stub = tmp_path / "no-driver"
    stub.mkdir()
    (stub / "psycopg2.py").write_text("raise ImportError('No module named psycopg2')\n")
    conf = write_conf(tmp_path / "pg.conf", {
        "DEFAULT": {"transport_url": "memory://", "state_path": tmp_path},
        "database": {"connection": "postgresql+psycopg2://berth:secret@127.0.0.1/berth"}})
    result = subprocess.run([sys.executable, "-m", "scheduler.cmd.scheduler", "--config-file", str(conf)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={"PYTHONPATH": str(stub), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line == ("berth-scheduler: cannot start: database URL "
                    "'postgresql+psycopg2://berth:***@127.0.0.1/berth' needs the psycopg2 driver, which is "
                    "not installed (No module named psycopg2); "
                    "install it with: pip install 'berth[postgresql]'")


def _newcomer(tmp_path):
    """The environment of a shell of a newcomer whose state is in tmp_path/xdg/berth."""
    # Not under systemd, even if this test runs in a systemd service: state goes to XDG's place.
    return {**{k: v for k, v in os.environ.items() if k not in ("INVOCATION_ID", "NOTIFY_SOCKET")},
            "XDG_STATE_HOME": str(tmp_path / "xdg")}


def _demo(tmp_path, slow=False):
    """berth-all-in-one --demo on its defaults, with its state in tmp_path (builds of 5 s if slow)."""
    conf = write_conf(tmp_path / "slow.conf", {"compute_agent": {"fake_build_time": 5}})
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cmd.all_in_one", "--demo", *(["--config-file", str(conf)] * slow)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_newcomer(tmp_path))


def _berth(tmp_path, *args):
    """``berth ARGS`` as the newcomer types it, on the embedded defaults."""
    return subprocess.run([sys.executable, "-m", "scheduler.cmd.cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=_newcomer(tmp_path), timeout=120)


class _AllInOne:
    """``berth-all-in-one --agents 2`` as the newcomer runs it, until stopped with Ctrl-C."""

    HOSTS = 2

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.log = (tmp_path / "operator.log").open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cmd.all_in_one", "--agents", str(self.HOSTS)],
            stdout=self.log, stderr=self.log, cwd=tmp_path, env=_newcomer(tmp_path))
        deadline = time.monotonic() + 60
        while _berth(tmp_path, "hosts", "-f", "value", "-c", "state").stdout.split().count("up") < self.HOSTS:
            assert time.monotonic() < deadline and self.process.poll() is None, "the operator's agents"
            time.sleep(0.5)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        assert self.process.wait(60) == 0
        self.log.close()


def _shown(tmp_path, name):
    shown = _berth(tmp_path, "show", name, "-f", "value", "-c", "state", "-c", "host")
    return shown.returncode, shown.stdout.split()


def test_the_demo_keeps_what_the_operator_booted_on_the_same_hosts(tmp_path):
    """An instance booted with berth-all-in-one --agents 2 on the embedded defaults (state, host
    names vm-compute-1 and -2 the demo's too) outlives a demo run beside that all-in-one, and
    another run once it stopped; both demos place their workload as ever."""
    operator = _AllInOne(tmp_path)
    try:
        booted = _berth(tmp_path, "boot", "--flavor", "m1.small", "--name", "keep-me", "--wait")
        assert booted.returncode == 0, booted.stderr
        status, (state, host) = _shown(tmp_path, "keep-me")
        assert state == "ACTIVE"
        started = time.monotonic()
        beside = _demo(tmp_path)
        out, err = beside.communicate(timeout=180)
        print(f"\ndemo beside a running berth-all-in-one: {time.monotonic() - started:.1f} s")
        assert beside.returncode == 0, err[-2000:]
        assert "28 of 28 ACTIVE; all deleted again." in out and "earlier run" not in out
        assert _shown(tmp_path, "keep-me") == (0, ["ACTIVE", host])
    finally:
        operator.stop()

    started = time.monotonic()
    after = _demo(tmp_path)
    out, err = after.communicate(timeout=180)
    print(f"demo after it stopped: {time.monotonic() - started:.1f} s")
    assert after.returncode == 0, err[-2000:]
    assert "28 of 28 ACTIVE; all deleted again." in out and "earlier run" not in out
    assert err == ""
    operator = _AllInOne(tmp_path)
    try:
        assert _shown(tmp_path, "keep-me") == (0, ["ACTIVE", host])
        listed = _berth(tmp_path, "hosts", "-f", "value", "-c", "host", "-c", "instances").stdout.split()
        counts = dict(zip(listed[::2], listed[1::2], strict=True))
        assert counts == {h: "1" if h == host else "0" for h in counts} and len(counts) == 2
    finally:
        operator.stop()
    assert not list((tmp_path / "xdg" / "berth").glob("demo-*"))  # each demo removed its own state


def test_one_ctrl_c_stops_the_demo_cleanly_and_the_next_demo_starts_clean(tmp_path):
    """On the embedded default (filesystem:// and SQLite), as a newcomer runs it."""
    state = tmp_path / "xdg" / "berth"
    demo = _demo(tmp_path, slow=True)
    deadline = time.monotonic() + 60
    while not any(_count(database, "SELECT count(*) FROM instances") >= 28
                  for database in state.glob("demo-*/berth.sqlite")):  # the demo's own state
        assert time.monotonic() < deadline and demo.poll() is None, demo.communicate()
        time.sleep(0.2)
    demo.send_signal(signal.SIGINT)
    time.sleep(0.3)
    demo.send_signal(signal.SIGINT)  # impatient: a second Ctrl-C
    out, err = demo.communicate(timeout=90)
    assert demo.returncode == 130
    assert "interrupted: deleting the 29 instance(s) the demo booted, then stopping" in err
    assert "Traceback" not in err
    assert not list(state.glob("demo-*"))  # its state removed with what it booted

    again = _demo(tmp_path)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err[-2000:]
    assert "28 of 28 ACTIVE; all deleted again." in out
    log = tmp_path / "xdg" / "berth" / "berth-all-in-one.log"
    assert out.endswith(f"The log of this run is in {log}.\n") and "Placed instance" in log.read_text()
    assert err == ""  # the results on standard output, the log in its file

    cut = _demo(tmp_path)  # as `berth-all-in-one --demo | head -3`
    first = [cut.stdout.readline() for _ in range(3)]
    cut.stdout.close()
    err = cut.stderr.read()
    assert cut.wait(120) == 0
    assert first[0].startswith("Booted 28 instances on 4 fake hosts, and 1 too big for any of them")
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert not list(state.glob("demo-*"))


def _count(path, query):
    import sqlite3

    try:  # read only: a database not created yet, or removed since, is not made again here
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute(query).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_sighup_opens_the_log_file_again_and_stops_nothing(tmp_path):
    # A fleet of its own: the stopped agent would stay "up" for service_down_time in another's.
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false")
        try:
            logs = {name: tmp_path / f"{name}.log" for name in ("hup-sched", "hup-agent")}
            conf = write_conf(tmp_path / "hup-sched.conf",
                              {"DEFAULT": {"host": "hup-sched", "log_file": logs["hup-sched"]}})
            fleet._spawn("hup-sched", "scheduler.cmd.scheduler", "--config-file", str(conf))
            fleet.start_agent("hup-agent", default={"log_file": logs["hup-agent"]}, fake_memory_mb=4096)

            def logged(text):
                return all(log.exists() and text in log.read_text() for log in logs.values())

            fleet.wait(lambda: logged("start"), 60, "both to start")  # "started", "starting"
            for name, log in logs.items():
                log.rename(log.with_suffix(".log.1"))  # what logrotate does
                fleet.processes[name].send_signal(signal.SIGHUP)
            fleet.wait(lambda: logged("Received SIGHUP: log file opened again"), 30,
                       "both to log into new files")
            fleet.wait_hosts_up(["hup-agent"])
            booted = fleet.cli("boot", "--flavor", "m1.tiny", "--wait")
            assert booted.returncode == 0, booted.stderr
            assert fleet.stop("hup-sched") == 0 and fleet.stop("hup-agent") == 0
        finally:
            fleet.close()


def _boot(fleet, *args):
    result = fleet.cli("boot", "--flavor", "m1.tiny", "--wait", "--timeout", "60", *args)
    rows = [line.split(None, 6) for line in result.stdout.splitlines()[1:]]
    return result, [(row[1], row[2], row[6] if len(row) > 6 else "") for row in rows]


def test_at_the_defaults_every_hint_and_policy_the_cli_accepts_is_honoured(fleet):
    made = fleet.cli("server-group", "create", "--policy", "anti-affinity", "web",
                     "-f", "value", "-c", "uuid")
    group = made.stdout.strip().split()[0]
    spread, rows = _boot(fleet, "--count", "2", "--hint", f"group={group}")
    assert spread.returncode == 0 and sorted(host for _, host, _ in rows) == sorted(AGENTS)
    one_more, rows = _boot(fleet, "--hint", f"group={group}")  # two hosts, both taken
    assert one_more.returncode == 1
    assert rows[0][0] == "ERROR" and "ServerGroupAntiAffinityFilter removed 2" in rows[0][2]

    cases = {
        ("--availability-zone", "nosuchaz"): "AvailabilityZoneFilter removed 2",
        ("--hint", 'query=["frobnicate", "$free_ram_mb", 1]'): "Request refused: JsonFilter: scheduler hint "
                                                              "query: unknown operator",
        ("--hint", 'query=[">=", "$free_ram_mb"'): "Request refused: JsonFilter: scheduler hint query: "
                                                   "query is not JSON",
        ("--hint", "colour=blue"): "Request refused: no installed filter or weigher reads scheduler hint "
                                   "colour; leave it out",
    }
    for args, reason in cases.items():
        result, rows = _boot(fleet, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert rows[0][0] == "ERROR" and reason in rows[0][2], (args, rows)
    # An instance hint naming none is refused by berth itself, before anything is booted (sent by
    # another client, the scheduler puts the request in ERROR: tests/unit/admin/test_grouping.py).
    gone = "00000000-0000-4000-8000-000000000000"
    for key in ("same_host", "different_host"):
        result, rows = _boot(fleet, "--hint", f"{key}={gone}")
        assert (result.returncode, rows) == (1, []), (key, result.stdout, result.stderr)
        assert f"berth: --hint {key}={gone}: no instance named or with UUID {gone}" in result.stderr


def test_an_aggregate_change_reaches_every_scheduler_before_the_reply(tmp_path):
    # Two schedulers whose periodic reload would come only after the test: what they know of
    # a change made through the other one, they know from its announcement.
    hosts = ("zoned-a", "zoned-b")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, DEFAULT__debug="false", scheduler__periodic_interval=3600)
        try:
            fleet.start_schedulers(["zs1", "zs2"])
            for host in hosts:
                fleet.start_agent(host, fake_memory_mb=65536, fake_local_gb=4000, fake_vcpus=64)
            fleet.wait_hosts_up(hosts)
            peers = {name: fleet.scheduler_client(name) for name in ("zs1", "zs2")}
            for round_, host in enumerate(hosts * 4):
                zone, aggregate = f"az-{round_}", f"agg-{round_}"
                changer = ("zs1", "zs2")[round_ % 2]
                peers[changer].call({}, "create_aggregate", name=aggregate, availability_zone=zone)
                peers[changer].call({}, "aggregate_add_host", name=aggregate, host=host)
                # At once, on both: the host's zone as each scheduler's filters see it.
                for name, peer in peers.items():
                    seen = {h["host"]: h["availability_zone"] for h in peer.call({}, "list_hosts")}
                    assert seen[host] == zone, (round_, name, seen)
                booted, rows = _boot(fleet, "--availability-zone", zone)
                assert booted.returncode == 0 and rows[0][:2] == ("ACTIVE", host), (round_, booted.stdout)
                fleet.cli("delete", "--wait", booted.stdout.splitlines()[1].split()[0])
                peers[changer].call({}, "aggregate_remove_host", name=aggregate, host=host)
                peers[changer].call({}, "delete_aggregate", name=aggregate)
            for name in ("zs1", "zs2"):
                assert "Aggregates changed through scheduler" in fleet.log(name)
        finally:
            fleet.close()
