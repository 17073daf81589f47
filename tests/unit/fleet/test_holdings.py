"""What an agent holds against what the database records: what differs, and what to do."""

import datetime

from scheduler.fleet import holdings as reconcile

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0)
OLD = NOW - datetime.timedelta(minutes=5)
SETTLED_BEFORE = NOW - datetime.timedelta(seconds=60)


def row(state, host="h1", updated_at=OLD):
    return {"state": state, "host": host, "updated_at": updated_at}


def test_what_agrees_is_no_difference():
    recorded = {"a": row("ACTIVE"), "b": row("BUILDING", updated_at=NOW), "c": row("SCHEDULED")}
    assert reconcile.differences("h1", {"a", "b", "c"}, recorded, SETTLED_BEFORE) == []


def test_what_the_agent_must_not_hold_is_terminated_and_the_rest_noted():
    recorded = {
        "deleted": row("DELETED"),
        "failed": row("ERROR", host=None),
        "moved": row("BUILDING", host="h2"),
        "stuck": row("DELETING"),
        "deleting-now": row("DELETING", updated_at=NOW),  # the terminate is on its way
        "lost": row("ACTIVE"),  # not held
        "young": row("ACTIVE", updated_at=NOW),  # not held, but may be claimed after the report
    }
    held = {"deleted", "failed", "moved", "stuck", "deleting-now", "stranger"}
    found = {d.instance_uuid: (d.action, d.why) for d in
             reconcile.differences("h1", held, recorded, SETTLED_BEFORE)}
    assert found == {
        "deleted": ("terminate", "h1 holds deleted, which was deleted"),
        "failed": ("terminate", "h1 holds failed, which is in ERROR on no host"),
        "moved": ("terminate", "h1 holds moved, which is BUILDING on h2 now"),
        "stuck": ("terminate", "h1 still holds stuck, DELETING since 11:55:00"),
        "stranger": ("note", "h1 holds stranger, which the database does not know; left alone"),
        "lost": ("note", "the database has lost ACTIVE on h1, which no longer reports it"),
    }


def test_a_build_its_agent_never_got_is_sent_again_once_settled():
    recorded = {"lost": row("SCHEDULED"), "young": row("SCHEDULED", updated_at=NOW),
                "elsewhere": row("SCHEDULED", host="h2")}
    found = {d.instance_uuid: (d.action, d.why) for d in
             reconcile.differences("h1", set(), recorded, SETTLED_BEFORE)}
    assert found == {"lost": ("build", "h1 does not hold lost, SCHEDULED there since 11:55:00")}


def test_a_shutoff_instance_its_host_holds_is_neither_lost_nor_terminated():
    recorded = {"off": row("SHUTOFF"), "stopping": row("POWERING_OFF", updated_at=NOW),
                "gone": row("SHUTOFF")}  # not held: worth a note, as an ACTIVE one
    found = {d.instance_uuid: (d.action, d.why) for d in
             reconcile.differences("h1", {"off", "stopping"}, recorded, SETTLED_BEFORE)}
    assert found == {"gone": ("note", "the database has gone SHUTOFF on h1, which no longer reports it")}


def test_a_power_action_unheard_since_before_settled_is_told_again():
    recorded = {"off": row("POWERING_OFF"), "on": row("POWERING_ON"), "boot": row("REBOOTING"),
                "young": row("REBOOTING", updated_at=NOW)}
    found = {d.instance_uuid: (d.action, d.power, d.why) for d in
             reconcile.differences("h1", set(recorded), recorded, SETTLED_BEFORE)}
    assert found == {
        "off": ("power", "power_off", "h1 holds off, POWERING_OFF since 11:55:00"),
        "on": ("power", "power_on", "h1 holds on, POWERING_ON since 11:55:00"),
        "boot": ("power", "reboot", "h1 holds boot, REBOOTING since 11:55:00"),
    }
