"""A host that stops, as the scheduler's endpoint sees it: an instance deleted while its host is
down is DELETED at once (Nova's local delete), with no terminate cast to the host."""

import logging

from scheduler import rpc
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
