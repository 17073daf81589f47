"""What the scheduler refuses (bad arguments, the wrong broker user) and how it
deals with builds that never finish."""

import datetime

import pytest

from berth_contract.host_report import HostReport
from scheduler import rpc
from scheduler.exception import InvalidRequest, NotAuthorized
from scheduler.rpc.dispatcher import Dispatcher
from tests.unit.scheduler.manager_world import casts, report, request

LATER = datetime.timedelta(seconds=3600)


def as_user(user):
    return rpc.Context({}, user_id=user)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("not-a-uuid", "h1", "ACTIVE"), "instance_uuid: must be a UUID"),
        (("00000000-0000-4000-8000-000000000001", "h1", "GONE"), "state must be one of"),
        (("00000000-0000-4000-8000-000000000001", "", "ACTIVE"), "host must be a non-empty string"),
        (("00000000-0000-4000-8000-000000000001", ["h1"], "ACTIVE"), "host must be a non-empty string"),
    ],
)
def test_a_bad_instance_update_is_refused(world, args, message):
    manager, _, _ = world
    with pytest.raises(InvalidRequest, match=message):
        manager.instance_update({}, *args)


def test_bad_fault_delete_and_listing_arguments_are_refused(world):
    manager, _, _ = world
    uuid = "00000000-0000-4000-8000-000000000001"
    with pytest.raises(InvalidRequest, match="fault must be an object"):
        manager.instance_update({}, uuid, "h1", "ERROR", fault="boom")
    with pytest.raises(InvalidRequest, match="delete_instance: instance_uuid: must be a UUID"):
        manager.delete_instance({}, 42)
    with pytest.raises(InvalidRequest, match="include_deleted must be true or false"):
        manager.list_instances({}, include_deleted="yes")
    with pytest.raises(InvalidRequest, match="host must be a non-empty string"):
        manager.list_instances({}, host={"a": 1})
    with pytest.raises(InvalidRequest, match="instance_uuid: must be a UUID"):
        manager.show_instance({}, None)


def test_instances_are_listed_by_uuid_and_bad_uuid_lists_are_refused(world):
    manager, _, agents = world
    uuids, spec, props = request(count=3)
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 3)
    absent = "00000000-0000-4000-8000-00000000000f"
    listed = manager.list_instances({}, uuids=[uuids[2], uuids[0].upper(), absent])
    assert sorted(i["uuid"] for i in listed) == sorted([uuids[0], uuids[2]])
    assert manager.list_instances({}, uuids=[]) == []
    assert len(manager.list_instances({})) == 3
    for bad, message in [("not-a-list", "uuids must be a list of at most 1000"),
                         ([absent] * 1001, "uuids must be a list of at most 1000"),
                         ([absent, "nope"], "list_instances: uuids: must be a UUID, got 'nope'")]:
        with pytest.raises(InvalidRequest, match=message):
            manager.list_instances({}, uuids=bad)


