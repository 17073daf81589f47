"""Real guests: a scheduler and two agents with driver = qemu on the real RabbitMQ and
PostgreSQL, booting the test image of tools/build-guest-image with `berth server create`.

- Each guest goes ACTIVE once it runs, and its serial console says the image's marker, its root
  disk of the flavor's size and, when the flavor has one, its ephemeral disk.
- `berth server delete` ends the guest's qemu and removes its files.
- An agent killed with SIGKILL leaves its guests running; started again, it takes them back:
  they stay ACTIVE, and a delete then still ends their qemu.
- A build of an image that does not exist fails with that reason and leaves no qemu and no file.
- A guest whose qemu is killed while its agent runs goes to ERROR, saying its guest is gone;
  `berth server reboot --hard` boots it again from its own disk.
- `berth server stop` shuts a guest down (its qemu ends, its disk stays), `berth server start` and
  `berth server reboot [--hard]` boot it again from its own disk (the boot counter the image keeps
  on it goes on), and `berth console log show` shows its serial console.
- A guest that powers itself off is SHUTOFF (its qemu ended, its disk kept), and `berth server start` boots
  it again from its disk.
- A scaling group's member's CPU and memory, measured by its agent, are stored as its samples
  (`berth server metric show`): the memory its guest touched, at most its flavor's.
- `berth server migrate --live` moves a guest to the other host running: its console goes on counting
  there, it does not boot again, and the source lets its qemu and files go; `berth server migration list`
  shows its downtime (under a second) and transfer time as its source's qemu measured them. With
  its source agent SIGKILLed in the middle and started again, it ends the same way, one guest running.
- `berth host drain HOST --live` moves a host's three guests off it, each running on.
- `berth server resize` to a larger flavor boots the guest on the other host (a qemu host resizes
  nothing in place) from a copy of its disk (its boot counter goes on) with the new memory and
  disk; `--revert` boots it again on its own host from its own disk. `berth server migrate` (cold)
  moves it the same way, and the source lets its qemu and files go.
- `berth host evacuate` of a host whose agent and guests were killed rebuilds its guest on the
  other host from its image: a new disk (its boot counter starts again), as the command says.

The guests share one fleet (the tests run in this order), 128 MB each.
"""

import datetime
import json
import re
import signal

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.guests.guests import (
    MARKER,
    console,
    files,
    files_left,
    kill_leftovers,
    qemu_processes,
    state_path,
)

HOSTS = ("guests-1", "guests-2")
#: A flavor small enough that four guests and their qemu fit in a CI machine (about 200 MB each).
FLAVOR = ("--flavor-ram", "128", "--flavor-disk", "1", "--flavor-vcpus", "1")
#: Each agent reports a host of this size, whatever the machine's.
AGENT = {"report_interval": 2}
QEMU = {"memory_mb": 2048, "local_gb": 20, "vcpus": 4, "kvm_probe_timeout": 3,
        "default_image": "berth-test"}  # a scaling group's members name no image
#: Guests boot under TCG in seconds alone, slower when four share two cores.
BOOT_TIMEOUT = 180


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, guest_image):
    tmp_path = tmp_path_factory.mktemp("guests")
    booted = []
    with temporary_database() as url, temporary_vhost() as transport_url:
        options = {f"qemu__{name}": value for name, value in {**QEMU, "images_path": guest_image}.items()}
        # One attempt: a failed build's fault then says the agent's reason (after the retries, the
        # scheduler's "No valid host was found" would not).
        # A killed agent's host is down within 20 s (for the evacuation), reports coming every 2 s.
        fleet = Fleet(tmp_path, url, transport_url, compute_agent__driver="qemu", scheduler__max_attempts=1,
                      scheduler__service_down_time=20, **options)
        fleet.booted = booted
        try:
            fleet.start_schedulers(["sched"])
            for host in HOSTS:
                start_agent(fleet, host)
            fleet.wait_hosts_up(HOSTS, timeout=90)
            yield fleet
        finally:
            fleet.close()
            kill_leftovers(booted)


def start_agent(fleet, host, qemu=None):
    return fleet.start_agent(host, default={"state_path": state_path(fleet, host)},
                             sections={"qemu": qemu} if qemu else None, **AGENT)


def berth(fleet, *args):
    done = fleet.cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def boot(fleet, count, image="berth-test", flavor=FLAVOR):
    uuids = berth(fleet, "boot", *flavor, "--image", image, "--count", str(count)).split()
    fleet.booted.extend(uuids)
    return uuids


