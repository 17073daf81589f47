"""``berth host drain`` and ``berth rebalance apply`` against a real scheduler in this process
(memory://, SQLite, the agents replaced by recorders): the command starts a job and watches it,
and the scheduler's runner carries it on. Each look of the command (its ``sleep``) is a look of
the runner, after the destinations said how the moves under way ended; no fake copies the
scheduler's rules."""

import io

import pytest
from oslo_config import cfg

from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.cmd.arguments import Interrupted
from scheduler.cmd.draining import Drain
from scheduler.cmd.job_watch import bar
from scheduler.cmd.rebalancing import Apply
from scheduler.db import models
from scheduler.process import startup as config
from scheduler.service import SchedulerService
from tests.unit.cli_scheduler import main, parse, write_conf
from tests.unit.moves.test_rebalance import BIGGER, boot, reported
from tests.unit.scheduler import manager_world
from tests.unit.scheduler.manager_world import HOSTS, Recorder, report, request
from tests.unit.scheduler.service_parts import transport_and_database

CTX = rpc.Context({})


class Scheduler:
    """A started SchedulerService (its own runner left to the tests: ``[jobs] interval`` is long),
    recorders for agents, and a client as berth's."""

    def __init__(self, conf_file):
        self.conf = cfg.ConfigOpts()
        config.load(["--config-file", str(conf_file)], "berth-scheduler", conf=self.conf)
        self.transport, self.database = transport_and_database(self.conf)
        self.service = SchedulerService(self.conf, self.transport, self.database)
        self.agents, self.servers = {}, []
        for host in HOSTS:
            self.agents[host] = Recorder(rpc.RPCClient(self.transport, rpc.Target("compute", server=host)))
            target = rpc.Target("compute", server=host)
            server = rpc.get_rpc_server(self.transport, target, [self.agents[host]])
            server.start()
            self.servers.append(server)
        self.service.start()
        for host, ram in HOSTS.items():
            self.service.manager.report_resources({}, host, report(host, ram))
        self.world = (self.service.manager, self.database, self.agents)
        self.client = SchedulerClient(self.transport, timeout=10)
        self.fail = {}  # instance uuid: the reason its destination gives for failing its move
        self.moves_end = True  # the destinations end the moves under way at each look
        self.looks = 0
        self.on_look = None  # called at each look, before the runner

    def look(self, seconds=None):
        """The command waits: the destinations end the moves under way, the runner looks."""
        self.looks += 1
        if self.on_look is not None:
            self.on_look(self.looks)
        for migration in self.database.list_migrations(status="migrating") if self.moves_end else ():
            uuid = migration["instance_uuid"]
            if uuid in self.fail:
                self.service.moves.move_update(CTX, uuid, migration["dest_host"], migration["id"], "failed",
                                               {"reason": self.fail[uuid]})
            else:
                manager_world.moved(self.service.parts, migration, CTX)
        self.service.job_loop.runner.run_once()

    def close(self):
        self.service.stop()
        for server in self.servers:
            server.stop()
            server.wait()
        self.transport.cleanup()
        self.database.dispose()


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path, "host = s1\n[scaling]\nenabled = false\n[jobs]\ninterval = 60\n")


@pytest.fixture
def scheduler(conf_file):
    found = Scheduler(conf_file)
    yield found
    found.close()


def drain(scheduler, host="h2", **options):
    out = io.StringIO()
    status = Drain(scheduler.client, host, out, sleep=scheduler.look, interval=0, **options).run()
    return status, out.getvalue().splitlines()


def apply(scheduler, plan_id, **options):
    out = io.StringIO()
    status = Apply(scheduler.client, plan_id, out, sleep=scheduler.look, interval=0, **options).run()
    return status, out.getvalue().splitlines()


def steps_of(scheduler):
    """The instances of the newest job's steps, in order."""
    database = scheduler.database
    return [s["instance_uuid"] for s in database.get_job(database.list_jobs()[0]["id"])["steps"]]


def named(scheduler, host, name, memory_mb=1024):
    uuid = boot(scheduler.world, host, memory_mb)
    scheduler.database.update_instance(uuid, {"display_name": name})
    return uuid


# -- berth host drain --------------------------------------------------------------------------


