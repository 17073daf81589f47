"""The service hands the decision core lookups read from the database, never the database: they
issue the statements the database's own methods issue, in the unit of work's one transaction
(memory://, SQLite)."""

import uuid as uuidlib

import pytest
from sqlalchemy import event

from scheduler import rpc
from scheduler.planning.lookups import DatabaseLookups
from scheduler.transaction.unit_of_work import UnitOfWork
from tests.unit.scheduler.manager_world import casts, request


def test_the_decision_core_reads_through_lookups_that_cannot_write(parts):
    core = (parts.planner._stored, parts.move_planner._stored, parts.planner.fragmentation._stored)
    assert all(type(stored) is DatabaseLookups for stored in core)
    readers = sorted(name for name in dir(DatabaseLookups) if not name.startswith("_"))
    assert readers == ["get_instances", "get_server_group", "hosts_of_instances",
                       "settled_instances_on_hosts"]


@pytest.fixture
def statements(world):
    """The SQL of the statements run on the world's database, and the transactions begun."""
    database = world[1]
    seen = {"sql": [], "transactions": 0}

    def began(connection):
        seen["transactions"] += 1

    def ran(connection, cursor, statement, *args):
        seen["sql"].append(statement)

    event.listen(database.engine, "begin", began)
    event.listen(database.engine, "before_cursor_execute", ran)
    yield seen
    event.remove(database.engine, "begin", began)
    event.remove(database.engine, "before_cursor_execute", ran)


def test_a_placement_with_a_group_and_a_host_hint_reads_as_it_did_when_the_planner_had_the_database(
        world, parts, statements):
    manager, database, agents = world
    for host in ("h1", "h2", "h3"):  # each host claimed once: a claim is then one UPDATE
        _, spec, props = request(memory_mb=64)
        manager.run_instance(rpc.Context({}), spec, dict(props, force_hosts=[host]))

    def place(stored):
        """Place an instance in a group of one member, on another host than that member's."""
        group = str(uuidlib.uuid4())
        database.create_server_group(group, "web", "anti-affinity")
        [member], spec, props = request()
        manager.run_instance(rpc.Context({}), spec, dict(props, scheduler_hints={"group": group}))
        parts.planner._stored = stored
        [uuid], spec, props = request()
        props["scheduler_hints"] = {"group": group, "different_host": member}
        statements.update(sql=[], transactions=0)
        with UnitOfWork(database, parts.outbox, parts.undo):
            manager.run_instance(rpc.Context({}), spec, props)
        seen = {"sql": list(statements["sql"]), "transactions": statements["transactions"]}
        assert database.get_instance(uuid)["host"] not in (None, database.get_instance(member)["host"])
        return seen

    through_lookups = place(DatabaseLookups(database))
    through_the_database = place(database)  # as the service wired it before
    assert through_lookups == through_the_database
    assert through_lookups["transactions"] == 1  # the unit of work's: the lookups read in it
    # the request's rows, the group and its members, the members' hosts, the hint's instance and host
    assert sum(s.lstrip().upper().startswith("SELECT") for s in through_lookups["sql"]) >= 5
    casts(agents, 7)