def delete(fleet, *uuids):
    berth(fleet, "delete", *uuids)
    return fleet.wait_states(list(uuids), ("DELETED",), timeout=60)


def _seconds(row):
    try:
        return (datetime.datetime.fromisoformat(str(row["launched_at"]))
                - datetime.datetime.fromisoformat(str(row["created_at"]))).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def test_each_agent_says_which_accelerator_its_guests_run_under(fleet):
    for host in HOSTS:
        assert re.search(r"Guests run under (KVM|TCG) \(auto: ", fleet.log(host)), fleet.log(host)[-2000:]


def test_booted_guests_are_active_and_say_their_marker_on_their_console(fleet):
    berth(fleet, "flavor", "create", "guest.ephemeral", "--ram", "128", "--disk", "1", "--vcpus", "1",
          "--ephemeral", "1")
    plain = boot(fleet, 2)
    ephemeral = boot(fleet, 2, flavor=("--flavor", "guest.ephemeral"))
    uuids = plain + ephemeral
    rows = fleet.wait_states(uuids, ("ACTIVE", "ERROR"), timeout=BOOT_TIMEOUT)
    assert {u: r["state"] for u, r in rows.items()} == dict.fromkeys(uuids, "ACTIVE"), \
        {u: r.get("fault_reason") for u, r in rows.items()}
    for uuid in uuids:
        assert MARKER in console(fleet, rows[uuid]["host"], uuid)
        host = rows[uuid]["host"]
        fleet.wait(lambda u=uuid, h=host: "alive 1" in console(fleet, h, u), 60, "the guest to say its disks")
        said = console(fleet, host, uuid)
        assert "berth-guest: disk vda 1024 MB, boot 1" in said, said
        # The flavor's ephemeral disk is the guest's second disk.
        assert ("berth-guest: disk vdb 1024 MB" in said) == (uuid in ephemeral), said
        assert len(qemu_processes(uuid)) == 1
    print("\nboot to ACTIVE: " + ", ".join(
        f"{rows[u]['host']} {_seconds(rows[u]) or '?'} s" for u in uuids))


def test_a_deleted_guests_qemu_ends_and_its_files_go(fleet):
    [uuid] = boot(fleet, 1)
    host = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]
    assert qemu_processes(uuid) and files_left(fleet, HOSTS, uuid) == [host]
    delete(fleet, uuid)
    assert qemu_processes(uuid) == []
    assert files_left(fleet, HOSTS, uuid) == []


def test_guests_outlive_a_killed_agent_which_takes_them_back_when_started_again(fleet):
    active = {u: r["host"] for u, r in fleet.instances(fleet.booted).items() if r["state"] == "ACTIVE"}
    host = HOSTS[0] if list(active.values()).count(HOSTS[0]) else HOSTS[1]
    guests = sorted(u for u, h in active.items() if h == host)
    assert guests, f"no guest on either host: {active}"
    pids = {u: [p.pid for p in qemu_processes(u)] for u in guests}

    fleet.stop(host, signal.SIGKILL)
    assert {u: [p.pid for p in qemu_processes(u)] for u in guests} == pids
    start_agent(fleet, host)
    fleet.wait(lambda: all(f"Re-attached to the guest of {u}" in fleet.log(host) for u in guests), 90,
               f"{host} to take its guests back")
    fleet.wait_hosts_up([host], timeout=60)

    rows = fleet.instances(guests)
    assert {u: (r["state"], r["host"]) for u, r in rows.items()} == dict.fromkeys(guests, ("ACTIVE", host))
    assert {u: [p.pid for p in qemu_processes(u)] for u in guests} == pids
    delete(fleet, guests[0])
    assert qemu_processes(guests[0]) == []
    assert files_left(fleet, HOSTS, guests[0]) == []