def test_a_bad_request_naming_an_existing_instance_leaves_it_alone(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    spec["instance_type"]["vcpus"] = -1
    with pytest.raises(InvalidRequest):
        manager.run_instance(rpc.Context({}), spec, props)
    assert database.get_instance(uuids[0])["state"] == "SCHEDULED"


def as_sent_by(conf, manager, user):
    """Call the manager's methods as the RPC server does for a message of broker user ``user``:
    its callers checked first (scheduler.rpc.access)."""
    dispatcher = Dispatcher([manager], rpc.Access.from_conf(conf))

    def send(method, **args):
        return dispatcher.dispatch(as_user(user), method, args)

    return send


def test_reports_and_updates_only_from_the_hosts_broker_user(world, conf):
    manager, database, agents = world
    conf.set_override("agents", {"h1": "agent-h1", "h2": "agent-h2"}, "roles")
    with pytest.raises(NotAuthorized, match="report_resources about host 'h1' refused: sent by broker user "
                       "'agent-h2' \\(the agent of host h2\\), but only the host's agent, broker user "
                       "'agent-h1', may send it"):
        as_sent_by(conf, manager, "agent-h2")("report_resources", host="h1",
                                              resources=report("h1", 8192, used=8000))
    assert manager.host_manager.get("h1").free_ram_mb == 8192
    as_sent_by(conf, manager, "agent-h1")("report_resources", host="h1",
                                          resources=report("h1", 8192, used=1000))
    assert manager.host_manager.get("h1").free_ram_mb == 7192
    # A host not in the mapping is accepted while require_agent_auth (and enforce) are off...
    as_sent_by(conf, manager, None)("report_resources", host="h3", resources=report("h3", 4096))
    conf.set_override("require_agent_auth", True, "roles")
    with pytest.raises(NotAuthorized, match="has no broker user in \\[roles\\] agents"):
        as_sent_by(conf, manager, "anyone")("report_resources", host="h3",
                                            resources=report("h3", 4096, used=100))

    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [(host, _)] = [(h, c) for h, c in casts(agents, 1).items()]
    update = {"instance_uuid": uuids[0], "host": "h2", "state": "ACTIVE"}
    with pytest.raises(NotAuthorized):
        as_sent_by(conf, manager, "agent-h1")("instance_update", **update)
    assert database.get_instance(uuids[0])["state"] == "SCHEDULED"
    as_sent_by(conf, manager, "agent-h2")("instance_update", **update)
    assert database.get_instance(uuids[0])["state"] == "ACTIVE"


def test_a_reschedule_is_accepted_only_from_the_host_that_sent_it_back(world, conf):
    manager, database, agents = world
    conf.set_override("agents", {"h2": "agent-h2"}, "roles")
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    retry = {"num_attempts": 1, "hosts": [["h2", "h2"]], "exc_reason": "h2: Insufficient memory"}
    sent_back = {"request_spec": spec, "filter_properties": {"retry": retry}}
    with pytest.raises(NotAuthorized, match="run_instance about host 'h2' refused: sent by broker"):
        as_sent_by(conf, manager, "intruder")("run_instance", **sent_back)
    assert database.get_instance(uuids[0])["attempts"] == 1
    as_sent_by(conf, manager, "agent-h2")("run_instance", **sent_back)
    assert database.get_instance(uuids[0])["attempts"] == 2
    casts(agents, 2)  # memory:// queues outlive the test: leave none behind


def test_a_build_stuck_past_build_timeout_is_rescheduled_then_failed(world, conf, parts):
    manager, database, agents = world
    conf.set_override("build_timeout", 1, "scheduler")
    conf.set_override("max_attempts", 2, "scheduler")
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    casts(agents, 1)
    assert parts.build_expiry.expire() == 0  # not late yet

    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + LATER
    assert parts.build_expiry.expire(now=now) == 1
    record = database.get_instance(uuids[0])
    assert (record["state"], record["host"], record["attempts"]) == ("SCHEDULED", "h1", 2)
    placed = casts(agents, 3)
    assert placed["h2"][1] == (  # the first host lets go, told why
        "terminate_instance", uuids[0], "h2: build timed out (SCHEDULED for more than 1 s)")
    assert placed["h1"][0][3]["retry"]["hosts"] == [["h2", "h2"]]
    assert parts.build_expiry.expire() == 0  # just placed again: not late

    manager.instance_update({}, uuids[0], "h1", "BUILDING")
    later = now + LATER
    assert parts.build_expiry.expire(now=later) == 1
    record = database.get_instance(uuids[0])
    assert record["state"] == "ERROR" and record["host"] is None
    assert record["fault_reason"] == (
        "Exceeded maximum number of attempts (2); last failure: "
        "h1: build timed out (BUILDING for more than 1 s)"
    )
    final = casts(agents, 4)
    assert [c[0] for c in final["h1"]] == ["run_instance", "terminate_instance"]
    # What the hosts it was taken from say now changes nothing.
    manager.instance_update({}, uuids[0], "h2", "ACTIVE")
    manager.instance_update({}, uuids[0], "h1", "DELETED")
    assert database.get_instance(uuids[0])["state"] == "ERROR"


def test_updates_handled_out_of_order_by_two_schedulers_do_not_go_back(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [host] = casts(agents, 1)
    manager.instance_update({}, uuids[0], host, "ACTIVE")
    manager.instance_update({}, uuids[0], host, "BUILDING")  # sent first, handled last
    assert database.get_instance(uuids[0])["state"] == "ACTIVE"
    with pytest.raises(InvalidRequest, match="no instance"):
        manager.instance_update({}, "00000000-0000-4000-8000-00000000000f", host, "ACTIVE")


def _send_back(manager, uuids, spec, host, attempt, redelivered=False):
    """The send-back an agent casts when it cannot build: its host last in the retry record."""
    retry = {"num_attempts": attempt, "hosts": [[host, host]], "exc_reason": f"{host}: refused"}
    manager.run_instance(rpc.Context({}, redelivered=redelivered), spec, {"retry": retry})


def test_a_reschedule_delivered_twice_places_the_instance_once(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [first] = casts(agents, 1)
    _send_back(manager, uuids, spec, first, 1)
    placed = casts(agents, 2)
    second = database.get_instance(uuids[0])["host"]
    assert second != first
    _send_back(manager, uuids, spec, first, 1, redelivered=True)  # the same message again
    after = casts(agents, 2)
    record = database.get_instance(uuids[0])
    assert (record["host"], record["attempts"], record["state"]) == (second, 2, "SCHEDULED")
    assert after == placed  # no third build anywhere


def test_a_late_send_back_from_a_host_the_instance_left_changes_nothing(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [first] = casts(agents, 1)
    _send_back(manager, uuids, spec, first, 1)
    casts(agents, 2)
    second = database.get_instance(uuids[0])["host"]
    manager.instance_update({}, uuids[0], second, "ACTIVE")
    _send_back(manager, uuids, spec, second, 1)  # from the right host, but an older attempt
    casts(agents, 2)
    record = database.get_instance(uuids[0])
    assert (record["host"], record["attempts"], record["state"]) == (second, 2, "ACTIVE")


def test_a_placement_is_written_only_over_the_row_as_it_was_read(world):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [first] = casts(agents, 1)
    read = {"state": ("SCHEDULED", "BUILDING"), "host": first, "attempts": 1}
    assert database.update_instances_if([(uuids[0], {"host": "h9", "attempts": 2}, read)]) == {uuids[0]}
    # Another worker read the same row before: its write finds it changed and does nothing.
    assert database.update_instances_if([(uuids[0], {"host": "h8", "attempts": 2}, read)]) == set()
    assert database.get_instance(uuids[0])["host"] == "h9"


def test_an_agent_holding_a_deleted_instance_is_told_to_terminate_it_once_a_while(world, caplog, parts):
    manager, database, agents = world
    uuids, spec, props = request()
    manager.run_instance(rpc.Context({}), spec, props)
    [host] = casts(agents, 1)
    manager.instance_update({}, uuids[0], host, "ACTIVE")
    database.update_instance(uuids[0], {"state": "DELETED"})  # its terminate was lost
    held = HostReport.from_wire(report(host, 8192, uuids=uuids), host)
    assert [d.action for d in parts.reconciler.run({host: held}, now=100.0)] == ["terminate"]
    why = f"{host} holds {uuids[0]}, which was deleted"
    assert casts(agents, 2)[host][-1] == ("terminate_instance", uuids[0], why)
    assert parts.reconciler.run({host: held}, now=101.0) == []  # looked at a second ago
    # About service_down_time (60 s) later, it is looked at again, and the terminate sent again.
    assert [d.action for d in parts.reconciler.run({host: held}, now=176.0)] == ["terminate"]
    casts(agents, 3)
    assert f"{host} holds {uuids[0]}, which was deleted: telling {host} to terminate it" in caplog.text
