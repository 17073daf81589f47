"""berth host disable|enable|delete and berth service list: the endpoint over memory:// and SQLite,
and the commands' output."""

import functools
import io
import json
import uuid as uuidlib

import pytest

from berth_contract.request_spec import RequestSpec
from scheduler import rpc
from scheduler.admin.grouping import known_host
from scheduler.admin.hosts import HostAdminEndpoint, heartbeat, reload_disabled
from scheduler.cmd.arguments import CommandError
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.service import assemble
from tests.unit.admin.test_grouping import HOSTS, report
from tests.unit.cmd.test_admin_commands import conf_file, run  # noqa: F401
from tests.unit.scheduler.service_parts import transport_and_database


class Peers:
    def __init__(self):
        self.told = []

    def __call__(self, deleted):
        self.told.append(deleted)


@pytest.fixture
def world(conf):
    conf.set_override("host", "sched-1")
    transport, database = transport_and_database(conf)
    manager = assemble(conf, transport, database).manager
    peers = Peers()
    known = functools.partial(known_host, database, manager.host_manager)
    hosts = HostAdminEndpoint(conf, database, manager.host_manager, known, announce=peers)
    for host in HOSTS:
        manager.report_resources({}, host, dict(report(host), version="9.9.9"))
    yield hosts, manager, database, peers
    transport.cleanup()
    database.dispose()


def place(manager, count=1, force=None):
    spec = RequestSpec.from_wire({"instance_uuids": [str(uuidlib.uuid4()) for _ in range(count)],
                                  "num_instances": count, "instance_type": {"memory_mb": 512, "vcpus": 1}},
                                 {"force_hosts": [force] if force else []})
    return [h.host for h in manager._scheduling.planner.selector.select(manager.host_manager.table, spec)]


def listed(manager):
    return {h["host"]: (h["state"], h["disabled_reason"]) for h in manager.list_hosts({})}


def test_a_disabled_host_takes_nothing_and_says_why(world):
    hosts, manager, database, peers = world
    assert hosts.host_disable({}, "h1", reason="disk replacement") == {
        "host": "h1", "disabled": True, "disabled_reason": "disk replacement"}
    assert "h1" not in place(manager, count=20)
    assert listed(manager)["h1"] == ("disabled", "disk replacement")
    assert peers.told == [[]]
    with pytest.raises(NoValidHost, match="forced host h1 is disabled"):
        place(manager, force="h1")
    assert hosts.host_enable({}, "h1")["was_disabled"] is True
    assert hosts.host_enable({}, "h1")["was_disabled"] is False  # said, not silently done again
    assert listed(manager)["h1"] == ("up", None)
    assert "h1" in place(manager, count=10)  # RAMWeigher: the emptiest, h1, first


def test_a_periodic_reload_that_read_before_an_operators_change_does_not_undo_it(world):
    hosts, manager, database, _ = world

    class OvertakenRead:
        """The periodic reload's read, and an operator's disable committed right after it."""

        def list_services(self, binary):
            rows = database.list_services(binary)
            hosts.host_disable({}, "h1", reason="now")
            return rows

    assert reload_disabled(OvertakenRead(), manager.host_manager) == {}  # what it read: dropped
    assert listed(manager)["h1"] == ("disabled", "now")
    assert "h1" not in place(manager, count=20)
    assert reload_disabled(database, manager.host_manager) == {"h1": "now"}  # the next one takes
    assert listed(manager)["h1"] == ("disabled", "now")


def test_every_host_disabled_is_said_so(world):
    hosts, manager, _, _ = world
    for host in HOSTS:
        hosts.host_disable({}, host)
    with pytest.raises(NoValidHost, match="every compute host is disabled"):
        place(manager)


def test_disabled_hosts_survive_a_restart_and_reach_other_schedulers(world, conf):
    hosts, manager, database, _ = world
    hosts.host_disable({}, "h2", reason="flaky NIC")
    other = assemble(conf, rpc.get_transport(conf), database).manager
    for host in HOSTS:
        other.report_resources({}, host, report(host))
    peer = HostAdminEndpoint(conf, database, other.host_manager, lambda h: h)
    peer.hosts_changed({}, by="sched-2", deleted=[])
    assert listed(other)["h2"] == ("disabled", "flaky NIC")
    assert "h2" not in place(other, count=20)


def test_a_deleted_host_is_forgotten_until_it_reports_again(world, caplog):
    hosts, manager, database, peers = world
    database.save_compute_nodes([dict(report(h), host=h) for h in HOSTS])
    assert hosts.host_delete({}, "h3") == {"host": "h3", "aggregates_left": 0}
    assert "h3" not in listed(manager) and "h3" not in place(manager, count=20)
    assert "h3" not in {n["host"] for n in database.list_compute_nodes()}
    assert peers.told[-1] == ["h3"]
    manager.report_resources({}, "h3", report("h3"))
    assert listed(manager)["h3"] == ("up", None)
    assert "Host h3 was deleted by an operator and reports again: it is back" in caplog.text