def test_drain_disables_the_host_and_moves_everything_off_it(scheduler):
    database = scheduler.database
    moved = [named(scheduler, "h2", f"web-{n}") for n in range(1, 6)]
    stays = boot(scheduler.world, "h3", 1024)
    status, lines = drain(scheduler)
    assert status == 0
    assert lines[:2] == ["host h2 disabled: draining", "moving 5 instance(s) off h2, at most 2 at a time"]
    told = [line for line in lines[2:-1] if line.startswith("moved ")]
    assert [line.rsplit(" ", 1)[1] for line in told] == ["(1/5)", "(2/5)", "(3/5)", "(4/5)", "(5/5)"]
    hosts = {u: database.get_instance(u)["host"] for u in moved}
    assert sorted(line.rsplit(" ", 1)[0] for line in told) == sorted(
        f"moved {u} (web-{n}) to {hosts[u]}" for n, u in enumerate(moved, 1))
    # Each move is told as it starts too, before the line that says it ended.
    migration_of = {m["instance_uuid"]: m["id"] for m in database.list_migrations(host="h2")}
    started = [line for line in lines[2:-1] if line.startswith("moving ")]
    assert sorted(started) == sorted(f"moving {u} (web-{n}) to {hosts[u]} (migration {migration_of[u]})"
                                     for n, u in enumerate(moved, 1))
    assert len(lines) == 2 + 5 + 5 + 1
    assert lines[-1] == "host h2 is empty"
    assert set(hosts.values()) <= {"h1", "h3"} and database.get_instance(stays)["host"] == "h3"
    assert scheduler.service.parts.host_manager.disabled == {"h2": "draining"}
    [migration] = database.list_migrations(instance_uuid=moved[0])
    assert migration["kind"] == "migration"  # not --live


def test_drain_never_has_more_moves_under_way_than_asked(scheduler):
    for _ in range(5):
        boot(scheduler.world, "h2", 512)
    most = []
    scheduler.on_look = lambda n: most.append(len(scheduler.database.list_migrations(status="migrating")))
    assert drain(scheduler, max_parallel=3, live=True)[0] == 0
    assert max(most) == 3
    assert {m["kind"] for m in scheduler.database.list_migrations(host="h2")} == {"live-migration"}


def test_drain_lists_what_failed_and_why_and_exits_1(scheduler):
    big = boot(scheduler.world, "h2", 9000)  # no other host has room
    failing = boot(scheduler.world, "h2", 1024)
    moving = boot(scheduler.world, "h2", 1024)
    scheduler.fail[failing] = "disk full on the destination"
    [building], spec, props = request()
    scheduler.service.manager.run_instance(CTX, spec, dict(props, force_hosts=["h2"]))  # not ACTIVE yet
    status, lines = drain(scheduler)
    assert status == 1
    refused = next(line for line in lines if line.startswith(f"failed to move {big}: "))
    assert f"Instance {big} cannot be moved (migration): No valid host was found" in refused
    assert any(line.startswith(f"failed to move {failing}: disk full on the destination (") for line in lines)
    assert any(line.startswith(f"moved {moving} to ") for line in lines)
    at = lines.index("host h2 is not empty: 3 instance(s) not moved")
    assert sorted(lines[at + 1:]) == sorted([
        refused[len("failed to move "):].rsplit(" (", 1)[0].replace(f"{big}: ", f"  {big}: ", 1),
        f"  {failing}: disk full on the destination",
        f"  {building}: SCHEDULED: only ACTIVE instances are moved"])


def test_drain_of_an_empty_host_says_so_and_of_an_unknown_host_is_refused(scheduler):
    assert drain(scheduler, host="h3") == (0, ["host h3 disabled: draining", "host h3 is empty"])
    with pytest.raises(rpc.RemoteError, match="nosuch"):
        drain(scheduler, host="nosuch")
    assert [j["host"] for j in scheduler.database.list_jobs()] == ["h3"]


def test_ctrl_c_leaves_the_drain_going_on_and_running_the_command_again_watches_it(scheduler):
    for _ in range(4):
        boot(scheduler.world, "h2", 1024)

    def interrupt(look):
        if look == 3:  # one move ended, the second under way
            raise KeyboardInterrupt

    scheduler.on_look = interrupt
    status, lines = drain(scheduler, max_parallel=1)
    assert status == 130
    job = scheduler.database.list_jobs()[0]
    assert lines[-3:] == [f"detached: the drain of h2 goes on in the scheduler (job {job['id']}: 1 moved, "
                          "0 failed, 3 to go)",
                          "watch it again: berth host drain h2", "stop it: berth host drain h2 --stop"]
    scheduler.on_look = None
    scheduler.look()  # the scheduler goes on without the command
    assert sum(s["status"] == "done" for s in scheduler.database.get_job(job["id"])["steps"]) == 2
    status, lines = drain(scheduler, max_parallel=1)
    assert status == 0 and lines[-1] == "host h2 is empty"
    assert lines[1].startswith(f"drain job {job['id']} of host h2 is under way already (started ")
    assert [line.rsplit(" ", 1)[1] for line in lines if line.startswith("moved ")] == ["(3/4)", "(4/4)"]
    assert len(scheduler.database.list_jobs()) == 1


