"""Who may speak: each RPC method declares its callers (scheduler.rpc.roles), and a server
given an access policy (scheduler.rpc.access) refuses a message whose broker user may not
call its method, before the method runs, alone or in a batch."""

import json
import logging
import threading
import types

import kombu
import pytest

from scheduler import rpc
from scheduler.exception import NotAuthorized
from scheduler.rpc import access as access_mod
from scheduler.rpc import envelope, roles, topology
from scheduler.rpc.access import Access
from scheduler.rpc.dispatcher import Dispatcher
from tests.unit.rpc.conftest import WAIT
from tests.unit.rpc.test_bad_input import dead_letters

SCHEDULERS, OPERATORS = ["sched"], ["op", "agent-ops"]
AGENTS = {"h1": "agent-h1", "h2": "agent-h2", "h9": "agent-ops"}


def policy(enforce=True, require_agent_auth=False):
    return Access(SCHEDULERS, OPERATORS, AGENTS, enforce=enforce, require_agent_auth=require_agent_auth)


class Endpoint:
    """One method per kind of caller; each records that it ran."""

    def __init__(self):
        self.ran = []
        self.lock = threading.Lock()

    def _did(self, what):
        with self.lock:
            self.ran.append(what)
        return what

    @rpc.callers(rpc.SCHEDULER)
    def peers_changed(self, context, by):
        return self._did(("peers_changed", by))

    @rpc.callers(rpc.OPERATOR)
    def disable(self, context, host):
        return self._did(("disable", host))

    @rpc.callers(rpc.CLIENT)
    def boot(self, context, n):
        return self._did(("boot", n))

    @rpc.callers(rpc.ANYONE)
    def show(self, context):
        return self._did(("show",))

    @rpc.callers(rpc.AGENT_OF_HOST, host="host")
    def report(self, context, host):
        return self._did(("report", host))

    @rpc.callers(rpc.CLIENT, rpc.AGENT_OF_HOST, host=lambda args: (args.get("retry") or [None])[-1])
    def place(self, context, n, retry=None):
        return self._did(("place", n))

    @rpc.batch_of("boot")
    def _boots(self, calls):
        return [self._did(("boot", kwargs["n"])) for _, kwargs in calls]


def send(method, user, access=None, **args):
    dispatcher = Dispatcher([Endpoint()], access or policy())
    return dispatcher.dispatch(rpc.Context({}, user_id=user), method, args)


# -- the declaration -----------------------------------------------------------------


