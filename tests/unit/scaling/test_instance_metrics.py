"""Per-instance metrics on the scheduler's side: the ``instance_usage`` of agents' reports
(checked, a bad entry dropped), saved by the periodic save of the reports, and the
push_instance_metrics endpoint's answers and refusals."""

import logging
from datetime import timedelta

import pytest

from berth_contract.host_report import HostReport
from compute_agent.resource_tracker import ResourceTracker
from scheduler import states
from scheduler.db.api import Database, to_db_time
from scheduler.exception import InvalidRequest
from scheduler.scaling.instance_metrics_api import InstanceMetricsEndpoint
from scheduler.service import SchedulerService
from tests.unit.scheduler.service_parts import transport_and_database

U1 = "00000000-0000-4000-8000-0000000000a1"
U2 = "00000000-0000-4000-8000-0000000000a2"
GONE = "00000000-0000-4000-8000-00000000dead"


def report(usage, host="h1"):
    tracker = ResourceTracker(host, {"memory_mb": 4096, "local_gb": 100, "vcpus": 8})
    tracker.claim(U1, {"memory_mb": 512, "root_gb": 1, "vcpus": 2})
    tracker.claim(U2, {"memory_mb": 512, "root_gb": 1, "vcpus": 2})
    return dict(tracker.report(), instance_usage=usage)


# -- the report's instance_usage ------------------------------------------------


def test_valid_usage_is_kept_as_reported():
    resources = report({U1: {"cpu": 1.5, "memory": 256}, U2: {"cpu": 0}})
    taken = HostReport.from_wire(resources, "h1")
    assert taken.instance_usage == {U1: {"cpu": 1.5, "memory": 256.0}, U2: {"cpu": 0.0}}


@pytest.mark.parametrize("entry, problem", [
    ({U2: {"cpu": -1}}, f"{U2}: cpu must be a finite number >= 0, got -1"),
    ({U2: {"cpu": float("inf")}}, f"{U2}: cpu must be a finite number >= 0, got inf"),
    ({U2: {"cpu": 10**400}}, f"{U2}: cpu must be a finite number >= 0, got 1000000000"),  # no float holds it
    ({U2: {"cpu": "1"}}, f"{U2}: cpu must be a finite number >= 0, got '1'"),
    ({U2: {"cpu": True}}, f"{U2}: cpu must be a finite number >= 0, got True"),
    ({U2: {"disk": 3}}, f"{U2}: unknown metric 'disk' (an agent measures cpu and memory)"),
    ({U2: [1, 2]}, f"{U2}: must be an object {{cpu, memory}}, got [1, 2]"),
    ({GONE: {"cpu": 1}}, f"'{GONE}': not an instance of the report's instance_uuids"),
    ({"not-a-uuid": {"cpu": 1}}, "'not-a-uuid': not an instance of the report's instance_uuids"),
])
def test_a_bad_entry_is_dropped_with_a_warning_and_the_rest_of_the_report_kept(caplog, entry, problem):
    resources = report({U1: {"cpu": 1.0}, **entry})
    with caplog.at_level(logging.WARNING, logger="berth_contract.instance_metrics"):
        taken = HostReport.from_wire(resources, "h1")
    assert taken.instance_usage == {U1: {"cpu": 1.0}}
    assert taken.memory_mb == 4096 and taken.instance_uuids == [U1, U2]
    [warning] = [r.getMessage() for r in caplog.records if r.name == "berth_contract.instance_metrics"]
    assert warning.startswith("Report of host h1: instance_usage entries dropped, the rest of the report "
                              "kept: ")
    assert problem in warning


def test_a_bad_value_drops_only_that_metric_of_the_instance():
    resources = report({U1: {"cpu": 1.0, "memory": -5}})
    taken = HostReport.from_wire(resources, "h1")
    assert taken.instance_usage == {U1: {"cpu": 1.0}}


def test_usage_that_is_not_an_object_is_dropped_whole(caplog):
    resources = report(["cpu", 1])
    taken = HostReport.from_wire(resources, "h1")
    assert taken.instance_usage is None
    assert "instance_usage entries dropped" in caplog.text and "got ['cpu', 1]" in caplog.text


