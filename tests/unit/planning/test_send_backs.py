"""A send-back (run_instance with its sender last in the retry record) reschedules only an
instance the database has on the sender's host, at the attempt the sender was given: one naming
anything else is refused and creates nothing. The scheduler's RPC endpoint over memory:// and
SQLite, each message checked as the RPC server checks it ([roles] agents)."""

import pytest

from scheduler import rpc
from scheduler.exception import InvalidRequest
from tests.unit.scheduler.manager_world import casts, request
from tests.unit.scheduler.test_manager_guards import as_sent_by


def forged(host="h2", count=5, attempt=2):
    """(uuids, call arguments) of a send-back from ``host`` for ``count`` instances never booted."""
    uuids, spec, _ = request(count=count)
    retry = {"num_attempts": attempt, "hosts": [[host, host]], "exc_reason": f"{host}: forged"}
    return uuids, {"request_spec": spec, "filter_properties": {"retry": retry}}


def refusal(uuids, host="h2"):
    names = f"instance{'s' if len(uuids) > 1 else ''} {', '.join(uuids)}"
    return (f"run_instance: a send-back from {host} names {names}, which the database does not have on "
            f"{host}: refused, nothing created")


@pytest.fixture
def agent_h2(world, conf):
    """Sends as agent h2's broker user."""
    conf.set_override("agents", {"h1": "agent-h1", "h2": "agent-h2", "h3": "agent-h3"}, "roles")
    return as_sent_by(conf, world[0], "agent-h2")


def test_a_send_back_for_instances_never_booted_is_refused_and_creates_nothing(world, agent_h2):
    manager, database, agents = world
    uuids, args = forged()
    with pytest.raises(InvalidRequest) as refused:
        agent_h2("run_instance", **args)
    assert str(refused.value) == refusal(uuids)
    del args["request_spec"]["instance_uuids"]  # by count: the scheduler would make the UUIDs up
    with pytest.raises(InvalidRequest, match="a send-back from h2 names no instance \\(it asks for 5 by "
                       "count\\): refused, nothing created"):
        agent_h2("run_instance", **args)
    assert database.get_instances(uuids) == {} and manager.list_instances({}) == []
    casts(agents, 0)


def test_an_unreadable_send_back_records_no_refusal(world, agent_h2):
    manager, database, agents = world
    uuids, args = forged(count=2)
    args["request_spec"]["instance_type"]["memory_mb"] = "lots"
    with pytest.raises(InvalidRequest, match="memory_mb: must be an integer"):
        agent_h2("run_instance", **args)
    assert database.get_instances(uuids) == {}  # a client's bad request records its refusal: not this


def test_in_a_batch_each_forged_send_back_is_refused_alone(world):
    manager, database, agents = world
    [mine], spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [first] = casts(agents, 1)
    retry = {"num_attempts": 1, "hosts": [[first, first]], "exc_reason": f"{first}: refused"}
    legit = {"request_spec": spec, "filter_properties": {"retry": retry}}
    bad = [forged(count=3) for _ in range(3)]
    new, new_spec, new_props = request()
    calls = [(rpc.Context({}), args) for args in (bad[0][1], legit, bad[1][1],
                                                  {"request_spec": new_spec, "filter_properties": new_props},
                                                  bad[2][1])]
    outcomes = manager._run_instances(calls)
    assert [str(o) if o else None for o in outcomes] == [
        refusal(bad[0][0]), None, refusal(bad[1][0]), None, refusal(bad[2][0])]
    assert database.get_instances([u for uuids, _ in bad for u in uuids]) == {}
    placed = casts(agents, 3)
    assert sorted(c[1]["uuid"] for calls in placed.values() for c in calls) == sorted([mine, mine, *new])
    assert database.get_instance(mine)["attempts"] == 2


def test_a_send_back_naming_an_unknown_instance_beside_its_own_is_refused_whole(world, agent_h2):
    manager, database, agents = world
    [mine], spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    assert list(casts(agents, 1)) == ["h2"]  # the roomiest
    stranger, args = forged(attempt=1, count=1)
    args["request_spec"]["instance_uuids"] = [mine, *stranger]
    args["request_spec"]["num_instances"] = 2
    with pytest.raises(InvalidRequest) as refused:
        agent_h2("run_instance", **args)
    assert str(refused.value) == refusal(stranger)
    record = database.get_instance(mine)
    assert (record["state"], record["host"], record["attempts"]) == ("SCHEDULED", "h2", 1)
    assert database.get_instances(stranger) == {}
    casts(agents, 1)


def test_a_send_back_from_a_host_a_deleting_instance_is_not_on_leaves_it_to_its_host(world, conf):
    conf.set_override("agents", {"h1": "agent-h1", "h2": "agent-h2"}, "roles")
    manager, database, agents = world
    [mine], spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    manager.delete_instance(rpc.Context({}), mine)
    retry = {"num_attempts": 1, "hosts": [["h1", "h1"]], "exc_reason": "h1: forged"}
    sent_back = {"request_spec": spec, "filter_properties": {"retry": retry}}
    as_sent_by(conf, manager, "agent-h1")("run_instance", **sent_back)
    assert database.get_instance(mine)["state"] == "DELETING"  # h2 has not said it let go
    retry["hosts"] = [["h2", "h2"]]  # its own host sends it back: deleted before it was built
    as_sent_by(conf, manager, "agent-h2")("run_instance", **sent_back)
    assert database.get_instance(mine)["state"] == "DELETED"
    casts(agents, 2)  # the build and the terminate: nothing else


def test_a_send_back_ignored_leaves_what_the_instance_holds_on_its_host(world):
    manager, database, agents = world
    [mine], spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    assert list(casts(agents, 1)) == ["h2"]
    retry = {"num_attempts": 3, "hosts": [["h2", "h2"]], "exc_reason": "h2: refused"}  # not its attempt
    manager.run_instance(rpc.Context({}), spec, {"retry": retry})
    assert database.get_instance(mine)["attempts"] == 1
    assert manager.host_manager.get("h2").free_ram_mb == 16384 - 1024  # still held until h2 reports it