def test_a_declaration_names_roles_and_for_an_agent_the_host_it_speaks_for():
    declared = roles.declared(Endpoint.report)
    assert declared.roles == {rpc.AGENT_OF_HOST}
    assert declared.host_of({"host": "h1"}) == "h1"
    assert roles.declared(Endpoint.place).host_of({"n": 1, "retry": ["h2"]}) == "h2"
    assert roles.declared(Endpoint._boots) is None


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((), {}, "callers: give one or more of"),
    (("admin",), {}, "got admin"),
    ((rpc.AGENT_OF_HOST,), {}, "AGENT_OF_HOST needs host="),
    ((rpc.CLIENT,), {"host": "host"}, "AGENT_OF_HOST needs host="),
])
def test_a_declaration_that_cannot_be_read_is_refused_at_once(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rpc.callers(*args, **kwargs)


class Forgetful(Endpoint):
    def forgotten(self, context):
        return "anyone could call me"

    @property
    def size(self):  # not callable: not an RPC method
        return 1


def test_a_server_with_an_access_policy_refuses_to_start_with_an_undeclared_method(transport, topic):
    with pytest.raises(ValueError, match=r"RPC methods that declare no callers: Forgetful\.forgotten; "
                       r"declare who may call each with @rpc\.callers"):
        rpc.get_rpc_server(transport, rpc.Target(topic, server="s"), [Forgetful()], access=policy())
    # Without a policy (a plain RPC server: tests, tools) nothing is asked.
    rpc.get_rpc_server(transport, rpc.Target(topic, server="s"), [Forgetful()])


def test_the_scheduler_and_the_agent_declare_every_method(conf):
    """The daemons' endpoints: each method's callers, as the admin guide's "Who may speak" lists them."""
    from compute_agent.fake_load_endpoint import FakeLoadEndpoint
    from compute_agent.manager import ComputeEndpoint, ComputeV1Endpoint
    from scheduler.admin.grouping import AdminEndpoint
    from scheduler.admin.hosts import HostAdminEndpoint
    from scheduler.manager import SchedulerManager
    from scheduler.moves.api import MoveEndpoint
    from scheduler.moves.jobs.api import JobEndpoint
    from scheduler.scaling.api import ScalingGroupEndpoint
    from scheduler.scaling.instance_metrics_api import InstanceMetricsEndpoint

    classes = [SchedulerManager, MoveEndpoint, AdminEndpoint, HostAdminEndpoint, JobEndpoint,
               ScalingGroupEndpoint, InstanceMetricsEndpoint, ComputeEndpoint, ComputeV1Endpoint,
               FakeLoadEndpoint]
    found = {}
    for cls in classes:
        for name in dir(cls):
            if not name.startswith("_") and callable(getattr(cls, name)):
                declared = roles.declared(getattr(cls, name))
                assert declared is not None, f"{cls.__name__}.{name}"
                found[f"{cls.__name__}.{name}"] = declared.roles
    by_role = {}
    for name, declared in found.items():
        by_role.setdefault(" + ".join(sorted(declared)), set()).add(name.split(".")[1])
    assert by_role == {
        "scheduler": {"hosts_changed", "aggregates_changed", "run_instance", "terminate_instance",
                      "move_instance", "end_resize", "prepare_move", "migrate_out", "finish_move",
                      "abort_move", "power_off_instance", "power_on_instance", "reboot_instance"},
        "agent of the host": {"report_resources", "instance_update", "start_build", "move_update"},
        "agent of the host + client": {"run_instance"},
        "operator": {"host_disable", "host_enable", "host_delete", "create_aggregate", "delete_aggregate",
                     "aggregate_add_host", "aggregate_remove_host", "aggregate_set_metadata", "set_fake_load",
                     "clear_fake_load", "start_drain", "apply_rebalance_plan", "show_job", "list_jobs",
                     "stop_job", "migrate_instance", "evacuate_host"},
        "client": {"select_destinations", "delete_instance", "create_server_group", "delete_server_group",
                   "create_scaling_group", "update_scaling_group", "pause_scaling_group",
                   "resume_scaling_group", "delete_scaling_group", "push_instance_metrics", "resize_instance",
                   "confirm_resize", "revert_resize", "stop_instance", "start_instance", "reboot_instance",
                   "console_output"},
        "anyone": {"list_hosts", "list_instances", "show_instance", "list_services", "list_aggregates",
                   "show_aggregate", "list_server_groups", "show_server_group", "list_scaling_groups",
                   "show_scaling_group", "show_instance_metrics", "list_migrations"},
    }
    agent = ("ComputeEndpoint", "ComputeV1Endpoint", "FakeLoadEndpoint")
    methods = {(name.split(".")[0] in agent, name.split(".")[1]) for name in found}
    assert len(methods) == 64  # 50 of the scheduler's, 14 of the agent's: each in both test_roles
    assert found["ComputeEndpoint.run_instance"] == {rpc.SCHEDULER}
    # reboot_instance is two methods: a client's to the scheduler, the scheduler's to the agent.
    assert found["SchedulerManager.reboot_instance"] == {rpc.CLIENT}
    assert found["ComputeEndpoint.reboot_instance"] == {rpc.SCHEDULER}
    assert found["ComputeEndpoint.console_output"] == {rpc.CLIENT}


# -- who is who ----------------------------------------------------------------------


@pytest.mark.parametrize(("user", "client", "described"), [
    ("sched", True, "broker user 'sched' (a scheduler)"),
    ("op", True, "broker user 'op' (an operator)"),
    ("agent-h1", False, "broker user 'agent-h1' (the agent of host h1)"),
    ("agent-ops", True, "broker user 'agent-ops' (an operator and the agent of host h9)"),
    ("api", True, "broker user 'api' (a client)"),
    (None, False, "a message without a user_id (its broker user is unknown)"),
])
def test_a_users_role_is_what_the_lists_say_and_anyone_else_is_a_client(user, client, described):
    assert policy().is_client(user) is client
    assert policy().describe(user) == described


def test_the_roles_come_from_the_roles_options_and_the_old_agent_users_name_still_works(conf, tmp_path):
    path = tmp_path / "berth.conf"
    path.write_text("[scheduler]\nagent_users = h1:agent-h1\nrequire_agent_auth = true\n"
                    "[roles]\nschedulers = s1,s2\noperators = op\nenforce = true\n")
    conf(["--config-file", str(path)])
    found = Access.from_conf(conf)
    assert (found.schedulers, found.operators, found.agents) == ({"s1", "s2"}, {"op"}, {"h1": "agent-h1"})
    assert found.enforce and found.require_agent_auth


def test_enforcing_needs_a_transport_that_checks_user_ids(conf):
    access_mod.check_options(conf)  # off: anything goes
    conf.set_override("enforce", True, "roles")
    with pytest.raises(ValueError, match=r"\[roles\] enforce: only rabbit:// validates the user_id of "
                       r"messages; on memory:// every message would be refused"):
        access_mod.check_options(conf)
    conf.set_override("transport_url", "rabbit://berth:secret@rabbit1:5672/berth")
    access_mod.check_options(conf)


# -- each refusal --------------------------------------------------------------------


@pytest.mark.parametrize(("method", "user", "args", "message"), [
    ("peers_changed", "agent-h1", {"by": "evil"},
     "peers_changed refused: sent by broker user 'agent-h1' (the agent of host h1); peers_changed may be "
     "called by schedulers ([roles] schedulers)"),
    ("peers_changed", "op", {"by": "x"},
     "peers_changed refused: sent by broker user 'op' (an operator); peers_changed may be called by "
     "schedulers ([roles] schedulers)"),
    ("disable", "api", {"host": "h1"},
     "disable refused: sent by broker user 'api' (a client); disable may be called by operators "
     "([roles] operators)"),
    ("disable", "sched", {"host": "h1"},
     "disable refused: sent by broker user 'sched' (a scheduler); disable may be called by operators "
     "([roles] operators)"),
    ("boot", "agent-h2", {"n": 1},
     "boot refused: sent by broker user 'agent-h2' (the agent of host h2); boot may be called by clients "
     "(any broker user but an agent's)"),
    ("boot", None, {"n": 1},
     "boot refused: sent by a message without a user_id (its broker user is unknown); boot may be called by "
     "clients (any broker user but an agent's)"),
    ("report", "agent-h2", {"host": "h1"},
     "report about host 'h1' refused: sent by broker user 'agent-h2' (the agent of host h2), but only the "
     "host's agent, broker user 'agent-h1', may send it"),
    ("report", "sched", {"host": "h1"},
     "report about host 'h1' refused: sent by broker user 'sched' (a scheduler), but only the host's agent, "
     "broker user 'agent-h1', may send it"),
    ("report", "agent-h1", {"host": "h7"},
     "report about host 'h7' refused: the host has no broker user in [roles] agents (sent by broker user "
     "'agent-h1' (the agent of host h1))"),
    ("place", "api", {"n": 1, "retry": ["h1"]},
     "place about host 'h1' refused: sent by broker user 'api' (a client), but only the host's agent, broker "
     "user 'agent-h1', may send it"),
    ("place", "agent-h1", {"n": 1},
     "place refused: sent by broker user 'agent-h1' (the agent of host h1); place may be called by clients "
     "(any broker user but an agent's) or the agent of the host it is about ([roles] agents)"),
])
def test_each_refusal_names_the_method_the_user_and_the_role_it_needed(method, user, args, message):
    with pytest.raises(NotAuthorized) as refused:
        send(method, user, **args)
    assert str(refused.value) == message
    assert refused.value.log_key == ("not-authorized", method, user)


@pytest.mark.parametrize(("method", "user", "args"), [
    ("peers_changed", "sched", {"by": "s2"}),
    ("disable", "op", {"host": "h1"}),
    ("disable", "agent-ops", {"host": "h1"}),
    ("boot", "api", {"n": 1}),
    ("boot", "sched", {"n": 1}),
    ("boot", "op", {"n": 1}),
    ("boot", "agent-ops", {"n": 1}),
    ("show", None, {}),
    ("show", "agent-h1", {}),
    ("report", "agent-h1", {"host": "h1"}),
    ("place", "api", {"n": 1}),
    ("place", "agent-h2", {"n": 1, "retry": ["h1", "h2"]}),
])
def test_each_role_may_call_its_own_methods(method, user, args):
    assert send(method, user, **args)[0] == method


def test_with_enforce_off_only_the_messages_about_a_host_are_checked():
    off = policy(enforce=False)
    for method, args in [("peers_changed", {"by": "evil"}), ("disable", {"host": "h1"}), ("boot", {"n": 1}),
                         ("report", {"host": "h7"}), ("place", {"n": 1, "retry": ["h7"]})]:
        assert send(method, "agent-h1", off, **args)[0] == method
        assert send(method, None, off, **args)[0] == method
    with pytest.raises(NotAuthorized, match="only the host's agent, broker user 'agent-h1', may send it"):
        send("report", "agent-h2", off, host="h1")
    with pytest.raises(NotAuthorized, match="has no broker user in"):
        send("report", "agent-h1", policy(enforce=False, require_agent_auth=True), host="h7")


# -- on a server: before the method runs, alone or in a batch -----------------------------


def publish(transport, topic, method, user, reply_q=None, **args):
    """A cast (or, with ``reply_q``, a call) of ``method`` with AMQP user_id ``user``, as RabbitMQ
    would deliver it from that user's connection."""
    msg = envelope.request(method, args, {}, msg_id="m-" + method if reply_q else None, reply_q=reply_q)
    properties = {} if user is None else {"user_id": user}
    with transport.connection("test") as conn:
        producer = kombu.Producer(conn.channel())
        exchange = topology.topic_exchange(transport)
        exchange(producer.channel).declare()
        producer.publish(json.dumps(envelope.wrap(msg)), exchange=exchange, routing_key=f"{topic}.s",
                         content_type="application/json", content_encoding="utf-8", **properties)


def test_a_refused_cast_is_dead_lettered_and_a_refused_call_answered_the_method_never_running(
        transport, topic, caplog):
    endpoint = Endpoint()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s"), [endpoint], access=policy())
    server.start()
    try:
        for _ in range(3):
            publish(transport, topic, "peers_changed", "agent-h1", by="evil")
        letters = dead_letters(transport, 3)
        assert [letter.headers["x-berth-reason"] for letter in letters] == [
            "NotAuthorized: peers_changed refused: sent by broker user 'agent-h1' (the agent of host h1); "
            "peers_changed may be called by schedulers ([roles] schedulers)"] * 3
        assert letters[0].headers["x-berth-method"] == "peers_changed"
        with pytest.raises(rpc.RemoteError) as refused:
            client = rpc.RPCClient(transport, rpc.Target(topic, server="s"), timeout=WAIT)
            client.call({}, "disable", host="h1")
        assert refused.value.exc_type == "NotAuthorized"
        assert refused.value.value.startswith("disable refused: sent by a message without a user_id")
        publish(transport, topic, "peers_changed", "sched", by="s2")
        deadline = threading.Event()
        while ("peers_changed", "s2") not in endpoint.ran and not deadline.wait(0.02):
            pass
    finally:
        server.stop()
        server.wait()
    assert endpoint.ran == [("peers_changed", "s2")]
    logged = [r.getMessage() for r in caplog.records if "peers_changed refused" in r.getMessage()]
    assert len(logged) == 1  # once a minute per method and user


def test_in_a_batch_the_refused_messages_fail_alone_and_the_others_run(transport, topic):
    endpoint = Endpoint()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s"), [endpoint], access=policy(),
                                batch_size=16, unit_of_work=None)
    with transport.connection("test") as conn:  # the messages wait for the server: one batch
        topology.shared_queue(transport, f"{topic}.s")(conn.channel()).declare()
    for n in range(6):
        publish(transport, topic, "boot", "agent-h2" if n % 2 else "api", n=n)
    server.start()
    try:
        letters = dead_letters(transport, 3)
    finally:
        server.stop()
        server.wait()
    assert sorted(endpoint.ran) == [("boot", 0), ("boot", 2), ("boot", 4)]
    assert len(letters) == 3 and all(
        letter.headers["x-berth-reason"].startswith("NotAuthorized: boot refused: sent by broker user "
                                                    "'agent-h2'") for letter in letters)


def test_on_rabbit_a_daemon_says_once_that_anyone_may_call_anything_while_enforce_is_off(caplog, monkeypatch):
    monkeypatch.setattr(access_mod, "_warned", [])
    rabbit = types.SimpleNamespace(is_rabbit=True, safe_url="rabbit://berth:***@rabbit1:5672/berth")
    with caplog.at_level(logging.WARNING):
        for topic in ("scheduler", "compute", "compute"):
            policy(enforce=False).warn_if_open(rabbit, topic)
        policy(enforce=True).warn_if_open(rabbit, "scheduler")
        policy(enforce=False).warn_if_open(types.SimpleNamespace(is_rabbit=False), "scheduler")
    assert [r.getMessage() for r in caplog.records] == [
        "[roles] enforce is off: any user of the broker at rabbit://berth:***@rabbit1:5672/berth may call "
        "every method of scheduler (boot, delete, disable and delete hosts, tell the schedulers the hosts "
        "changed...) but those about a host ([roles] agents). List the schedulers', operators' and agents' "
        "broker users in [roles] and set [roles] enforce = true (admin guide: Who may speak)"]
