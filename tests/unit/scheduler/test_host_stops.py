"""A host that stops, as the scheduler's endpoint sees it: an instance deleted while its host is
down is DELETED at once (Nova's local delete), with no terminate cast to the host."""

import logging

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.fleet.host_manager import HostManager
from scheduler.manager import DELETED_BY_CLIENT
from tests.unit.scheduler.manager_world import HOSTS, casts, report, request


def stop(manager, host, seq=2):
    """``host``'s agent stops cleanly: its last report says so."""
    manager.report_resources({}, host, dict(report(host, HOSTS[host]), report_seq=seq, stopped=True,
                                            started_at="2026-01-01T00:00:00Z"))


def placed_on_h2(manager, database, agents):
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    assert database.get_instance(uuids[0])["host"] == "h2"
    return uuids[0]


def test_a_delete_on_a_host_that_is_down_is_deleted_at_once_with_no_cast(world, caplog):
    manager, database, agents = world
    uuid = placed_on_h2(manager, database, agents)
    stop(manager, "h2")
    with caplog.at_level(logging.WARNING, logger="scheduler.manager"):
        manager.delete_instance({}, uuid)
    record = database.get_instance(uuid)
    assert (record["state"], record["host"]) == ("DELETED", "h2") and record["deleted_at"]
    assert casts(agents, 1)["h2"][0][0] == "run_instance"  # no terminate to a host that is down
    assert [r.getMessage() for r in caplog.records if r.name == "scheduler.manager"] == [
        f"Instance {uuid} deleted while its host h2 is down: its agent stopped: DELETED at once (a local "
        "delete); its agent is told to terminate it if it reports again holding it"]
    manager.delete_instance({}, uuid)  # again: nothing more
    assert casts(agents, 1)["h2"][0][0] == "run_instance"


def test_an_instance_left_deleting_on_a_host_gone_down_is_deleted_by_a_delete_again(world):
    manager, database, agents = world
    uuid = placed_on_h2(manager, database, agents)
    manager.delete_instance({}, uuid)  # h2 up: DELETING, a terminate cast
    assert casts(agents, 2)["h2"][1] == ("terminate_instance", uuid, DELETED_BY_CLIENT)
    stop(manager, "h2")  # before its agent took the terminate
    manager.delete_instance({}, uuid)
    assert database.get_instance(uuid)["state"] == "DELETED"
    assert len(casts(agents, 2)["h2"]) == 2


def test_a_delete_on_a_host_up_is_still_the_agents_to_do(world):
    manager, database, agents = world
    uuid = placed_on_h2(manager, database, agents)
    stop(manager, "h1")  # another host stops
    manager.delete_instance({}, uuid)
    assert database.get_instance(uuid)["state"] == "DELETING"


def test_start_build_says_yes_once_the_instance_is_building_there_and_no_once_placed_elsewhere(world):
    manager, database, agents = world
    uuid = placed_on_h2(manager, database, agents)
    assert manager.start_build({}, uuid, "h2") == {"build": True}
    assert database.get_instance(uuid)["state"] == "BUILDING"
    assert manager.start_build({}, uuid, "h2") == {"build": True}  # a build resumed after a restart
    assert manager.start_build({}, uuid, "h1") == {"build": False, "reason": f"{uuid} is BUILDING on h2 now"}


def test_what_was_cast_to_a_host_that_stopped_is_placed_again_elsewhere_once(parts):
    manager, hosts, expiry = parts.manager, parts.host_manager, parts.build_expiry
    database = manager._db
    uuids, spec, props = request(count=2)
    manager.run_instance(rpc.Context({}), spec, props)
    assert {database.get_instance(u)["host"] for u in uuids} == {"h2"}
    manager.start_build({}, uuids[1], "h2")  # one BUILDING, one SCHEDULED
    assert hosts.down_for_builds() == {}
    stop(manager, "h2")
    assert hosts.down_for_builds() == {"h2": "its agent stopped"}
    assert expiry.expire_on_down_hosts(hosts.down_for_builds()) == 2
    assert expiry.expire_on_down_hosts(hosts.down_for_builds()) == 0  # once
    rows = [database.get_instance(u) for u in uuids]
    assert {(r["state"], r["host"], r["attempts"]) for r in rows} == {("SCHEDULED", "h1", 2)}
    # The agent of h2, back, asks before it builds what waited in its queue: no.
    assert manager.start_build({}, uuids[0], "h2") == {
        "build": False, "reason": f"{uuids[0]} is SCHEDULED on h1 now"}


def test_a_host_silent_for_service_down_time_is_acted_on_once_the_scheduler_has_listened_that_long(conf):
    hosts = HostManager(conf)
    hosts.listening_since = 1000.0
    hosts.update_from_report(HostReport.from_wire(report("h1", 4096), "h1"), now=900.0)  # restored, old
    hosts.notice_down_hosts(now=1001.0)
    assert hosts.down == {"h1"} and hosts.down_for_builds(now=1001.0) == {}
    assert hosts.down_for_builds(now=1061.0) == {"h1": "no report for more than service_down_time, 60 s"}
