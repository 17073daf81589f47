"""Three schedulers sharing one database: each takes every host's report, one writes it."""

import contextlib
import datetime

import pytest

from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.client import TOPIC
from scheduler.conf import opts
from scheduler.fleet.report_owner import owner
from scheduler.service import BINARY, SchedulerService
from tests.unit.scheduler.manager_world import report, request
from tests.unit.scheduler.service_parts import transport_and_database

NAMES = ("sched-a", "sched-b", "sched-c")
HOSTS = [f"h{i:02d}" for i in range(64)]  # enough for each of three to prefer its own


def scheduler_conf(shared, name):
    """A conf like ``shared`` (same state_path, transport, exchange) for scheduler ``name``."""
    conf = berth_conf.new_conf()
    conf([])
    for option in ("state_path", "transport_url", "control_exchange"):
        conf.set_override(option, shared[option])
    conf.set_override("host", name)
    opts.register_plugin_opts(conf)
    return conf


@pytest.fixture
def fleet(conf):
    """({name: SchedulerService}, database, writes): three schedulers on one database, not
    started; ``writes`` lists (scheduler, host) for each host row a scheduler saved."""
    transport, database = transport_and_database(conf)
    services = {name: SchedulerService(scheduler_conf(conf, name), transport, database) for name in NAMES}
    writes, saving = [], []
    real_save = database.save_compute_nodes

    def counted_save(rows):
        rows = list(rows)
        real_save(rows)
        writes.extend((saving[-1], row["host"]) for row in rows)

    database.save_compute_nodes = counted_save
    for name, service in services.items():
        real = service.save_reports

        def save(real=real, name=name):
            saving.append(name)
            real()

        service.save_reports = save
    yield services, database, writes
    transport.cleanup()
    database.dispose()


def heartbeats(database, stale=()):
    now = database.now()
    for name in NAMES:
        at = now - datetime.timedelta(seconds=61) if name in stale else now  # service_down_time 60
        database.service_heartbeat(name, BINARY, TOPIC, at=at)


def round_of_reports(services, ram, save=NAMES):
    """Every host reports to every scheduler (a fanout); those in ``save`` run their save."""
    for service in services.values():
        for host in HOSTS:
            service.manager.report_resources({}, host, report(host, ram))
    for name in save:
        services[name].save_reports()


def test_each_report_is_written_once_by_its_owner_and_a_survivor_takes_a_dead_ones_hosts(fleet):
    services, database, writes = fleet
    heartbeats(database)
    round_of_reports(services, 1024)
    # A host's first report, each scheduler writes: its row is there whichever is up.
    assert sorted(writes) == sorted((name, host) for name in NAMES for host in HOSTS)

    writes.clear()
    round_of_reports(services, 2048)
    assert sorted(writes) == sorted((owner(host, NAMES), host) for host in HOSTS)
    assert {name for name, _ in writes} == set(NAMES)
    assert {node["memory_mb"] for node in database.list_compute_nodes()} == {2048}

    # sched-b is gone: its heartbeat is stale and it saves nothing.
    writes.clear()
    heartbeats(database, stale={"sched-b"})
    round_of_reports(services, 4096, save=("sched-a", "sched-c"))
    assert sorted(writes) == sorted((owner(host, ("sched-a", "sched-c")), host) for host in HOSTS)
    taken = {host for host in HOSTS if owner(host, NAMES) == "sched-b"}
    assert taken and {name for name, host in writes if host in taken} <= {"sched-a", "sched-c"}
    assert {node["memory_mb"] for node in database.list_compute_nodes()} == {4096}


def test_a_live_owner_that_does_not_save_leaves_its_hosts_to_no_one_else(fleet):
    services, database, writes = fleet
    heartbeats(database)
    round_of_reports(services, 1024)
    writes.clear()
    round_of_reports(services, 2048, save=("sched-a", "sched-c"))
    assert {host for _, host in writes} == {host for host in HOSTS if owner(host, NAMES) != "sched-b"}
    assert len(writes) == len({host for _, host in writes})


def test_a_scheduler_alone_writes_every_report_once(fleet):
    services, database, writes = fleet
    round_of_reports(services, 1024, save=("sched-a",))
    writes.clear()
    round_of_reports(services, 2048, save=("sched-a",))  # no heartbeat of any: itself counts
    assert sorted(writes) == [("sched-a", host) for host in HOSTS]


def test_a_restarted_scheduler_writes_only_its_own_hosts_from_its_first_save(fleet):
    services, database, writes = fleet
    heartbeats(database)
    round_of_reports(services, 1024)
    services["sched-b"].stop()
    writes.clear()
    restarted = SchedulerService(services["sched-b"].conf, services["sched-b"].transport, database)
    restarted.restore_hosts()  # as start() does
    for host in HOSTS:
        restarted.manager.report_resources({}, host, report(host, 2048))
    restarted.save_reports()
    assert sorted(host for _, host in writes) == [host for host in HOSTS if owner(host, NAMES) == "sched-b"]


def _first_choice(service):
    from berth_contract.request_spec import RequestSpec

    spec = RequestSpec.from_wire({"instance_uuids": ["00000000-0000-4000-8000-000000000001"],
                                  "num_instances": 1, "instance_type": {"memory_mb": 512, "vcpus": 1}}, {})
    return service.parts.planner.selector.select(service.parts.host_manager.table, spec)[0].host


@contextlib.contextmanager
def three_live(conf, prefer, ram):
    """({name: SchedulerService}, database): three live schedulers, ``prefer``-ing their own hosts
    or not, each told of the others and of every host, all alike with ``ram`` MB free."""
    transport, database = transport_and_database(conf)
    try:
        services = {}
        for name in NAMES:
            service_conf = scheduler_conf(conf, name)
            service_conf.set_override("prefer_owned_hosts", prefer, group="scheduler")
            services[name] = SchedulerService(service_conf, transport, database)
        heartbeats(database)
        round_of_reports(services, ram)  # a save learns who is live
        yield services, database
    finally:
        transport.cleanup()
        database.dispose()


@pytest.mark.parametrize("prefer", [True, False])
def test_with_others_live_each_places_on_its_own_hosts_when_told_to(conf, prefer):
    with three_live(conf, prefer, 1024) as (services, _):
        chosen = {name: _first_choice(service) for name, service in services.items()}
    if prefer:
        assert all(owner(host, NAMES) == name for name, host in chosen.items())
        assert len(set(chosen.values())) == 3
    else:
        assert len(set(chosen.values())) == 1  # all three race for the same heaviest host


def test_a_migration_weighs_the_whole_fleet_where_a_build_takes_its_own_host(conf):
    with three_live(conf, True, 4096) as (services, database):
        # Every host alike: the whole fleet's heaviest is the first.
        mover = next(name for name in NAMES if owner(HOSTS[0], NAMES) != name)
        service, context = services[mover], rpc.Context({})
        [uuid], spec, props = request(1024)
        service.manager.run_instance(context, spec, props)
        source = database.get_instance(uuid)["host"]
        assert owner(source, NAMES) == mover
        service.manager.instance_update(context, uuid, source, "ACTIVE")
        migration = service.moves.migrate_instance(context, uuid)
    assert (migration["source_host"], migration["dest_host"]) == (source, HOSTS[0])
