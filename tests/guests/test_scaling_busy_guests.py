"""A scaling group of real guests grows while its guests are busy, and shrinks after: members boot
the test image's busy twin (berth-test-busy, tools/build-guest-image: a busy loop for 60 s after
boot), their agent measures their CPU, and the controller in the scheduler follows it.

One busy guest under TCG uses 30 to 50% of a core; an idle one a few %. Against a target of 20%,
the group's one member asks for a second; once both loops have ended, the group shrinks back to
one. The controller's periods and the scale-down window are shortened, so that this takes about
two minutes instead of ten.
"""

import json

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.guests.guests import kill_leftovers, state_path

HOST = "busy-1"
FLAVOR = ("--flavor-ram", "128", "--flavor-disk", "1", "--flavor-vcpus", "1")
TARGET = 20  # percent of a member's one vCPU
SCALING = {"sync_period": 2, "cpu_initialization_period": 0, "initial_readiness_delay": 0,
           "metric_max_age": 10, "cast_grace": 30}
BEHAVIOR = {
    "scale_up": {"stabilization_window_s": 0,
                 "policies": [{"type": "instances", "value": 1, "period_s": 2}]},
    "scale_down": {"stabilization_window_s": 10,
                   "policies": [{"type": "percent", "value": 100, "period_s": 2}]},
}
BUSY_START, BUSY_END = "berth-guest: busy loop for", "berth-guest: busy loop ended"
#: A member boots in seconds under TCG, slower on a loaded two-core machine; its loop lasts 60 s.
BOOT_TIMEOUT, BUSY_TIMEOUT = 180, 300


@pytest.fixture
def fleet(tmp_path, guest_image):
    booted = []
    with temporary_database() as url, temporary_vhost() as transport_url:
        options = {f"scaling__{name}": value for name, value in SCALING.items()}
        qemu = {"memory_mb": 2048, "local_gb": 20, "vcpus": 4, "kvm_probe_timeout": 3,
                "images_path": guest_image}
        options.update({f"qemu__{name}": value for name, value in qemu.items()})
        fleet = Fleet(tmp_path, url, transport_url, compute_agent__driver="qemu", **options)
        fleet.booted = booted
        try:
            fleet.start_schedulers(["sched"])
            fleet.start_agent(HOST, default={"state_path": state_path(fleet, HOST)}, report_interval=2)
            fleet.wait_hosts_up([HOST], timeout=90)
            yield fleet
        finally:
            fleet.close()
            kill_leftovers(booted)


def berth(fleet, *args):
    done = fleet.cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_scaling_group_grows_while_its_guests_are_busy_and_shrinks_after(fleet, tmp_path):
    behavior = tmp_path / "behavior.json"
    behavior.write_text(json.dumps(BEHAVIOR))
    group = berth(fleet, "scaling-group", "create", "busy", *FLAVOR, "--image", "berth-test-busy",
                  "--min", "1", "--max", "2", "--cpu", str(TARGET), "--behavior", str(behavior),
                  "-f", "value", "-c", "uuid").split()[-1]

    def members():
        """{uuid: state} of the members not being deleted."""
        found = fleet.client.admin_call({}, "show_scaling_group", name_or_uuid=group)["members"]
        fleet.booted.extend(m["uuid"] for m in found if m["uuid"] not in fleet.booted)
        return {m["uuid"]: m["state"] for m in found if m["state"] not in ("DELETING", "DELETED")}

    def active():
        return [uuid for uuid, state in members().items() if state == "ACTIVE"]

    def console(uuid):
        return berth(fleet, "console-log", uuid, "--lines", "200")

    [first] = fleet.wait(active, BOOT_TIMEOUT, "the group's first member ACTIVE")
    fleet.wait(lambda: BUSY_START in console(first), 60, "the first member's busy loop to start")

    grown = fleet.wait(lambda: active() if len(active()) == 2 else None, BUSY_TIMEOUT,
                       "a second member ACTIVE while the first is busy", last_seen=members)
    assert BUSY_END not in console(first)  # it grew while the loop ran
    [second] = [uuid for uuid in grown if uuid != first]

    # Both loops end (the second member's 60 s after it booted); the group then shrinks to its min.
    [kept] = fleet.wait(lambda: list(members()) if len(members()) == 1 else None, BUSY_TIMEOUT,
                        "the group back to one member", last_seen=members)
    assert kept in (first, second)
    assert BUSY_END in console(kept)
    print("\n" + berth(fleet, "scaling-group", "show", group))
    berth(fleet, "scaling-group", "delete", group)
    fleet.wait_states(fleet.booted, ("DELETED",), timeout=120)