def test_a_guest_killed_while_its_agent_runs_is_in_error_saying_so(fleet):
    [uuid] = boot(fleet, 1)
    host = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]
    fleet.wait(lambda: "berth-guest: alive 1" in console(fleet, host, uuid), 60, "the guest to count")
    [process] = qemu_processes(uuid)
    process.kill()
    row = fleet.wait_states([uuid], ("ERROR",), timeout=60)[uuid]
    assert row["host"] == host
    assert "its guest is gone (no qemu with pid" in (row["fault_reason"] or ""), row
    assert "berth-guest: alive" in row["fault_reason"]  # its console's last lines

    berth(fleet, "reboot", uuid, "--hard", "--wait", "--timeout", str(BOOT_TIMEOUT))  # as Nova's, from ERROR
    assert fleet.instances([uuid])[uuid]["state"] == "ACTIVE" and len(qemu_processes(uuid)) == 1
    fleet.wait(lambda: ", boot 2" in console(fleet, host, uuid), 60, "its second boot, from its own disk")
    delete(fleet, uuid)
    assert files_left(fleet, HOSTS, uuid) == []


def test_a_guest_stopped_started_and_rebooted_boots_again_from_its_own_disk(fleet):
    [uuid] = boot(fleet, 1)
    host = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]

    def booted(count):  # the image counts its boots on its disk, just after its marker
        fleet.wait(lambda: f", boot {count}" in console(fleet, host, uuid), 60, f"the guest's boot {count}")

    booted(1)

    berth(fleet, "stop", uuid, "--wait", "--timeout", "120")
    assert fleet.instances([uuid])[uuid]["state"] == "SHUTOFF"
    assert "berth-guest: power button: shutting down" in console(fleet, host, uuid)  # not killed
    assert qemu_processes(uuid) == [] and files_left(fleet, HOSTS, uuid) == [host]
    berth(fleet, "start", uuid, "--wait", "--timeout", str(BOOT_TIMEOUT))
    assert fleet.instances([uuid])[uuid]["state"] == "ACTIVE" and len(qemu_processes(uuid)) == 1
    booted(2)
    before = qemu_processes(uuid)[0].pid
    berth(fleet, "reboot", uuid, "--hard", "--wait", "--timeout", str(BOOT_TIMEOUT))
    [after] = qemu_processes(uuid)
    assert fleet.instances([uuid])[uuid]["state"] == "ACTIVE" and after.pid != before
    booted(3)

    shown = berth(fleet, "console-log", uuid, "--lines", "500").splitlines()
    assert sum(MARKER in line for line in shown) == 3, shown[-10:]
    assert [line for line in shown if ", boot " in line][-1].endswith("boot 3")
    delete(fleet, uuid)
    assert qemu_processes(uuid) == [] and files_left(fleet, HOSTS, uuid) == []


def test_a_guest_that_powers_itself_off_is_shutoff_and_starts_again(fleet, guest_image):
    test = json.loads((guest_image / "berth-test.json").read_text())
    (guest_image / "powers-off.json").write_text(json.dumps(
        dict(test, name="powers-off", os_command_line=f"{test['os_command_line']} berth.poweroff=3")))
    [uuid] = boot(fleet, 1, image="powers-off")
    row = fleet.wait_states([uuid], ("SHUTOFF", "ERROR"), timeout=BOOT_TIMEOUT)[uuid]
    assert row["state"] == "SHUTOFF", row
    assert "berth-guest: powering off" in console(fleet, row["host"], uuid)
    assert qemu_processes(uuid) == [] and files_left(fleet, HOSTS, uuid) == [row["host"]]
    assert f"Instance {uuid} on {row['host']}: its guest powered itself off" in fleet.log(row["host"])

    berth(fleet, "start", uuid, "--wait", "--timeout", str(BOOT_TIMEOUT))
    fleet.wait(lambda: ", boot 2" in console(fleet, row["host"], uuid), 60, "its second boot, from its disk")
    delete(fleet, uuid)
    assert qemu_processes(uuid) == [] and files_left(fleet, HOSTS, uuid) == []


def test_a_scaling_members_measured_cpu_and_memory_are_its_samples(fleet):
    group = berth(fleet, "scaling-group", "create", "guests", *FLAVOR, "--min", "1", "--max", "2",
                  "--cpu", "50", "-f", "value", "-c", "uuid").split()[-1]

    def member():
        members = fleet.client.admin_call({}, "show_scaling_group", name_or_uuid=group)["members"]
        active = [m for m in members if m["state"] == "ACTIVE"]
        return active[0]["uuid"] if active else None

    uuid = fleet.wait(member, BOOT_TIMEOUT, "the group's member ACTIVE")
    fleet.booted.append(uuid)

    def measured():
        shown = json.loads(berth(fleet, "instance-metric", "show", uuid, "-f", "json"))
        found = {row["NAME"]: float(row["VALUE"]) for row in shown if row["SOURCE"] == "agent"}
        return found if {"cpu", "memory"} <= set(found) else None

    samples = fleet.wait(measured, 60, "the member's cpu and memory samples from its agent")
    # The test image's busybox and kernel touch a few MB of the 128 MB; qemu's own memory is not counted.
    assert 1.0 < samples["memory"] <= 128.0 and samples["cpu"] >= 0.0, samples
    print(f"\nmeasured: {uuid[:8]} {samples['memory']:g} MB, cpu {samples['cpu']:g}")
    berth(fleet, "scaling-group", "delete", group)
    fleet.wait_states([uuid], ("DELETED",), timeout=120)