def test_drain_stop_from_another_terminal_starts_no_new_move_and_the_drain_exits_1(scheduler, conf_file):
    for _ in range(3):
        boot(scheduler.world, "h2", 1024)
    stopped = []

    def stop(look):
        if look == 2:  # the first move under way
            stopped.append(main(conf_file, "host", "drain", "h2", "--stop"))

    scheduler.on_look = stop
    status, lines = drain(scheduler, max_parallel=1)
    assert stopped == [(0, "drain of host h2 stopping: 1 move(s) under way end on their own\n")]
    assert status == 1
    uuids = steps_of(scheduler)
    assert lines[2].startswith(f"moving {uuids[0]} to ")
    assert lines[3].startswith(f"moved {uuids[0]} to ") and lines[3].endswith(" (1/3)")
    assert lines[-4:] == ["drain of host h2 stopped (stopped by berth host drain h2 --stop)",
                          "host h2 is not empty: 2 instance(s) not moved",
                          f"  {uuids[1]}: not started: stopped by berth host drain h2 --stop",
                          f"  {uuids[2]}: not started: stopped by berth host drain h2 --stop"]
    assert main(conf_file, "host", "drain", "h2", "--stop")[0] == 1  # nothing under way: a command error


def test_the_timeout_starts_no_new_move_and_waits_for_none(scheduler):
    database = scheduler.database
    for _ in range(3):
        boot(scheduler.world, "h2", 1024)

    def time_passes(look):
        if look == 2:  # the first move under way, the timeout passes
            with database._transaction(write=True) as connection:
                connection.execute(models.jobs.update().values(deadline=database.now()))

    scheduler.on_look = time_passes
    scheduler.moves_end = False
    status, lines = drain(scheduler, max_parallel=1, timeout=25)
    assert status == 1
    [migration] = database.list_migrations(status="migrating")
    uuids = steps_of(scheduler)
    assert lines[-4:] == ["host h2 is not empty: 3 instance(s) not moved",
                          f"  {uuids[0]}: still moving (timed out after 25 s): migration {migration['id']}",
                          f"  {uuids[1]}: not started: timed out after 25 s",
                          f"  {uuids[2]}: not started: timed out after 25 s"]


def test_on_a_terminal_a_progress_bar_stays_below_the_lines(scheduler):
    for _ in range(2):
        boot(scheduler.world, "h2", 1024)
    out = io.StringIO()
    status = Drain(scheduler.client, "h2", out, sleep=scheduler.look, interval=0, max_parallel=1,
                   tty=True).run()
    text = out.getvalue()
    assert status == 0
    assert "\r[" + "." * 24 + "] 0/2: 0 done, 0 under way, 2 to start" in text
    assert "] 1/2: 1 done, 1 under way, 0 to start" in text
    assert text.endswith(" (2/2)\nhost h2 is empty\n")
    assert " " * 30 + "\rmoved " in text  # the bar erased before a step's line
    assert bar({"steps": []}) == "[" + "#" * 24 + "] 0/0: 0 done, 0 under way, 0 to start"


def test_drain_as_a_command_and_with_a_cap_below_the_jobs_api(scheduler, conf_file, tmp_path, capsys):
    scheduler.on_look = None
    (tmp_path / "capped").mkdir()
    capped = write_conf(tmp_path / "capped", "[upgrade_levels]\nadmin = 1.2\n")
    status, out = main(capped, "host", "drain", "h2")
    assert status == 1 and out == ""
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]
    assert err[0].startswith("berth: start_drain needs version 1.3 of the admin API, above its cap")
    assert scheduler.service.parts.host_manager.disabled == {}  # nothing changed


# -- berth rebalance apply ----------------------------------------------------------------------


@pytest.fixture
def plan(scheduler):
    """h1 holds 2 + 2 + 3 GB: room for 7 GB there takes all three off, onto h2 and h3."""
    for memory in (2048, 2048, 3072):
        boot(scheduler.world, "h1", memory)
    boot(scheduler.world, "h2", 11264)
    boot(scheduler.world, "h3", 2048)
    reported(scheduler.world)
    return scheduler.service.parts.rebalance.plan_rebalance(CTX, "make_room", {"flavor": BIGGER})


def test_apply_starts_every_step_never_more_than_asked_and_the_plan_is_done(scheduler, plan):
    most = []
    scheduler.on_look = lambda n: most.append(len(scheduler.database.list_migrations(status="migrating")))
    status, lines = apply(scheduler, plan["id"], max_parallel=2)
    assert status == 0
    assert lines[0] == f"applying rebalance plan {plan['id']}: 3 step(s) to start, at most 2 at a time"
    for step in plan["steps"]:
        p, uuid = step["position"], step["instance_uuid"]
        started = [line for line in lines if line.startswith(f"step {p}: moving {uuid} from h1 to "
                                                             f"{step['dest_host']} (migration ")]
        assert len(started) == 1
        assert lines.index(started[0]) < lines.index(f"step {p} moved {uuid} to {step['dest_host']}")
    assert lines[-1] == f"rebalance plan {plan['id']} done: 3 done"
    assert max(most) == 2
    assert apply(scheduler, plan["id"]) == (0, [f"rebalance plan {plan['id']} is done"])