def test_a_warning_names_a_few_bad_entries_and_counts_the_others(caplog):
    resources = report({f"00000000-0000-4000-8000-{i:012d}": {"cpu": 1} for i in range(12)})
    taken = HostReport.from_wire(resources, "h1")
    assert taken.instance_usage is None
    assert caplog.text.count("not an instance of the report's instance_uuids") == 5
    assert "; and 7 more" in caplog.text


# -- saved with the reports ------------------------------------------------------


@pytest.fixture
def service(conf):
    """A SchedulerService on memory:// and SQLite, not started, with two ACTIVE members of a
    scaling group."""
    transport, database = transport_and_database(conf)
    database.create_instances([{"uuid": u, "state": states.ACTIVE, "host": "h1", "scaling_group_uuid": "g1"}
                               for u in (U1, U2)])
    yield SchedulerService(conf, transport, database)
    transport.cleanup()
    database.dispose()


def test_the_periodic_save_stores_the_usage_apart_from_the_hosts_report(service):
    service.manager.report_resources({}, "h1", report({U1: {"cpu": 1.5, "memory": 300}, U2: {"cpu": -2}}))
    service.save_reports()
    database = service.database
    assert database.latest_instance_metrics([U1, U2], database.now() - timedelta(seconds=60)) == {
        U1: {"cpu": 1.5, "memory": 300.0}}
    [node] = database.list_compute_nodes()
    assert node["host"] == "h1" and "instance_usage" not in node["stats"]

    service.manager.report_resources({}, "h1", report({U1: {"cpu": 0.5}}))
    service.save_reports()
    assert database.latest_instance_metrics([U1], database.now() - timedelta(seconds=60)) == {
        U1: {"cpu": 0.5, "memory": 300.0}}


def test_a_report_naming_another_hosts_member_is_not_stored_and_said_once(service, caplog):
    # h2's report lists U1, which the database places on h1, at 64 vCPUs, twice.
    for _ in range(2):
        service.manager.report_resources({}, "h2", report({U1: {"cpu": 64}}, host="h2"))
        service.save_reports()
    assert service.database.list_instance_metrics([U1]) == {}
    warnings = [r.getMessage() for r in caplog.records if "places on another host" in r.getMessage()]
    assert warnings == [f"Report of host h2: usage samples of 1 scaling group member(s) the database places "
                        f"on another host dropped, not stored: {U1}"]


def test_the_periodic_save_prunes_the_samples_of_deleted_instances(service):
    service.manager.report_resources({}, "h1", report({U1: {"cpu": 1.0}, U2: {"cpu": 1.0}}))
    service.save_reports()
    service.database.update_instance(U2, {"state": states.DELETED})
    service._instance_metrics_pruned_at = None  # a minute went by
    service.save_reports()
    assert service.database.list_instance_metrics([U1, U2]).keys() == {U1}


# -- push_instance_metrics ------------------------------------------------------------


@pytest.fixture
def endpoint(conf, database):
    database.create_instances([{"uuid": U1, "state": states.ACTIVE}, {"uuid": U2, "state": states.DELETED}])
    return InstanceMetricsEndpoint(conf, database)


@pytest.fixture
def database(conf):
    database = Database.from_conf(conf)
    database.sync()
    yield database
    database.dispose()


def test_a_push_is_saved_stamped_with_the_databases_time(endpoint, database):
    before = database.now()
    answer = endpoint.push_instance_metrics({}, U1.upper(), {"rps": 120, "queue.depth": 3.5})
    assert answer["instance_uuid"] == U1 and answer["metrics"] == {"rps": 120.0, "queue.depth": 3.5}
    assert to_db_time(answer["sampled_at"]) >= before and answer["sampled_at"].endswith("Z")
    assert database.latest_instance_metrics([U1], before) == {U1: {"rps": 120.0, "queue.depth": 3.5}}
    shown = endpoint.show_instance_metrics({}, [U1])
    assert shown[U1]["rps"] == {"value": 120.0, "source": "pushed", "sampled_at": answer["sampled_at"]}