def test_a_build_of_an_image_that_does_not_exist_fails_saying_so_and_leaves_nothing(fleet):
    [uuid] = boot(fleet, 1, image="no-such-image")
    rows = fleet.wait_states([uuid], ("ERROR", "ACTIVE"), timeout=120)
    assert rows[uuid]["state"] == "ERROR"
    assert "no image no-such-image in" in (rows[uuid]["fault_reason"] or ""), rows[uuid]
    assert qemu_processes(uuid) == []
    assert files_left(fleet, HOSTS, uuid) == []


def test_a_guest_migrated_live_runs_on_the_other_host_without_booting_again(fleet):
    [uuid] = boot(fleet, 1)
    source = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]
    [destination] = [host for host in HOSTS if host != source]
    fleet.wait(lambda: "berth-guest: alive 2" in console(fleet, source, uuid), 60, "the guest to count")

    berth(fleet, "migrate", uuid, "--live")
    fleet.wait(lambda: fleet.instances([uuid])[uuid]["host"] == destination
               and fleet.instances([uuid])[uuid]["state"] == "ACTIVE", 120, f"{uuid} ACTIVE on {destination}")
    fleet.wait(lambda: "berth-guest: alive" in console(fleet, destination, uuid), 60,
               "the guest to count on its destination")
    fleet.wait(lambda: files_left(fleet, HOSTS, uuid) == [destination], 60, "the source to let the guest go")

    assert MARKER not in console(fleet, destination, uuid)  # the same guest, not booted again
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, destination, uuid).read_pid()
    # What its source's qemu measured, as berth shows it: the guest paused well under a second.
    [shown] = json.loads(berth(fleet, "migrations", "--instance", uuid, "-f", "json", "-c", "kind",
                               "-c", "status", "-c", "downtime", "-c", "transfer"))
    assert (shown["KIND"], shown["STATUS"]) == ("live-migration", "completed")
    # qemu counts whole milliseconds: a switch-over under one is 0 (seen on a quiet machine)
    assert 0 <= shown["DOWNTIME"] < 1 and shown["DOWNTIME"] <= shown["TRANSFER"]
    print(f"\nlive migration {source} -> {destination}: "
          + (re.findall(r"Migrated \S+ to \S+: ([^\n]*)", fleet.log(source)) or ["?"])[-1])
    delete(fleet, uuid)
    assert qemu_processes(uuid) == []


def test_a_live_migration_whose_source_agent_is_killed_midway_ends_with_one_guest_on_its_destination(fleet):
    [uuid] = boot(fleet, 1)
    source = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]
    [destination] = [host for host in HOSTS if host != source]
    fleet.wait(lambda: "berth-guest: alive 2" in console(fleet, source, uuid), 60, "the guest to count")
    # 4 MiB/s: the guest's memory takes seconds to go, long enough to kill its agent in the middle.
    slow = {"live_migration_bandwidth": 4}
    fleet.stop(source)
    start_agent(fleet, source, qemu=slow)
    fleet.wait_hosts_up([source], timeout=60)

    berth(fleet, "migrate", uuid, "--live")
    fleet.wait(lambda: f"Migrating {uuid} out of {source}" in fleet.log(source)
               and len(qemu_processes(uuid)) == 2, 120, "the migration to begin")
    fleet.stop(source, signal.SIGKILL)
    assert fleet.instances([uuid])[uuid]["host"] == source  # killed before the move ended
    start_agent(fleet, source, qemu=slow)

    fleet.wait(lambda: fleet.instances([uuid])[uuid]["host"] == destination
               and fleet.instances([uuid])[uuid]["state"] == "ACTIVE", 180, f"{uuid} ACTIVE on {destination}")
    fleet.wait(lambda: files_left(fleet, HOSTS, uuid) == [destination], 60, "the source to let the guest go")
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, destination, uuid).read_pid()
    counted = console(fleet, destination, uuid).count("berth-guest: alive")
    fleet.wait(lambda: console(fleet, destination, uuid).count("berth-guest: alive") > counted, 60,
               "the guest to go on counting on its destination")
    assert MARKER not in console(fleet, destination, uuid)  # the same guest, not booted again
    assert f"Migrated {uuid} to" in fleet.log(source)  # the restarted agent saw the migration through
    print(f"\nlive migration {source} -> {destination}, its source agent killed midway: "
          + (re.findall(r"Migrated \S+ to \S+: ([^\n]*)", fleet.log(source)) or ["?"])[-1])
    delete(fleet, uuid)
    assert qemu_processes(uuid) == []
    # The source's agent as the fleet started it: at 4 MiB/s, the drain below would take a minute more.
    fleet.stop(source)
    last_report = fleet.hosts()[source]["reported_at"]
    start_agent(fleet, source)
    fleet.wait(lambda: fleet.hosts()[source]["reported_at"] != last_report, 60, f"{source} to report again")