def test_apply_and_show_name_each_steps_instance_by_its_name_too(scheduler, plan, conf_file):
    for n, step in enumerate(plan["steps"], 1):
        scheduler.database.update_instance(step["instance_uuid"], {"display_name": f"web-{n}"})
    status, lines = apply(scheduler, plan["id"], max_parallel=1)
    assert status == 0
    for n, step in enumerate(plan["steps"], 1):
        p, uuid = step["position"], step["instance_uuid"]
        assert f"step {p} moved {uuid} (web-{n}) to {step['dest_host']}" in lines
        assert any(line.startswith(f"step {p}: moving {uuid} (web-{n}) from h1 to ") for line in lines)
    status, out = main(conf_file, "rebalance", "show", str(plan["id"]), "-f", "value", "-c", "instance",
                       "-c", "name")
    assert out.splitlines() == [f"{s['instance_uuid']} web-{n}" for n, s in enumerate(plan["steps"], 1)]


def test_ctrl_c_before_the_plan_is_applied_or_in_its_last_listing_is_one_line_and_130(scheduler, plan,
                                                                                     conf_file):
    class Interrupting(SchedulerClient):
        def admin_call(self, ctxt, method, **kwargs):
            if method == "show_rebalance_plan":
                raise KeyboardInterrupt
            return super().admin_call(ctxt, method, **kwargs)

    args = parse(conf_file, "rebalance", "apply", str(plan["id"]))
    with pytest.raises(Interrupted) as raised:
        args.func(Interrupting(scheduler.transport, timeout=10), args, io.StringIO())
    assert raised.value.exit_code == 130
    assert str(raised.value) == (
        f"interrupted: if rebalance plan {plan['id']} is being applied, the scheduler carries it on: "
        f"`berth rebalance show {plan['id']}` shows it, `berth rebalance stop {plan['id']}` stops it")
    assert scheduler.database.list_jobs() == []


def test_apply_stops_at_a_refused_step_saying_why_and_exits_1(scheduler, plan):
    first = plan["steps"][0]
    boot(scheduler.world, first["dest_host"], 512)  # placed on the planned destination meanwhile
    status, lines = apply(scheduler, plan["id"], max_parallel=1)
    assert status == 1
    [refused] = [line for line in lines if line.startswith("step 1 refused: ")]
    assert refused.startswith(f"step 1 refused: host {first['dest_host']} changed since the plan was made")
    assert lines[-1] == (f"rebalance plan {plan['id']} stopped: 1 failed, 2 pending ("
                         f"{refused})")
    assert scheduler.database.list_migrations(status="migrating") == []
    assert apply(scheduler, plan["id"]) == (1, [f"rebalance plan {plan['id']} is stopped ({refused})"])


def test_apply_stops_at_a_step_whose_move_failed(scheduler, plan):
    scheduler.fail[plan["steps"][0]["instance_uuid"]] = "disk on fire"
    status, lines = apply(scheduler, plan["id"], max_parallel=1)
    assert status == 1
    assert "step 1 failed: disk on fire" in lines
    assert lines[-1] == (f"rebalance plan {plan['id']} stopped: 1 failed, 2 pending "
                         "(step 1 failed: disk on fire)")


def test_ctrl_c_leaves_the_plan_going_on_and_apply_stop_stops_it(scheduler, plan, conf_file):
    def interrupt(look):
        if look == 2:  # step 1 under way
            raise KeyboardInterrupt

    scheduler.on_look = interrupt
    status, lines = apply(scheduler, plan["id"], max_parallel=1)
    assert status == 130
    assert lines[-2:] == [f"watch it again: berth rebalance apply {plan['id']}",
                          f"stop it: berth rebalance stop {plan['id']}"]
    scheduler.on_look = None
    scheduler.look()  # the scheduler goes on without the command: step 1 done, step 2 started
    shown = scheduler.client.admin_call({}, "show_rebalance_plan", plan_id=plan["id"])
    assert [s["status"] for s in shown["steps"]] == ["done", "running", "pending"]
    assert main(conf_file, "rebalance", "apply", str(plan["id"]), "--stop") == (
        0, f"rebalance plan {plan['id']} stopping: 1 step(s) under way end on their own\n")
    status, lines = apply(scheduler, plan["id"])  # watches the job until the step under way ends
    assert status == 1
    assert lines[-1] == (f"rebalance plan {plan['id']} stopped: 2 done, 1 pending "
                         "(stopped by berth rebalance stop)")