def test_a_host_holding_instances_is_not_deleted(world):
    hosts, manager, database, _ = world
    [placed] = place(manager)
    database.create_instances([{"uuid": str(uuidlib.uuid4()), "host": placed, "state": "ACTIVE",
                                "memory_mb": 512, "root_gb": 0, "ephemeral_gb": 0, "vcpus": 1}])
    with pytest.raises(InvalidRequest, match=f"host {placed} holds 1 instance"):
        hosts.host_delete({}, placed)
    assert placed in listed(manager)


@pytest.mark.parametrize(("call", "message"), [
    (lambda h: h.host_disable({}, "h9"), "unknown host 'h9'"),
    (lambda h: h.host_disable({}, "h1", reason="x" * 256), "reason must be printable text"),
    (lambda h: h.host_disable({}, "h1", reason="a\nb"), "reason must be printable text"),
    (lambda h: h.host_delete({}, "h9"), "unknown host 'h9'"),
])
def test_bad_arguments_change_nothing(world, call, message):
    hosts, manager, database, peers = world
    with pytest.raises(InvalidRequest, match=message):
        call(hosts)
    assert database.list_services() == [] and peers.told == []


def test_service_list_shows_schedulers_and_agents(world, conf):
    hosts, _, database, _ = world
    heartbeat(database, conf, "scheduler")
    hosts.host_disable({}, "h1", reason="maintenance")
    found = {(s["binary"], s["host"]): s for s in hosts.list_services({})}
    assert set(found) == {("berth-scheduler", "sched-1")} | {("berth-compute-agent", h) for h in HOSTS}
    assert found["berth-scheduler", "sched-1"]["state"] == "up"
    assert found["berth-compute-agent", "h1"]["status"] == "disabled"
    assert found["berth-compute-agent", "h1"]["disabled_reason"] == "maintenance"
    assert found["berth-compute-agent", "h2"]["version"] == "9.9.9"


def test_the_commands_print_what_changed(conf_file):  # noqa: F811
    _, out, client = run(conf_file, "host", "disable", "h1", "--reason", "disk",
                         host_disable={"host": "h1", "disabled": True, "disabled_reason": "disk"})
    assert client.calls == [("host_disable", {"host": "h1", "reason": "disk"})]
    assert out == "host h1 disabled: disk\n"
    _, out, _ = run(conf_file, "host", "enable", "h1",
                    host_enable={"host": "h1", "disabled": False, "was_disabled": False})
    assert out == "host h1 enabled already: it was not disabled\n"
    _, out, _ = run(conf_file, "host", "delete", "h1", host_delete={"host": "h1", "aggregates_left": 2})
    assert out == "host h1 deleted, and removed from 2 aggregate(s)\n"
    services = [{"binary": "berth-compute-agent", "host": "h1", "status": "enabled", "state": "up",
                 "updated_at": "2026-11-30T12:00:00Z", "version": "0.1.0", "disabled_reason": None}]
    _, out, _ = run(conf_file, "service", "list", "-f", "json", list_services=services)
    assert json.loads(out) == [{"BINARY": "berth-compute-agent", "HOST": "h1", "STATUS": "enabled",
                                "STATE": "up", "UPDATED AT": "2026-11-30T12:00:00Z", "VERSION": "0.1.0",
                                "DISABLED REASON": None}]


class _Lister:
    def __init__(self, manager):
        self.manager = manager

    def list_hosts(self, ctxt):
        return self.manager.list_hosts(ctxt)


def _cli(conf_file, manager, *argv):  # noqa: F811
    from tests.unit.cli_scheduler import parse

    args = parse(conf_file, *argv)
    out = io.StringIO()
    return args.func(_Lister(manager), args, out), out.getvalue()


def test_hosts_lists_zone_and_aggregates_and_host_show_prints_every_field(world, conf_file):  # noqa: F811
    hosts, manager, database, _ = world
    hosts.host_disable({}, "h1", reason="firmware")
    status, out = _cli(conf_file, manager, "hosts", "-f", "json")
    listing = {row["HOST"]: row for row in json.loads(out)}
    assert status == 0
    assert (listing["h1"]["ZONE"], listing["h1"]["DISABLED REASON"]) == ("nova", "firmware")
    assert list(listing["h1"])[-3:] == ["ZONE", "AGGREGATES", "DISABLED REASON"]
    status, out = _cli(conf_file, manager, "host", "show", "h2", "-f", "json")
    shown = json.loads(out)
    assert status == 0
    assert (shown["host"], shown["state"], shown["availability_zone"]) == ("h2", "up", "nova")
    assert {"free_ram_mb", "vcpus_used", "aggregates", "reported_at"} <= set(shown)
    with pytest.raises(CommandError, match="no host 'h9' has reported"):
        _cli(conf_file, manager, "host", "show", "h9")