def test_a_host_drained_live_moves_its_three_guests_running(fleet):
    host, other = HOSTS
    berth(fleet, "host", "disable", other)
    guests = boot(fleet, 3)
    rows = fleet.wait_states(guests, ("ACTIVE",), timeout=BOOT_TIMEOUT)
    berth(fleet, "host", "enable", other)
    assert {u: r["host"] for u, r in rows.items()} == dict.fromkeys(guests, host)
    for uuid in guests:
        fleet.wait(lambda u=uuid: "berth-guest: alive 1" in console(fleet, host, u), 60, "the guest to count")

    drained = berth(fleet, "host", "drain", host, "--live")
    assert f"host {host} is empty" in drained, drained
    rows = fleet.instances(guests)
    assert {r["state"] for r in rows.values()} == {"ACTIVE"}
    assert host not in {r["host"] for r in rows.values()}
    for uuid, row in rows.items():
        now = row["host"]
        fleet.wait(lambda u=uuid, h=now: files_left(fleet, HOSTS, u) == [h], 60, "the source to let go")
        [process] = qemu_processes(uuid)
        assert process.pid == files(fleet, now, uuid).read_pid()
        fleet.wait(lambda u=uuid, h=now: "berth-guest: alive" in console(fleet, h, u), 60,
                   "the guest to count on its destination")
        assert MARKER not in console(fleet, now, uuid)  # moved running, not booted again
    berth(fleet, "host", "enable", host)
    delete(fleet, *guests)
    assert {u: qemu_processes(u) for u in guests} == dict.fromkeys(guests, [])


@pytest.fixture(scope="module")
def cold_guest(fleet):
    """One guest the cold moves below take from host to host: {"uuid", "host"}."""
    [uuid] = boot(fleet, 1)
    host = fleet.wait_states([uuid], ("ACTIVE",), timeout=BOOT_TIMEOUT)[uuid]["host"]
    return {"uuid": uuid, "host": host}


def _boot_line(fleet, host, uuid, count):
    """The line of boot ``count`` on the console of ``uuid`` on ``host`` once it says it."""
    def said():
        lines = [line.rstrip() for line in console(fleet, host, uuid).splitlines()]
        return next((line for line in lines if line.endswith(f", boot {count}")), None)
    return fleet.wait(said, BOOT_TIMEOUT, f"the guest's boot {count} on {host}")


def _memory_kb(fleet, host, uuid):
    """The memory the guest's kernel said it has at its last boot on ``host``."""
    return int(re.findall(rf"{MARKER} .*, (\d+) kB", console(fleet, host, uuid))[-1])


def _moved(fleet, uuid, host, states=("ACTIVE",)):
    def there():
        row = fleet.instances([uuid])[uuid]
        return row if row["host"] == host and row["state"] in states else None
    return fleet.wait(there, BOOT_TIMEOUT, f"{uuid} {' or '.join(states)} on {host}")