@pytest.mark.parametrize("uuid, metrics, message", [
    (GONE, {"rps": 1}, f"push_instance_metrics: no instance {GONE}"),
    (U2, {"rps": 1}, f"push_instance_metrics: instance {U2} is DELETED"),
    ("web-1", {"rps": 1}, "push_instance_metrics: instance_uuid: must be a UUID, got 'web-1'"),
    (U1, {"cpu": 1}, "metric cpu is measured by the compute agents; push another name"),
    (U1, {"memory": 1}, "metric memory is measured by the compute agents"),
    (U1, {"Rps": 1}, r"metric name 'Rps' must match \[a-z\]\[a-z0-9_.-\]\{0,63\}"),
    (U1, {"9lives": 1}, "metric name '9lives' must match"),
    (U1, {"r" * 65: 1}, "must match"),
    (U1, {"rps": -1}, "metric rps must be a finite number >= 0, got -1"),
    (U1, {"rps": float("nan")}, "metric rps must be a finite number >= 0, got nan"),
    (U1, {"rps": 10**400}, "metric rps must be a finite number >= 0, got 1000000000"),
    (U1, {"rps": "12"}, "metric rps must be a finite number >= 0, got '12'"),
    (U1, {"rps": False}, "metric rps must be a finite number >= 0, got False"),
    (U1, {}, "metrics must be an object of 1 to 32 name: number entries"),
    (U1, [("rps", 1)], "metrics must be an object"),
])
def test_a_bad_push_is_refused_saying_why_and_saves_nothing(endpoint, database, uuid, metrics, message):
    with pytest.raises(InvalidRequest, match=message):
        endpoint.push_instance_metrics({}, uuid, dict(metrics, ok=1) if isinstance(metrics, dict) and metrics
                                       else metrics)
    assert database.list_instance_metrics([U1, U2, GONE]) == {}


@pytest.mark.parametrize("uuids, message", [
    ([], "instance_uuids must be a list of 1 to 1000 instance UUIDs"),
    (U1, "instance_uuids must be a list"),
    (["x"], "show_instance_metrics: instance_uuids: must be a UUID, got 'x'"),
])
def test_show_refuses_what_is_not_a_list_of_uuids(endpoint, uuids, message):
    with pytest.raises(InvalidRequest, match=message):
        endpoint.show_instance_metrics({}, uuids)


def test_a_push_past_the_names_an_instance_may_hold_is_refused_whole(conf, endpoint, database):
    conf.set_override("max_pushed_metrics", 4, group="scaling")
    endpoint.push_instance_metrics({}, U1, {"a1": 1, "a2": 2, "a3": 3})
    with pytest.raises(InvalidRequest, match=(
            f"push_instance_metrics: instance {U1} holds 3 pushed metric\\(s\\) of the 4 it may hold; "
            r"2 new name\(s\) \(b1, b2\) would pass that \(\[scaling\] max_pushed_metrics\); nothing saved")):
        endpoint.push_instance_metrics({}, U1, {"a1": 10, "b1": 1, "b2": 2})
    assert {name: s["value"] for name, s in endpoint.show_instance_metrics({}, [U1])[U1].items()} == {
        "a1": 1.0, "a2": 2.0, "a3": 3.0}
    endpoint.push_instance_metrics({}, U1, {"a1": 10, "b1": 1})  # the fourth name fits
    endpoint.push_instance_metrics({}, U1, {"a1": 11, "a2": 12, "a3": 13, "b1": 14})  # those held, again
    database.save_instance_metrics([{"instance_uuid": U1, "name": "cpu", "value": 1.0, "source": "agent"}])
    assert len(database.list_instance_metrics([U1])[U1]) == 5  # the agents' samples are not counted


def test_show_lists_at_most_what_an_instance_may_hold_the_newest_first(conf, endpoint, database):
    conf.set_override("max_pushed_metrics", 2, group="scaling")
    now = database.now()
    database.save_instance_metrics([  # pushed before the bound was lowered: six names
        {"instance_uuid": U1, "name": f"m{i}", "value": i, "source": "pushed",
         "sampled_at": now - timedelta(minutes=i)} for i in range(6)]
        + [{"instance_uuid": U1, "name": "cpu", "value": 1, "source": "agent"}])
    # 2 pushed, and room for the agents' cpu and memory: the newest 4
    assert sorted(endpoint.show_instance_metrics({}, [U1])[U1]) == ["cpu", "m0", "m1", "m2"]