def test_a_resize_boots_the_guest_on_the_other_host_from_its_disk_and_a_revert_on_its_own(fleet, cold_guest):
    uuid, source = cold_guest["uuid"], cold_guest["host"]
    [destination] = [host for host in HOSTS if host != source]
    assert "disk vda 1024 MB" in _boot_line(fleet, source, uuid, 1)
    memory = _memory_kb(fleet, source, uuid)

    berth(fleet, "resize", uuid, "--flavor-ram", "256", "--flavor-disk", "2", "--flavor-vcpus", "1")
    row = _moved(fleet, uuid, destination, ("VERIFY_RESIZE", "ERROR"))
    assert (row["state"], row["memory_mb"], row["root_gb"]) == ("VERIFY_RESIZE", 256, 2), row
    # Its disk copied, at the new size: the counter on it goes on.
    assert "disk vda 2048 MB" in _boot_line(fleet, destination, uuid, 2)
    assert _memory_kb(fleet, destination, uuid) > memory + 100 * 1024  # 128 MB more
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, destination, uuid).read_pid()
    assert sorted(files_left(fleet, HOSTS, uuid)) == sorted(HOSTS)  # the source's disk kept for a revert

    berth(fleet, "resize", uuid, "--revert")
    row = _moved(fleet, uuid, source)
    assert row["memory_mb"] == 128
    # Its own disk, as it was before the resize: the boot on the destination is not on it.
    assert "disk vda 1024 MB" in _boot_line(fleet, source, uuid, 2)
    fleet.wait(lambda: files_left(fleet, HOSTS, uuid) == [source], 60, "the destination to let the guest go")
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, source, uuid).read_pid()
    assert _memory_kb(fleet, source, uuid) == memory


def test_a_cold_migration_boots_the_guest_on_the_other_host_from_its_disk_and_the_source_lets_go(
        fleet, cold_guest):
    uuid, source = cold_guest["uuid"], cold_guest["host"]
    [destination] = [host for host in HOSTS if host != source]
    berth(fleet, "migrate", uuid)
    # A migration ends once the destination runs the guest (no confirmation, unlike a resize).
    row = _moved(fleet, uuid, destination)
    assert (row["move_host"], row["memory_mb"]) == (None, 128)
    assert "disk vda 1024 MB" in _boot_line(fleet, destination, uuid, 3)
    fleet.wait(lambda: files_left(fleet, HOSTS, uuid) == [destination], 60, "the source to let the guest go")
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, destination, uuid).read_pid()
    kinds = {m["kind"]: m["status"] for m in fleet.client.list_migrations({}, instance_uuid=uuid)}
    assert kinds == {"resize": "reverted", "migration": "completed"}
    cold_guest["host"] = destination


def test_an_evacuated_guest_is_rebuilt_on_the_other_host_from_its_image(fleet, cold_guest):
    uuid, dead = cold_guest["uuid"], cold_guest["host"]
    [other] = [host for host in HOSTS if host != dead]
    # Alone on its host: each guest evacuated costs a boot.
    others = [u for u, r in fleet.instances(fleet.booted).items()
              if u != uuid and r["host"] == dead and r["state"] != "DELETED"]
    if others:
        delete(fleet, *others)

    fleet.stop(dead, signal.SIGKILL)
    [process] = qemu_processes(uuid)
    process.kill()
    fleet.wait(lambda: fleet.hosts()[dead]["state"] == "down", 60, f"{dead} to be down")
    said = berth(fleet, "host", "evacuate", dead)
    assert uuid in said
    assert (f"evacuated instances are rebuilt from their image on their new host: what their disks on {dead} "
            "held is lost") in said

    _moved(fleet, uuid, other)
    assert "disk vda 1024 MB" in _boot_line(fleet, other, uuid, 1)  # a new disk
    [process] = qemu_processes(uuid)
    assert process.pid == files(fleet, other, uuid).read_pid()

    # Its agent back, the dead host lets the evacuated guest's files go.
    start_agent(fleet, dead)
    fleet.wait_hosts_up([dead], timeout=90)
    fleet.wait(lambda: files_left(fleet, HOSTS, uuid) == [other], 60, f"{dead} to let the guest go")
    assert fleet.instances([uuid])[uuid]["state"] == "ACTIVE"


def test_deleting_every_guest_leaves_no_qemu(fleet):
    alive = [u for u, r in fleet.instances(fleet.booted).items() if r["state"] not in ("DELETED",)]
    if alive:
        delete(fleet, *alive)
    assert {u: qemu_processes(u) for u in fleet.booted} == dict.fromkeys(fleet.booted, [])
